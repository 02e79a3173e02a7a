"""Issue 34 item 1: bastion's own git (the snapshot made before each command and read
at /rewind) obeys nothing the workspace, the user's git config or bastion's
environment says.

Each case builds a hostile repository whose configuration runs a program that
leaves a mark outside the workspace (core.fsmonitor, a clean filter, an include,
a `.git` file or `commondir` leading to such a config, the user's ~/.gitconfig,
GIT_CONFIG_* variables) and takes a snapshot the way bastion does before a
command: no mark may appear, and the snapshot must still be made.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess

import pytest

from runtime.run import effects


def snapshots():  # imported where used: the attacks also run against the code before the fix
    from runtime.run import snapshots

    return snapshots


KEY = "sk-bastion-user-key-0123456789"


def git(cwd: pathlib.Path, *args: str) -> None:
    """The test's own git, run with a clean environment (never what is under test)."""
    env = {
        "PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
    }  # fmt: skip
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def marking(mark: pathlib.Path) -> str:
    """A shell command that leaves `mark` with the environment it ran in."""
    return f"env > {mark}; false"


def repo(path: pathlib.Path) -> pathlib.Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


def add_config(git_dir: pathlib.Path, text: str) -> None:
    with open(git_dir / "config", "a") as handle:
        handle.write(text)


def fsmonitor(mark: pathlib.Path) -> str:
    return f'[core]\n\tfsmonitor = "{marking(mark)}"\n'


def plant_fsmonitor(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    add_config(ws / ".git", fsmonitor(mark))


def plant_filter(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    (ws / ".gitattributes").write_text("* filter=evil\n")
    add_config(ws / ".git", f'[filter "evil"]\n\tclean = "{marking(mark)}; cat"\n')


def plant_include(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    (ws / "evil.conf").write_text(fsmonitor(mark))
    add_config(ws / ".git", "[include]\n\tpath = ../evil.conf\n")


def plant_gitfile(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    """The workspace's .git is a file leading to a git dir elsewhere."""
    elsewhere = repo(tmp / "elsewhere") / ".git"
    add_config(elsewhere, fsmonitor(mark))
    subprocess.run(["rm", "-rf", str(ws / ".git")], check=True)
    (ws / ".git").write_text(f"gitdir: {elsewhere}\n")


def plant_commondir(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    """The workspace's .git holds only HEAD and a commondir leading elsewhere."""
    common = repo(tmp / "common") / ".git"
    add_config(common, fsmonitor(mark))
    subprocess.run(["rm", "-rf", str(ws / ".git")], check=True)
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/master\n")
    (ws / ".git" / "commondir").write_text(f"{common}\n")


def plant_user_config(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    """The user's own ~/.gitconfig (bastion's HOME) names a program."""
    (pathlib.Path(os.environ["HOME"]) / ".gitconfig").write_text(fsmonitor(mark))


def plant_environment(ws: pathlib.Path, tmp: pathlib.Path, mark: pathlib.Path) -> None:
    """GIT_CONFIG_* variables in bastion's own environment name a program."""
    os.environ.update(
        GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="core.fsmonitor", GIT_CONFIG_VALUE_0=marking(mark)
    )


HOSTILE = {
    "fsmonitor": plant_fsmonitor,
    "clean filter": plant_filter,
    "include.path": plant_include,
    ".git file": plant_gitfile,
    "commondir": plant_commondir,
    "user ~/.gitconfig": plant_user_config,
    "GIT_CONFIG_* in the environment": plant_environment,
}


@pytest.fixture
def hostile_env(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bastion's environment: the user's key, a HOME of the test's own."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")  # (the machine's own config is not the test's)


def capture(ws: pathlib.Path, command: str = "echo hi") -> dict:
    return effects.capture(str(ws), "run_command", json.dumps({"command": command}))


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_snapshot_runs_nothing_the_repository_or_the_user_config_names(
    attack: str, tmp_path: pathlib.Path, hostile_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = repo(tmp_path / "ws")
    (ws / "b.txt").write_text("untracked\n")
    mark = tmp_path / "PWNED"
    with monkeypatch.context():
        HOSTILE[attack](ws, tmp_path, mark)
        effect = capture(ws)
    leaked = mark.read_text() if mark.exists() else ""
    assert not mark.exists(), f"bastion's git ran the planted program (key leaked: {KEY in leaked})"
    assert effect["kind"] == "git", effect
    repo_ = snapshots().SnapshotRepo(str(ws))
    assert set(repo_.git("ls-tree", "--name-only", effect["tree"]).decode().split()) >= {
        "a.txt", "b.txt"
    }  # fmt: skip


def test_the_snapshot_repository_is_bastions_own_and_outside_the_workspace(
    tmp_path: pathlib.Path, hostile_env: None
) -> None:
    ws = repo(tmp_path / "ws")
    effect = capture(ws)
    git_dir = pathlib.Path(
        os.environ["BASTION_HOME"], "snapshots", f"{snapshots().key_of(str(ws))}.git"
    )
    assert effect["repository"] == snapshots().key_of(str(ws)) and git_dir.is_dir()
    assert stat.S_IMODE(git_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(git_dir.parent.stat().st_mode) == 0o700
    # The user's repository got no object, index change or lock from bastion.
    objects = sorted(p.name for p in (ws / ".git" / "objects").iterdir())
    capture(ws)
    assert sorted(p.name for p in (ws / ".git" / "objects").iterdir()) == objects


def test_a_tampered_snapshot_repository_is_put_back_before_git_reads_it(
    tmp_path: pathlib.Path, hostile_env: None
) -> None:
    """Were a command ever to reach bastion's repository, its config and attributes
    are bastion's bytes again before the next git runs."""
    ws = repo(tmp_path / "ws")
    mark = tmp_path / "PWNED"
    capture(ws)
    git_dir = pathlib.Path(
        os.environ["BASTION_HOME"], "snapshots", f"{snapshots().key_of(str(ws))}.git"
    )
    add_config(git_dir, fsmonitor(mark) + "[include]\n\tpath = /etc/evil\n")
    (git_dir / "info" / "attributes").write_text("* filter=evil\n")
    add_config(git_dir, f'[filter "evil"]\n\tclean = "{marking(mark)}; cat"\n')
    (ws / "c.txt").write_text("changed\n")
    assert capture(ws)["kind"] == "git"
    assert not mark.exists()


def test_nested_repositories_run_nothing_and_cannot_hang_the_snapshot(
    tmp_path: pathlib.Path, hostile_env: None
) -> None:
    """A nested repository with hostile config, hooks and attributes of its own, and
    one whose HEAD is a FIFO (git reading it would wait for ever): the snapshot leaves
    both out, runs nothing, and is made."""
    ws = repo(tmp_path / "ws")
    mark = tmp_path / "PWNED"
    nested = repo(ws / "vendor" / "lib")
    add_config(nested / ".git", fsmonitor(mark) + "[core]\n\thooksPath = hooks2\n")
    add_config(nested / ".git", f'[filter "evil"]\n\tclean = "{marking(mark)}; cat"\n')
    (nested / ".gitattributes").write_text("* filter=evil\n")
    for hook in ("pre-commit", "post-checkout", "post-index-change", "fsmonitor-watchman"):
        for folder in (nested / ".git" / "hooks", nested / "hooks2"):
            folder.mkdir(exist_ok=True)
            (folder / hook).write_text(f"#!/bin/sh\n{marking(mark)}\n")
            (folder / hook).chmod(0o755)
    stuck = repo(ws / "stuck")
    (stuck / ".git" / "HEAD").unlink()
    os.mkfifo(stuck / ".git" / "HEAD")
    (ws / "vendor" / "kept.txt").write_text("kept\n")
    effect = capture(ws)
    assert effect["kind"] == "git", effect
    assert not mark.exists()
    names = (
        snapshots()
        .SnapshotRepo(str(ws))
        .git("ls-tree", "-r", "--name-only", effect["tree"])
        .decode()
    )
    assert names.split() == ["a.txt", "vendor/kept.txt"]


def test_a_restore_gets_the_bytes_back_raw_whatever_the_attributes_say(
    tmp_path: pathlib.Path, hostile_env: None
) -> None:
    """`ident`, `text eol=crlf` and a working-tree-encoding in .gitattributes used to go
    through git's conversions on the way in and out (`cat-file --filters`): `$Id$`
    came back expanded and LF came back CRLF."""
    ws = repo(tmp_path / "ws")
    (ws / ".gitattributes").write_text(
        "*.txt ident text eol=crlf\n*.u16 working-tree-encoding=UTF-16\n"
    )
    originals = {
        "id.txt": b"keep $Id$ as it is\nsecond line\n",
        "mixed.txt": b"lf\ncrlf\r\nlone\rcr\n",
        "text.u16": "h\u00e9llo\n".encode("utf-16"),
    }
    for name, data in originals.items():
        (ws / name).write_bytes(data)
    effect = capture(ws)
    for name in originals:
        (ws / name).write_bytes(b"changed by the command\n")
    call = effects.SpanCall("c1", "run_command", "{}", "git", None, None,
                            {k: v for k, v in effect.items() if k != "kind"})  # fmt: skip
    plan = effects.plan("conv", "entry", str(ws), [call])
    assert plan.cannot_undo == ()
    got = {f.path: f.content for f in plan.files}
    assert got == originals


def test_a_snapshot_an_older_bastion_made_is_not_read_by_running_git_in_the_workspace(
    tmp_path: pathlib.Path, hostile_env: None
) -> None:
    """Records made in the user's repository (`toplevel`/`prefix`) are not read: reading
    them meant running git there. The plan says the snapshot cannot be read."""
    ws = repo(tmp_path / "ws")
    mark = tmp_path / "PWNED"
    plant_fsmonitor(ws, tmp_path, mark)
    old = {"command": "make", "tree": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
           "toplevel": str(ws), "prefix": ""}  # fmt: skip
    call = effects.SpanCall("c1", "run_command", "{}", "git", None, None, old)
    plan = effects.plan("conv", "entry", str(ws), [call])
    assert not mark.exists()
    assert plan.files == ()
    assert plan.cannot_undo == (
        "`make`: its git snapshot 4b825dc642cb was made by an older bastion in the "
        "repository's own git, which bastion no longer opens; it cannot be read any more",
    )


def test_whether_the_workspace_is_a_repository_is_answered_without_git(
    tmp_path: pathlib.Path, hostile_env: None
) -> None:
    """A folder below a repository, a `.git` file, a bare `.git` folder: git snapshot;
    no `.git` anywhere up: the untracked manifest."""
    top = repo(tmp_path / "top")
    (top / "sub").mkdir()
    (top / "sub" / "f.txt").write_text("f\n")
    assert capture(top / "sub")["kind"] == "git"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("f\n")
    assert capture(plain)["kind"] == "untracked"
    (plain / ".git").mkdir()  # an empty .git: not a repository to git, but one to bastion
    assert capture(plain)["kind"] == "git"


def test_without_git_the_plan_says_why_nothing_can_be_undone(
    tmp_path: pathlib.Path, hostile_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No git bastion may run (none on PATH but one inside the workspace, which a
    repository could have put there): no snapshot, and the plan says why."""
    ws = repo(tmp_path / "ws")
    (ws / "bin").mkdir()
    (ws / "bin" / "git").write_text(f"#!/bin/sh\ntouch {tmp_path / 'PWNED'}\n")
    (ws / "bin" / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(ws / "bin"))
    effect = capture(ws, "make")
    assert not (tmp_path / "PWNED").exists()
    assert effect["kind"] == "untracked" and "git is not installed" in effect["why"]
    call = effects.SpanCall("c1", "run_command", "{}", "untracked", None, None,
                            {k: v for k, v in effect.items() if k != "kind"})  # fmt: skip
    [line] = effects.plan("conv", "entry", str(ws), [call]).cannot_undo
    assert line.startswith("`make`: its git snapshot could not be made (git is not installed")
    assert line.endswith("so what it changed cannot be undone")


def test_bastions_own_folders_in_the_workspace_are_left_out(
    tmp_path: pathlib.Path, hostile_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened in $HOME, the workspace holds bastion's home and with it the snapshot
    repository: a snapshot must not take in bastion's store or itself."""
    ws = repo(tmp_path / "ws")
    home = ws / ".local" / "share" / "bastion"
    home.mkdir(parents=True)
    (home / "bastion.sqlite").write_bytes(b"the store")
    monkeypatch.setenv("BASTION_HOME", str(home))
    effect = capture(ws)
    assert (home / "snapshots").is_dir()
    effect = capture(ws)  # the second one would take in the first one's objects
    names = snapshots().SnapshotRepo(str(ws)).git("ls-tree", "-r", "--name-only", effect["tree"])
    assert names.decode().split() == ["a.txt"]
