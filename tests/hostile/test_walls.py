"""Issue 34, items 2 (sandbox side), 5 and 9 (signals, /proc), through run_command:
a sandboxed command cannot reach a socket that acts for the user (a listener
outside the workspace standing in for tmux, a real tmux server, one only the
environment names, an abstract one with the network on, bastion's own attach
sockets), cannot see bastion's own folders, and cannot list, read the /proc of,
or signal a process outside it (bastion's included).

Each test builds the hostile command and the listener it aims at itself, and
checks from outside the sandbox that nothing was reached (a connection still
pending on the listener, a window count, a marker). They run as whoever runs the
suite; as root they show the walls bind root too.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.testing.waiting import until
from tools import ToolContext, Workspace, run_tool
from tools.sandbox import SandboxMode, SandboxPolicy, probe

SUPPORT = probe()
# (spelled so that this file also runs against the code before issue 34, to fail there)
needs_walls = pytest.mark.skipif(
    not (SUPPORT.landlock and SUPPORT.namespace),
    reason=f"no private mount namespace here: {SUPPORT.describe()}",
)
needs_pid_namespace = pytest.mark.skipif(
    not getattr(SUPPORT, "pid_namespace", SUPPORT.namespace),
    reason=f"no PID namespace here: {SUPPORT.describe()}",
)
needs_scopes = pytest.mark.skipif(
    SUPPORT.landlock < 6, reason=f"Landlock below ABI 6 cannot scope sockets: {SUPPORT.describe()}"
)
# A client that says what happened, as the command's output: CONNECTED (and what the
# server sent first), or why it could not.
CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1].replace("@", "\\0", 1) if sys.argv[1].startswith("@") else sys.argv[1])
    s.sendall(b"new-window -d 'touch ~/P'\\n")
    print("CONNECTED", sys.argv[1])
except OSError as exc:
    print("refused", sys.argv[1], exc.strerror)
"""


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder beside the workspace, neither in it nor hidden: where the user's
    programs keep their sockets, for these tests."""
    path = tmp_path / "out"
    path.mkdir()
    return path


@pytest.fixture
def short() -> Iterator[pathlib.Path]:
    """Like `outside`, with a path short enough for a socket a few folders down."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="walls-"))
    yield path
    shutil.rmtree(path)


@pytest.fixture
def ctx(tmp_path: pathlib.Path) -> Iterator[ToolContext]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "client.py").write_text(CONNECT)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    with Workspace.open(root) as ws:
        yield ToolContext(
            ws, artifacts_dir=tmp_path / "artifacts", env=env,
            sandbox=SandboxPolicy(SandboxMode.WORKSPACE_WRITE),
        )  # fmt: skip


async def run(ctx: ToolContext, command: str, **policy: Any) -> str:
    use = ctx._replace(sandbox=SandboxPolicy(SandboxMode.WORKSPACE_WRITE, **policy))
    result = await run_tool("run_command", {"command": command}, use)
    assert result.ok, result.model_text()
    return str(result.data["output"])


def connect(path: str) -> str:
    return f"{sys.executable} -I client.py '{path}'"


def listener(path: str) -> socket.socket:
    """A listening Unix socket that never accepts: a connection made to it waits in
    its backlog, where `reached` finds it."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    server.setblocking(False)
    return server


def reached(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@needs_walls
async def test_a_socket_listening_outside_the_workspace_cannot_be_reached(
    ctx: ToolContext, outside: pathlib.Path
) -> None:
    """Item 5: what tmux, screen, ssh-agent or docker listen on. Landlock does not
    confine connecting to a pathname socket; the supervisor covers every socket
    /proc/net/unix lists as listening when the command starts."""
    path = str(outside / "fake-tmux.sock")
    with listener(path) as server:
        out = await run(ctx, connect(path))
        assert not reached(server), out
    assert "CONNECTED" not in out and "refused" in out, out


@needs_walls
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
async def test_a_real_tmux_server_cannot_be_made_to_run_anything(
    ctx: ToolContext, outside: pathlib.Path
) -> None:
    """Item 5's repro: `tmux -S SOCKET new-window -d 'touch ~/P'` from the sandbox. The
    server runs outside it; a window it opened would run unsandboxed."""
    sock, marker = outside / "tmux.sock", outside / "P"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    tmux = ["tmux", "-S", str(sock)]
    subprocess.run([*tmux, "new-session", "-d", "-s", "walls"], env=env, check=True, timeout=30)
    try:
        out = await run(ctx, f"tmux -S {sock} new-window -d 'touch {marker}'; echo tmux=$?")
        windows = subprocess.run(
            [*tmux, "list-windows", "-t", "walls"], env=env, capture_output=True, text=True,
            check=True, timeout=30,
        ).stdout.splitlines()  # fmt: skip
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, check=False, timeout=30)
    assert len(windows) == 1, (windows, out)  # no second window: nothing ran outside
    assert "tmux=0" not in out and not marker.exists()


CUT_OFF = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8); s.setblocking(False)
print("ready", flush=True)
sys.stdin.readline()
try:
    s.accept(); print("accepted", flush=True)
except BlockingIOError:
    print("none", flush=True)
"""


@needs_walls
@pytest.mark.skipif(os.geteuid() != 0, reason="unshare -n needs root here")
async def test_a_socket_only_the_environment_names_is_covered(
    ctx: ToolContext, outside: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listener in another network namespace (as docker.sock mounted into a
    container is) is not in our /proc/net/unix, yet its path reaches it: the sockets
    bastion's environment names ($SSH_AUTH_SOCK, the D-Bus bus, $DOCKER_HOST) are
    covered by name."""
    path = str(outside / "agent.sock")
    agent = subprocess.Popen(
        ["unshare", "-n", sys.executable, "-I", "-c", CUT_OFF, path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert agent.stdin is not None and agent.stdout is not None
    try:
        assert agent.stdout.readline() == "ready\n"
        monkeypatch.setenv("SSH_AUTH_SOCK", path)
        out = await run(ctx, connect(path))
        agent.stdin.write("check\n")
        agent.stdin.flush()
        assert agent.stdout.readline() == "none\n", out
    finally:
        agent.kill()
        agent.wait()
    assert "CONNECTED" not in out


@needs_walls
@needs_scopes
async def test_an_abstract_socket_is_out_of_reach_with_the_network_on(ctx: ToolContext) -> None:
    """X11 also listens on @/tmp/.X11-unix/X0. With the network off the command's own
    network namespace has none; with it on, Landlock's SCOPE_ABSTRACT_UNIX (ABI 6)
    refuses connecting to one made outside the sandbox."""
    name = f"@bastion-walls-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with server:
        server.bind("\0" + name[1:])
        server.listen(8)
        server.setblocking(False)
        out = await run(ctx, connect(name), network=True)
        assert not reached(server), out
    assert "CONNECTED" not in out and "refused" in out, out


@needs_walls
async def test_bastions_own_folders_are_hidden_and_their_sockets_unreachable(
    ctx: ToolContext, short: pathlib.Path
) -> None:
    """Item 2, sandbox side: the store (with the attach sockets beside it) and the
    config dir are an empty read-only folder to a command; an attach socket cannot
    be reached even by its exact path."""
    store, config = short / "store", short / "config"
    (store / "sockets").mkdir(parents=True)
    (store / "bastion.sqlite").write_text("TRANSCRIPTS")
    config.mkdir()
    (config / "config.toml").write_text('approval_mode = "ask"\n')
    sock = str(store / "sockets" / "c.sock")
    with listener(sock) as server:
        out = await run(
            ctx,
            f"ls -A {store} {config}; cat {store}/bastion.sqlite; {connect(sock)}; "
            f"echo 'approval_mode = \"full-auto\"' > {config}/config.toml",
            private=(str(store), str(config)),
        )
        assert not reached(server), out
    assert "TRANSCRIPTS" not in out and "CONNECTED" not in out, out
    assert "sockets" not in out.replace(sock, "")  # the listing is empty
    assert (config / "config.toml").read_text() == 'approval_mode = "ask"\n'


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the user's outside the sandbox, holding a secret in its
    environment (as bastion's own holds the API key)."""
    env = {"PATH": os.environ["PATH"], "WALLS_MARKER": f"walls-{uuid.uuid4().hex}"}
    proc = subprocess.Popen(["sleep", "300"], env=env)
    yield proc
    proc.kill()
    proc.wait()


@needs_pid_namespace
async def test_a_command_cannot_signal_list_or_read_processes_outside_it(
    ctx: ToolContext, bystander: subprocess.Popen[bytes]
) -> None:
    """Item 9: measured at cee65a6, a command could `kill -0` bastion's pid and read
    /proc/<pid>/environ and maps. Here bastion is this test's own process (it runs
    the tool), and the bystander holds a marker in its environment."""
    me, other = os.getpid(), bystander.pid
    out = await run(
        ctx,
        f"for p in {me} {other}; do kill -0 $p && echo signalled-$p; "
        f"head -c 300 /proc/$p/maps && echo maps-$p; done; "
        "grep -l -a WALLS_MARKER /proc/[0-9]*/environ; ps -eo args= | sed 's/^/LISTED /'",
    )
    assert not {f"{w}-{p}" for w in ("signalled", "maps") for p in (me, other)} & set(out.split())
    assert not [line for line in out.splitlines() if line.endswith("/environ")], out
    listed = [line for line in out.splitlines() if line.startswith("LISTED")]
    ours = (f"LISTED {sys.executable} ", "LISTED bash -c ", "LISTED ps ", "LISTED sed ")
    assert listed and all(line.startswith(ours) for line in listed), listed  # PID 1, the command
    assert bystander.poll() is None  # (and it was not signalled: it still sleeps)


@needs_pid_namespace
async def test_the_supervisor_still_reports_what_it_killed(ctx: ToolContext) -> None:
    """The PID namespace keeps the supervisor's accounting: a background process left
    behind is killed and counted (the namespace's PID 1 is not), and its pid, as the
    command saw it, is the namespace's."""
    result = await run_tool("run_command", {"command": "sleep 300 & echo bg=$! self=$$"}, ctx)
    assert result.ok and result.data.get("processes_killed") == 1, result.model_text()
    assert "self=2" in result.data["output"]  # PID 1 is the namespace's init
    assert result.data["sandbox"]["pid_namespace"] is True


@needs_pid_namespace
async def test_a_cut_command_in_its_pid_namespace_ends_at_once(ctx: ToolContext) -> None:
    """Esc, Ctrl+S or a steer cutting a running command: the call ends as soon as its
    processes are killed. The kernel lets the namespace's PID 1 go only once every
    process in the namespace is reaped, and the command's are the supervisor's
    children: it waited out its whole bound (3 s) for PID 1 before reaping them."""
    root = pathlib.Path(ctx.workspace.root)
    command = "echo started > started.txt; sleep 120"
    task = asyncio.ensure_future(run_tool("run_command", {"command": command}, ctx))
    await until(lambda: (root / "started.txt").exists(), what="the command to start")
    cut = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - cut < 1.5  # (3 s and more before: the supervisor's bound)


def test_the_own_folders_hold_every_attach_socket(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """runtime.run.sandboxing.own_folders names what runtime.ipc.listen.socket_path may
    use (the store's folder, or a fallback when that path is too long for a socket):
    if the two drift apart, a command could reach the socket again."""
    from runtime.ipc.listen import socket_path
    from runtime.run.sandboxing import own_folders

    short = tmp_path / "home"
    deep = tmp_path / ("d" * 90) / "home"
    for runtime_dir in (str(tmp_path / "run"), None):
        if runtime_dir is None:
            monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        else:
            monkeypatch.setenv("XDG_RUNTIME_DIR", runtime_dir)
        for home in (short, deep, tmp_path / ("e" * 200)):
            monkeypatch.setenv("BASTION_HOME", str(home))
            path = str(socket_path(home, "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"))
            folders = own_folders()
            assert any(path.startswith(f + "/") for f in folders), (path, folders)


@needs_walls
async def test_a_start_up_file_linked_from_a_dotfiles_folder_stays_put(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 6 with a dotfiles manager: ~/.bashrc is a link into ~/dotfiles. Its target
    is read-only, and the link cannot be replaced either, even where every other
    start-up name exists (so no missing one seals ~ on its own)."""
    from tools.walls import START_UP

    home = tmp_path / "user"
    (home / "dotfiles").mkdir(parents=True)
    for rel in START_UP:
        if rel != ".bashrc":
            (home / rel).mkdir(parents=True)
    (home / "dotfiles" / "bashrc").write_text("# mine\n")
    (home / ".bashrc").symlink_to(home / "dotfiles" / "bashrc")
    monkeypatch.setenv("HOME", str(home))
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    with Workspace.open(home) as ws:
        ctx = ToolContext(ws, artifacts_dir=tmp_path / "artifacts", env=env)
        out = await run(
            ctx, "echo evil >> dotfiles/bashrc; rm .bashrc; echo evil > .bashrc; echo ok > notes"
        )
    assert (home / "dotfiles" / "bashrc").read_text() == "# mine\n", out
    assert (home / ".bashrc").is_symlink(), out
    assert not (home / "notes").exists()  # (~ is sealed: no new entries)
