"""Issue 34 items 1 and 4 through the real `bastion` command (full-auto, the sandbox
on): the red team's repros. A command plants `core.fsmonitor` (in a new `.git`, or
in one made after moving the repository's own aside), or the folder arrives with
it; the next command, even an allowed `ls`, made bastion's own git run it on the
host with bastion's environment. Neither bastion nor the user's next `git status`
may run it now, and the model is told what was moved aside.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.e2e import conftest as e2e
from tools.sandbox import probe

loopback, bastion = e2e.loopback, e2e.bastion  # the e2e fixtures, used here as they are

pytestmark = pytest.mark.e2e
SUPPORT = probe()
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock, reason=f"no Landlock here: {SUPPORT.describe()}"
)
KEY = "sk-user-secret-for-the-red-team"


def call(call_id, name, **arguments):
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def user_git(cwd, *args):
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd.parent), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)


def tool_results(server):
    return [m["content"] for m in server.requests()[-1]["messages"] if m["role"] == "tool"]


def planting(mark) -> str:
    return f"git config core.fsmonitor 'env > {mark}; false'"


@needs_landlock
@pytest.mark.parametrize("how", ["git init", "mv .git aside"])
def test_a_command_that_plants_fsmonitor_runs_it_nowhere(loopback, bastion, tmp_path, how):
    mark = tmp_path / "PWNED"
    first = f"git init -q && {planting(mark)}"
    if how == "mv .git aside":
        first = f"mv .git .git.old && {first}"
    server = loopback([
        call("c1", "run_command", command=first),
        call("c2", "run_command", command="echo hi"),
        {"text": "done"},
    ])  # fmt: skip
    b = bastion(server)
    if how == "mv .git aside":
        assert user_git(b.cwd, "init", "-q").returncode == 0
        assert user_git(b.cwd, "commit", "-q", "--allow-empty", "-m", "base").returncode == 0
    out = b.run("-p", "go", "--approval-mode", "full-auto", env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 0, out.stderr
    leaked = mark.read_text() if mark.exists() else ""
    assert not mark.exists(), f"bastion's git ran it (with the key: {KEY in leaked})"
    user_git(b.cwd, "status")
    assert not mark.exists(), "the user's next git status ran it"
    planted = tool_results(server)[0]
    if how == "git init":
        assert "bastion moved .git/config aside to .git/config.bastion-quarantine-" in planted
        assert "core.fsmonitor runs a program at every git status" in planted
    else:  # .git is a mount point in the command's namespace: it cannot be moved
        assert "Device or resource busy" in planted, planted


@needs_landlock
def test_a_folder_that_arrives_with_fsmonitor_does_not_make_an_allowed_ls_run_it(
    loopback, bastion, tmp_path
):
    mark = tmp_path / "PWNED"
    server = loopback([call("c1", "run_command", command="ls"), {"text": "done"}])
    b = bastion(server)
    assert user_git(b.cwd, "init", "-q").returncode == 0
    (b.cwd / "README").write_text("a stranger's clone\n")
    with open(b.cwd / ".git" / "config", "a") as config:
        config.write(f'[core]\n\tfsmonitor = "env > {mark}; false"\n')
    out = b.run("-p", "go", "--approval-mode", "full-auto", env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 0, out.stderr
    leaked = mark.read_text() if mark.exists() else ""
    assert not mark.exists(), f"bastion's git ran it (with the key: {KEY in leaked})"
    assert "README" in tool_results(server)[0]
