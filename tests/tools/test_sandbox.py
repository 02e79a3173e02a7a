"""The command sandbox on the real kernel (Landlock + a private mount namespace):
escapes are refused and named in the result, the same commands run in
danger-full-access, ordinary work (git, pytest, npm) runs in workspace-write.

These tests run as whoever runs the suite; as root they show Landlock binds
root too. They skip, saying why, only where the kernel has no Landlock."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tools import ToolContext, run_tool
from tools.sandbox import PROBE_ENV, SandboxMode, SandboxPolicy, probe, unavailable_notice

SUPPORT = probe()
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock, reason=f"no Landlock here: {SUPPORT.describe()}"
)
needs_namespace = pytest.mark.skipif(
    not (SUPPORT.landlock and SUPPORT.namespace),
    reason=f"no private mount namespace here: {SUPPORT.describe()}",
)
WRITE = SandboxPolicy(SandboxMode.WORKSPACE_WRITE)
DANGER = SandboxPolicy(SandboxMode.DANGER_FULL_ACCESS)


@pytest.fixture
def hot_path() -> str:
    """Once, not per search path (conftest runs tools tests on both): nothing here
    searches, and each case runs real commands."""
    return "either"


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def sandboxed(ctx: ToolContext, home: pathlib.Path) -> Iterator[ToolContext]:
    """Sandboxed, with HOME in the test's folder and a TMPDIR (used unsandboxed) one
    level below the system temp dir, as the sandbox's own per-call one is."""
    tmp = tempfile.mkdtemp(prefix="bastion-test-tmp-")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": tmp}
    yield ctx._replace(sandbox=WRITE, env=env)
    shutil.rmtree(tmp)


async def run(ctx: ToolContext, command: str, policy: SandboxPolicy | None = None) -> Any:
    use = ctx if policy is None else ctx._replace(sandbox=policy)
    result = await run_tool("run_command", {"command": command}, use)
    assert result.ok, result.model_text()
    return result


def denied_paths(result: Any) -> list[str]:
    return [d.get("path") or d.get("connection") for d in result.data.get("sandbox_denials", ())]


ESCAPES = {
    "home": ("echo x > ~/x", lambda t, h: h / "x"),
    "parent": ("echo x > ../outside.txt", lambda t, h: t / "outside.txt"),
    "tmpdir-parent": (
        'echo x > "$TMPDIR/../{u}"',
        lambda t, h: pathlib.Path(tempfile.gettempdir()) / "{u}",
    ),
    "symlink": ("ln -s {t} link && echo x > link/via-link.txt", lambda t, h: t / "via-link.txt"),
    "fork": (
        "python3 -c \"import os\nif os.fork() == 0:\n    open('{t}/forked.txt', 'w')\n"
        'else:\n    os.wait()"',
        lambda t, h: t / "forked.txt",
    ),
    "setsid": ("setsid -w bash -c 'echo x > {t}/setsid.txt'", lambda t, h: t / "setsid.txt"),
}


@needs_landlock
@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_escapes_are_refused_and_named_then_allowed_in_danger_full_access(
    name: str, sandboxed: ToolContext, tmp_path: pathlib.Path, home: pathlib.Path
) -> None:
    template, where = ESCAPES[name]
    unique = f"bastion-escape-{uuid.uuid4().hex}"
    command = template.format(t=tmp_path, u=unique)
    target = pathlib.Path(str(where(tmp_path, home)).format(u=unique))
    result = await run(sandboxed, command)
    assert not target.exists(), result.model_text()
    assert result.data["exit_code"] != 0 or name == "fork"
    assert str(target) in denied_paths(result), result.model_text()
    assert f"output reports a refused write to {target}" in result.model_text()
    # how the user could allow it, when it failed (the fork's parent exits 0: not said)
    assert ("writable_paths" in result.model_text()) == (name != "fork")

    allowed = await run(sandboxed, command.replace("ln -s", "ln -sfn"), DANGER)
    try:
        assert target.exists(), allowed.model_text()
        assert allowed.data["sandbox"]["applied"] is False
    finally:
        target.unlink(missing_ok=True)


@pytest.fixture
def server() -> Iterator[int]:
    """A loopback TCP server that accepts (the test needs no network)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve() -> None:
        try:
            while True:
                conn, _ = listener.accept()
                conn.close()
        except OSError:
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()


@needs_landlock
@pytest.mark.skipif(SUPPORT.landlock < 4, reason="Landlock below ABI 4 cannot restrict TCP")
@pytest.mark.parametrize("client", ["python", "curl"])
async def test_a_connection_with_network_off_is_refused_and_named(
    client: str, sandboxed: ToolContext, server: int
) -> None:
    if client == "curl" and shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    command = {
        "python": f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {server}))\"",
        "curl": f"curl -sS -o /dev/null http://127.0.0.1:{server}/",
    }[client]
    result = await run(sandboxed, command)
    assert result.data["exit_code"] != 0
    [shown] = denied_paths(result)
    assert "127.0.0.1" in shown and str(server) in shown, result.model_text()
    assert "--network" in result.model_text()
    python = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {server}))\""
    assert (await run(sandboxed, python, DANGER)).data["exit_code"] == 0
    with_network = SandboxPolicy(SandboxMode.WORKSPACE_WRITE, network=True)
    assert (await run(sandboxed, python, with_network)).data["exit_code"] == 0


@needs_landlock
async def test_the_workspace_and_the_temp_dir_are_writable(
    sandboxed: ToolContext, root: pathlib.Path
) -> None:
    result = await run(
        sandboxed,
        'mkdir -p sub && echo a > sub/a && mv sub/a b && echo t > "$TMPDIR/t" && '
        'cat "$TMPDIR/t" && echo $TMPDIR && echo x > /dev/null && rm b',
    )
    assert result.data["exit_code"] == 0, result.model_text()
    lines = result.data["output"].split()
    assert lines[0] == "t" and lines[1].startswith(("/tmp/", os.environ.get("TMPDIR", "/tmp")))
    assert not os.path.exists(lines[1])  # the call's temp dir went with it
    assert (root / "sub").is_dir() and "sandbox_denials" not in result.data


@needs_namespace
@pytest.mark.parametrize("path", [".bastion/settings.toml", ".git/hooks/pre-commit"])
async def test_protected_paths_are_not_writable(
    path: str, sandboxed: ToolContext, root: pathlib.Path
) -> None:
    (root / path).parent.mkdir(parents=True)
    result = await run(sandboxed, f"echo 'exit 0' > {path}")
    assert not (root / path).exists()
    [denial] = result.data["sandbox_denials"]
    assert denial["path"] == str(root / path) and denial["why"].startswith("protected")
    inside = await run_tool(
        "run_command", {"command": "echo x > pre-commit", "cwd": ".git/hooks"}, sandboxed
    )
    assert not (root / ".git/hooks/pre-commit").exists(), inside.model_text()


@needs_namespace
async def test_deny_listed_files_read_empty_and_refuse_writes(
    sandboxed: ToolContext, root: pathlib.Path, home: pathlib.Path
) -> None:
    (root / ".env").write_text("TOKEN=secret\n")
    (root / "app").mkdir()
    (root / "app" / ".env.local").write_text("TOKEN=secret\n")
    result = await run(sandboxed, "cat .env app/.env.local; echo y > .env")
    assert "secret" not in result.data["output"]
    assert (root / ".env").read_text() == "TOKEN=secret\n"
    assert [d["why"] for d in result.data["sandbox_denials"]] == ["deny-listed (.env)"]


@needs_landlock
async def test_read_only_mode_writes_nothing(sandboxed: ToolContext, root: pathlib.Path) -> None:
    result = await run(sandboxed, "echo x > a.txt", SandboxPolicy(SandboxMode.READ_ONLY))
    assert not (root / "a.txt").exists()
    assert denied_paths(result) == [str(root / "a.txt")]


def git_env(home: pathlib.Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


@needs_landlock
async def test_git_pytest_and_npm_style_work_in_workspace_write(
    ctx: ToolContext, root: pathlib.Path, home: pathlib.Path
) -> None:
    use = ctx._replace(sandbox=WRITE, env=git_env(home))
    (root / "test_sample.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    commit = await run(
        use, "git init -q && git add -A && git commit -qm first && git log --oneline"
    )
    assert commit.data["exit_code"] == 0 and "first" in commit.data["output"], commit.model_text()
    tests = await run(use, f"{sys.executable} -m pytest -q -p no:cacheprovider test_sample.py")
    assert tests.data["exit_code"] == 0 and "1 passed" in tests.data["output"], tests.model_text()
    if shutil.which("npm") is None:
        return
    (root / "package.json").write_text('{"name": "s", "scripts": {"test": "node t.js"}}\n')
    (root / "t.js").write_text("require('fs').writeFileSync('out.txt', 'ok'); console.log('ok')\n")
    npm = await run(use, "npm test --silent --cache $TMPDIR/npm")
    assert npm.data["exit_code"] == 0 and (root / "out.txt").read_text() == "ok", npm.model_text()


async def test_without_a_sandbox_the_command_says_so(
    sandboxed: ToolContext, root: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forced probe failure: the command runs, and its result says it was unsandboxed
    (the one-line notice the front ends print comes from the same function)."""
    monkeypatch.setenv(PROBE_ENV, "fail")
    assert not probe().available
    notice = unavailable_notice(WRITE, probe())
    assert notice is not None and "WITHOUT a sandbox" in notice and PROBE_ENV in notice
    assert unavailable_notice(DANGER, probe()) is None
    result = await run(sandboxed, "echo x > a.txt")
    assert result.data["sandbox"]["applied"] is False
    assert "WITHOUT a sandbox" in result.model_text()


@needs_landlock
async def test_the_probe_is_run_in_a_fresh_interpreter() -> None:
    """The same probe `bastion doctor` prints, run as the supervisor runs it."""
    from tools.sandbox import LANDLOCK_SCRIPT

    done = subprocess.run(
        [sys.executable, "-I", "-S", LANDLOCK_SCRIPT], capture_output=True, text=True, check=True
    )
    assert int(done.stdout.split("\n")[0]) == SUPPORT.landlock


@needs_namespace
async def test_git_config_is_protected_and_git_cannot_be_moved_aside(
    ctx: ToolContext, root: pathlib.Path, home: pathlib.Path
) -> None:
    """.git/config is read-only (core.hooksPath would move the hooks); .git is pinned
    (a mount point), so moving it aside to plant another fails. A plain `git init` is
    not reported."""
    use = ctx._replace(sandbox=WRITE, env=git_env(home))
    init = await run(use, "git init -q && echo ok")
    assert "protected_changed" not in init.data, init.model_text()
    assert "git_quarantined" not in init.data, init.model_text()
    hooks_path = await run(use, "git config core.hooksPath evil")
    assert "evil" not in (root / ".git" / "config").read_text()
    assert denied_paths(hooks_path) == [str(root / ".git" / "config")], hooks_path.model_text()
    swapped = await run(
        use, "mv .git .git-old && cp -r .git-old .git && echo 'exit 0' > .git/hooks/pre-commit"
    )
    assert swapped.data["exit_code"] != 0, swapped.model_text()
    assert "Device or resource busy" in swapped.data["output"]
    assert not (root / ".git-old").exists() and not (root / ".git/hooks/pre-commit").exists()


NOBODY_SCRIPT = """
import asyncio, os, pathlib, sys
sys.path.insert(0, {repo!r})
from tools import ToolContext, Workspace, run_tool
from tools.sandbox import SandboxPolicy

async def main():
    root = pathlib.Path({root!r})
    ctx = ToolContext(Workspace.open(root), artifacts_dir=root.parent / "artifacts",
                      sandbox=SandboxPolicy(), env={{"PATH": os.environ["PATH"]}})
    command = "id -u; echo in > in.txt; echo out > ../out.txt; echo h > .git/hooks/h"
    result = await run_tool("run_command", {{"command": command}}, ctx)
    print(result.model_text())

asyncio.run(main())
"""


@needs_namespace
@pytest.mark.skipif(os.geteuid() != 0, reason="runs a command as nobody, which needs root")
def test_as_an_ordinary_user_the_sandbox_uses_a_user_namespace(tmp_path: pathlib.Path) -> None:
    """Not root: the supervisor makes a user namespace (identity-mapped) for its mounts;
    the command runs as the same user, writes the workspace, and nothing else."""
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    setpriv = shutil.which("setpriv")
    if python is None or setpriv is None:
        pytest.skip("needs a system python3 and setpriv to run as nobody")
    repo = str(pathlib.Path(__file__).resolve().parents[2])
    base = pathlib.Path(tempfile.mkdtemp(prefix="bastion-nobody-"))
    try:
        root = base / "ws"
        (root / ".git" / "hooks").mkdir(parents=True)
        (base / "artifacts").mkdir()
        (base / "run.py").write_text(NOBODY_SCRIPT.format(repo=repo, root=str(root)))
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
        done = subprocess.run(
            [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I",
             str(base / "run.py")],
            capture_output=True, text=True, timeout=60, cwd=base, check=False,
        )  # fmt: skip
        if "Permission denied" in done.stderr and "run.py" in done.stderr:
            pytest.skip(f"nobody cannot run {python} here")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1].startswith("[exit 1")
        assert "65534" in done.stdout and (root / "in.txt").read_text() == "in\n"
        assert not (base / "out.txt").exists() and not (root / ".git/hooks/h").exists()
        assert f"output reports a refused write to {base / 'out.txt'}" in done.stdout
        assert "protected (.git/hooks" in done.stdout
    finally:
        shutil.rmtree(base)


@needs_landlock
async def test_the_temp_dir_goes_with_the_command_even_when_bastion_does_not_clean_up(
    root: pathlib.Path,
) -> None:
    """The supervisor empties the command's temp dir itself when it ends (here: the
    lifeline closed, as when bastion dies); `reap(record)` after a crash removes it."""
    from tools.lifetime import Supervised, reap
    from tools.sandbox import plan

    tmp = tempfile.mkdtemp(prefix="bastion-cmd-")
    entries = plan(WRITE, str(root), tmp, SUPPORT).entries
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    spawn = {"cwd": f"/proc/self/fd/{fd}", "pass_fds": (fd,)}
    env = {"PATH": os.environ["PATH"], "TMPDIR": tmp}
    script = 'mkdir -p "$TMPDIR/a/b" && touch "$TMPDIR/a/b/f" && sleep 60'
    sup = Supervised.spawn(("bash", "-c", script), env, spawn, entries)
    os.close(fd)
    try:
        await sup.connect()
        assert "started" in await sup.started()
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(tmp, "a", "b", "f")):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)  # (poll interval)
        sup.kill()  # the lifeline closes: what bastion's death does
        reaped = await sup.finished()
        assert reaped.clean and os.listdir(tmp) == []  # emptied (Landlock: not /tmp itself)
    finally:
        sup.close()
    pathlib.Path(tmp, "left.txt").write_text("x")
    record = {"version": 1, "pgid": 2**22 + 7, "supervisor_pid": 2**22 + 7}
    record |= {"supervisor_start": 1, "start_time": 1, "tmpdir": tmp}
    reap(record, bound_s=0.5)
    assert not os.path.exists(tmp)
