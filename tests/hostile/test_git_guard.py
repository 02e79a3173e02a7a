"""Issue 34 item 4: a sandboxed command cannot leave git control files that make the
user's next git run a program (submodules' config and hooks, worktrees' commondir,
a worktree's `.git` file, a `.git` made where there was none, a nested repository
the index holds, a `.git/commondir` leading outside).

Each case runs the hostile command through run_command in workspace-write, then
does what the user would do next (`git status`, `git -C sub checkout`, ...) with
the user's git, unsandboxed; a planted program would leave a mark outside the
workspace. Existing control files are bound read-only (the write is denied and
named); ones that did not exist are judged after the command and moved aside.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tools import ToolContext, Workspace, run_tool
from tools.sandbox import SandboxMode, SandboxPolicy, probe

SUPPORT = probe()
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock, reason=f"no Landlock here: {SUPPORT.describe()}"
)
needs_namespace = pytest.mark.skipif(
    not (SUPPORT.landlock and SUPPORT.namespace),
    reason=f"no private mount namespace here: {SUPPORT.describe()}",
)
WRITE = SandboxPolicy(SandboxMode.WORKSPACE_WRITE)
AUTHOR = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def mark(tmp_path: pathlib.Path) -> pathlib.Path:
    """Where a planted program leaves its mark: outside the workspace, so only the
    user's git (unsandboxed) could write it."""
    return tmp_path / "PWNED"


@pytest.fixture
def shm() -> Iterator[pathlib.Path]:
    """A folder in /dev/shm, writable by sandboxed commands and shared with the host."""
    path = pathlib.Path("/dev/shm", f"bastion-test-{uuid.uuid4().hex}")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def user_git(home: pathlib.Path, cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's git afterwards: unsandboxed, with the user's (empty) config."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **AUTHOR}
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def setup_git(home: pathlib.Path, cwd: pathlib.Path, *args: str) -> None:
    done = user_git(home, cwd, *args)
    assert done.returncode == 0, done.stderr


def make_repo(home: pathlib.Path, path: pathlib.Path) -> pathlib.Path:
    path.mkdir(parents=True, exist_ok=True)
    setup_git(home, path, "init", "-q")
    (path / "f.txt").write_text("f\n")
    setup_git(home, path, "add", "-A")
    setup_git(home, path, "commit", "-qm", "base")
    return path


async def run(ws: pathlib.Path, home: pathlib.Path, command: str) -> Any:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_GLOBAL": os.devnull, **AUTHOR}
    with Workspace.open(ws) as workspace:
        ctx = ToolContext(workspace, artifacts_dir=ws.parent / "artifacts", sandbox=WRITE, env=env)
        result = await run_tool("run_command", {"command": command}, ctx)
    assert result.ok, result.model_text()
    return result


def fsmonitor(mark: pathlib.Path) -> str:
    return f"touch {mark}; false"


def quarantined(result: Any) -> list[dict[str, str]]:
    return list(result.data.get("git_quarantined", ()))


def denied(result: Any) -> list[str]:
    return [d["path"] for d in result.data.get("sandbox_denials", ())]


# --- existing control files: read-only in the command's mount namespace ---------------


@pytest.fixture
def with_submodule(ws: pathlib.Path, home: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    upstream = make_repo(home, tmp_path / "upstream")
    make_repo(home, ws)
    setup_git(home, ws, "submodule", "add", "-q", str(upstream), "sub")
    setup_git(home, ws, "commit", "-qm", "sub")
    assert (ws / ".git" / "modules" / "sub" / "config").is_file()
    return ws


@needs_namespace
async def test_a_submodules_config_cannot_be_given_a_program(
    with_submodule: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    ws = with_submodule
    config = ws / ".git" / "modules" / "sub" / "config"
    before = config.read_text()
    result = await run(
        ws, home, f"printf '[core]\\n\\tfsmonitor = \"{fsmonitor(mark)}\"\\n' >> {config}"
    )
    user_git(home, ws, "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert config.read_text() == before
    assert denied(result) == [str(config)], result.model_text()
    assert "protected (git's control files" in result.model_text()


@needs_namespace
async def test_a_submodules_hooks_cannot_be_planted(
    with_submodule: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    ws = with_submodule
    hook = ws / ".git" / "modules" / "sub" / "hooks" / "post-checkout"
    result = await run(ws, home, f"printf '#!/bin/sh\\ntouch {mark}\\n' > {hook}; chmod +x {hook}")
    user_git(home, ws / "sub", "checkout", "-q", "--detach")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert not hook.exists(), result.model_text()


@needs_namespace
async def test_a_worktrees_commondir_cannot_be_pointed_elsewhere(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    make_repo(home, ws)
    setup_git(home, ws, "worktree", "add", "-q", "wt")
    commondir = ws / ".git" / "worktrees" / "wt" / "commondir"
    before = commondir.read_text()
    result = await run(
        ws, home,
        f"cp -r .git evil && printf '[core]\\n\\tfsmonitor = \"{fsmonitor(mark)}\"\\n' "
        f">> evil/config && echo \"$PWD/evil\" > {commondir}",
    )  # fmt: skip
    user_git(home, ws / "wt", "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert commondir.read_text() == before, result.model_text()


@needs_namespace
async def test_a_linked_worktrees_git_file_cannot_be_pointed_elsewhere(
    tmp_path: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    main = make_repo(home, tmp_path / "main")
    setup_git(home, main, "worktree", "add", "-q", str(tmp_path / "linked"))
    ws = tmp_path / "linked"
    before = (ws / ".git").read_text()
    result = await run(
        ws, home,
        f"git init -q evil && git -C evil config core.fsmonitor '{fsmonitor(mark)}' && "
        'echo "gitdir: $PWD/evil/.git" > .git',
    )  # fmt: skip
    user_git(home, ws, "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert (ws / ".git").read_text() == before, result.model_text()


# --- control files that did not exist: judged after the command, moved aside --------------


@needs_landlock
async def test_a_git_init_given_a_program_is_moved_aside_and_named(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    result = await run(ws, home, f"git init -q && git config core.fsmonitor '{fsmonitor(mark)}'")
    user_git(home, ws, "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    [moved] = quarantined(result)
    assert moved["path"] == ".git/config" and moved["key"] == "core.fsmonitor", moved
    assert moved["moved_to"].startswith(".git/config.bastion-quarantine-")
    assert (ws / moved["moved_to"]).is_file() and not (ws / ".git" / "config").exists()
    text = result.model_text()
    assert f"[bastion moved .git/config aside to {moved['moved_to']} (core.fsmonitor " in text
    assert "tell the user" in text


@needs_landlock
async def test_a_new_hook_in_a_new_submodule_git_dir_is_moved_aside(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    make_repo(home, ws)
    hook = ".git/modules/x/hooks/post-checkout"
    result = await run(
        ws, home,
        f"mkdir -p .git/modules/x/hooks && printf '#!/bin/sh\\ntouch {mark}\\n' > {hook} "
        f"&& chmod +x {hook}",
    )  # fmt: skip
    assert [(m["path"], m["key"]) for m in quarantined(result)] == [(hook, "post-checkout")]
    assert not (ws / hook).exists()
    assert "is a git hook" in result.model_text()


@needs_landlock
async def test_a_new_commondir_leading_outside_is_moved_aside(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path, shm: pathlib.Path
) -> None:
    make_repo(home, ws)
    result = await run(
        ws, home,
        f"git init -q --bare {shm} && git config --file {shm}/config core.bare false && "
        f"git config --file {shm}/config core.fsmonitor '{fsmonitor(mark)}' && "
        f"echo {shm} > .git/commondir",
    )  # fmt: skip
    user_git(home, ws, "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert [(m["path"], m["key"]) for m in quarantined(result)] == [(".git/commondir", "commondir")]
    assert f"points git at {shm}, outside the workspace" in result.model_text()


@needs_landlock
async def test_a_nested_repository_the_index_holds_is_not_left_with_a_program(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path
) -> None:
    """`git status` in the parent runs `git status` in every repository its index
    holds (a gitlink), with that repository's config."""
    make_repo(home, ws)
    result = await run(
        ws, home,
        f"git init -q evil && git -C evil config core.fsmonitor '{fsmonitor(mark)}' && "
        "git -C evil commit -q --allow-empty -m x && git add evil",
    )  # fmt: skip
    user_git(home, ws, "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert [(m["path"], m["key"]) for m in quarantined(result)] == [
        ("evil/.git/config", "core.fsmonitor")
    ]


@needs_landlock
async def test_a_git_symlink_is_moved_aside(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path, shm: pathlib.Path
) -> None:
    result = await run(
        ws, home,
        f"git init -q --bare {shm} && git config --file {shm}/config core.bare false && "
        f"git config --file {shm}/config core.fsmonitor '{fsmonitor(mark)}' && ln -s {shm} .git",
    )  # fmt: skip
    user_git(home, ws, "status")
    assert not mark.exists(), "the user's next git ran the planted program"
    assert [(m["path"], m["key"]) for m in quarantined(result)] == [(".git", ".git")]
    assert not os.path.lexists(ws / ".git")
    assert "is a symbolic link where git looks for its .git" in result.model_text()


@needs_landlock
async def test_ordinary_git_work_gets_no_note(
    ws: pathlib.Path, home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    upstream = make_repo(home, tmp_path / "upstream")
    first = await run(
        ws, home,
        "git init -q && git config user.email me@example.invalid && "
        "git remote add origin https://example.invalid/r.git && git add -A && "
        "git commit -qm one --allow-empty && git branch -q feature && "
        f"git -c protocol.file.allow=always submodule add -q {upstream} sub && "
        "git worktree add -q wt && git sparse-checkout init --cone 2>/dev/null; "
        "git commit -qm two && echo done",
    )  # fmt: skip
    assert first.data["output"].strip().endswith("done"), first.model_text()
    second = await run(ws, home, "git commit -q --allow-empty -m three && git log --oneline")
    for result in (first, second):
        assert "git_quarantined" not in result.data, result.model_text()
        assert "sandbox_denials" not in result.data, result.model_text()
        assert "bastion moved" not in result.model_text()
    assert "three" in second.data["output"]


# --- bounds -----------------------------------------------------------------------------


@needs_namespace
async def test_five_hundred_submodules_make_a_bounded_number_of_mounts_and_are_still_checked(
    ws: pathlib.Path, home: pathlib.Path, mark: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    from tools.gitguard import MAX_MOUNTS
    from tools.sandbox import plan

    make_repo(home, ws)
    for i in range(500):
        module = ws / ".git" / "modules" / f"m{i:03}"
        (module / "hooks").mkdir(parents=True)
        (module / "HEAD").write_text("ref: refs/heads/master\n")
        (module / "config").write_text("[core]\n\tbare = false\n")
    tmp = tmp_path / "call-tmp"
    tmp.mkdir()
    made = plan(WRITE, str(ws), str(tmp), SUPPORT)
    git = [e for e in made.entries if e.startswith(("ro:", "pin:")) and "/.git" in e]
    assert len(git) == MAX_MOUNTS
    assert f"ro:{ws / '.git' / 'config'}" in git and f"pin:{ws / '.git'}" in git
    assert any("were not made read-only" in note for note in made.notes), made.notes
    # One beyond the mounts: the write lands, and the check afterwards moves it aside.
    late = ".git/modules/m499/config"
    result = await run(
        ws, home, f"printf '[core]\\n\\tfsmonitor = \"{fsmonitor(mark)}\"\\n' >> {late}"
    )
    assert [(m["path"], m["key"]) for m in quarantined(result)] == [(late, "core.fsmonitor")]
    assert "were not made read-only" in str(result.data["sandbox"].get("notes"))
