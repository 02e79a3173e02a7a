"""Bastion's own reader of git config files (tools/gitconfig.py) against git's: for
configs written to hide a setting (a key on the header's line, odd case, a value
continued over lines, comments, quotes, the old `[section.sub]` form, a BOM, CRLF),
it must find exactly the settings git finds, or refuse to read the file (which the
guard treats as dangerous). And the judgement: inert keys pass, the rest do not.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from tools import gitconfig

TRICKY = {
    "key on the header line": b"[core]fsmonitor = a\n",
    "key after a space on the header line": b"[core] fsmonitor = a\n",
    "mixed case": b"[CoRe]\n\tFsMonitor=a\n",
    "continued value": b'[core]\n\tfsmonitor = "touch \\\n /tmp/x"\n',
    "comment after the value": b"[core]\n\tfsmonitor = a ; comment\n",
    "comment characters in quotes": b'[core]\n\tfsmonitor = "a;b#c" # c\n',
    "bare key": b"[core]\n\tbare\n",
    "old subsection form": b"[remote.Origin]\n\turl = x\n",
    "escaped quote in a subsection": b'[remote "Or\\"ig"]\n\turl = x\n',
    "byte order mark": b"\xef\xbb\xbf[core]\n\tfsmonitor = a\n",
    "CRLF": b"[core]\r\n\tfsmonitor = a\r\n",
    "inner and outer spaces": b"[core]\n\tfsmonitor =   spaced   value  \n",
    "escapes": b"[core]\n\tfsmonitor = a\\tb\\nc\n",
    "includeIf": b'[includeIf "gitdir:/"]\n\tpath = /x\n',
    "only a comment": b"# nothing\n; nothing\n",
    "empty quoted value": b'[core]\n\tfsmonitor = ""\n',
    "dotted old form": b"[a.b.c]\n\tk = v\n",
    "comment after a header": b"[core] ; comment\n\tfsmonitor = a\n",
    "continuation then a blank line": b"[core]\n\tfsmonitor = a\\\n\n",
    "adjacent quotes": b'[core]\n\tfsmonitor="a""b"\n',
    "empty subsection": b'[core]\n\tfsmonitor = x\n[core ""]\n\tk = v\n',
    "tab before equals": b"[core]\n\tfsmonitor\t=\tx\n",
    "quoted spaces kept": b'[core]\n\tfsmonitor = "  a  "  b  \n',
    "no newline at the end": b"[core]\n\tfsmonitor = a",
    "section with dash": b"[my-sec]\n\tmy-key = 1\n",
    "bad escape": b"[core]\n\tfsmonitor = a\\qb\n",
    "unterminated quote": b'[core]\n\tfsmonitor = "a\n',
    "key before a section": b"fsmonitor = a\n",
    "NUL": b"[core]\n\tfsmonitor = a\0b\n",
    "key with a digit first": b"[core]\n\t1fsmonitor = a\n",
}


# git reads these, bastion refuses them (so the guard calls the file dangerous): a NUL
# (git stops the value there) and a key before any section (git keeps it, sectionless).
REFUSED_ON_PURPOSE = {"NUL", "key before a section"}


def git_reads(tmp_path: pathlib.Path, data: bytes) -> list[tuple[str, str | None]] | None:
    """What `git config --list` finds in `data` (None: git refuses the file)."""
    path = tmp_path / "config"
    path.write_bytes(data)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "config", "--file", str(path), "--list", "-z"],
        capture_output=True, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    found: list[tuple[str, str | None]] = []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]:
        key, newline, value = item.partition("\n")
        found.append((key, value if newline else None))
    return found


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_the_reader_finds_what_git_finds_or_refuses(name: str, tmp_path: pathlib.Path) -> None:
    data = TRICKY[name]
    theirs = git_reads(tmp_path, data)
    try:
        ours: list[tuple[str, str | None]] | None = [
            (s.key, s.value) for s in gitconfig.parse(data)
        ]
    except gitconfig.ConfigSyntaxError:
        ours = None
    if theirs is None:
        assert ours is None or ours == [], f"git refuses {name!r}; bastion read {ours}"
        return
    if name in REFUSED_ON_PURPOSE:
        assert ours is None
    else:
        assert ours == theirs


def inside_nothing(path: str) -> bool:
    return False


@pytest.mark.parametrize(
    "text",
    [
        b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
        b"\tlogallrefupdates = true\n",
        b"[user]\n\temail = me@example.invalid\n\tname = Me\n",
        b'[remote "origin"]\n\turl = https://example.invalid/r.git\n'
        b"\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
        b'[branch "main"]\n\tremote = origin\n\tmerge = refs/heads/main\n',
        b'[submodule "sub"]\n\turl = ../sub.git\n\tactive = true\n\tupdate = rebase\n',
        b'[color]\n\tui = auto\n[color "diff"]\n\tmeta = yellow\n',
    ],
)
def test_what_git_writes_in_ordinary_work_is_inert(text: bytes) -> None:
    assert gitconfig.dangerous(text, inside_nothing) == []


@pytest.mark.parametrize(
    "text,key",
    [
        (b"[core]\n\tfsmonitor = x\n", "core.fsmonitor"),
        (b"[core]\n\thooksPath = /tmp\n", "core.hookspath"),
        (b"[core]\n\tsshCommand = x\n", "core.sshcommand"),
        (b"[core]\n\tpager = x\n", "core.pager"),
        (b"[core]\n\teditor = x\n", "core.editor"),
        (b"[core]\n\tworktree = /etc\n", "core.worktree"),
        (b"[alias]\n\tst = !touch x\n", "alias.st"),
        (b"[include]\n\tpath = x\n", "include.path"),
        (b'[includeIf "onbranch:main"]\n\tpath = x\n', "includeif.onbranch:main.path"),
        (b'[filter "lfs"]\n\tclean = x\n', "filter.lfs.clean"),
        (b'[diff "x"]\n\ttextconv = x\n', "diff.x.textconv"),
        (b"[diff]\n\texternal = x\n", "diff.external"),
        (b"[credential]\n\thelper = x\n", "credential.helper"),
        (b'[url "ext::sh"]\n\tinsteadOf = https://\n', "url.ext::sh.insteadof"),
        (b'[submodule "s"]\n\tupdate = !touch x\n', "submodule.s.update"),
        (b'[remote "o"]\n\turl = ext::sh -c touch% x\n', "remote.o.url"),
        (b'[remote "o"]\n\tuploadpack = touch x\n', "remote.o.uploadpack"),
        (b"[uploadpack]\n\tpackObjectsHook = x\n", "uploadpack.packobjectshook"),
        (b"[gpg]\n\tprogram = x\n", "gpg.program"),
        (b"[some]\n\tnewkey = x\n", "some.newkey"),
    ],
)
def test_settings_that_run_or_redirect_are_not_inert(text: bytes, key: str) -> None:
    [(found, why)] = gitconfig.dangerous(text, inside_nothing)
    assert found == key and why


def test_a_setting_already_there_before_is_not_reported_again() -> None:
    before = b"[core]\n\tpager = less\n"
    after = before + b"[user]\n\temail = x@y\n"
    assert gitconfig.dangerous(after, inside_nothing, before) == []
    assert gitconfig.dangerous(after + b"[core]\n\tfsmonitor = x\n", inside_nothing, before) == [
        ("core.fsmonitor", "runs a program at every git status")
    ]


def test_an_unreadable_config_is_dangerous() -> None:
    [(key, why)] = gitconfig.dangerous(b"[core\n\tfsmonitor = x\n", inside_nothing)
    assert key == "(unreadable)" and "git might read it otherwise" in why
