"""Issue 34, items 2 (sandbox side), 6, 9 (signals, /proc) and the safe fallback,
through the real `bastion` command: a scripted model's commands, in full-auto,
aim at bastion's own attach socket, at the user's start-up files and bastion's
config in a home-folder workspace, and at bastion's own process; `write_file` in
auto-edit aims at the same files. Where the kernel cannot make the walls, a
command asks (and print mode, which cannot ask, refuses it saying why).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Bastion, bastion, loopback  # noqa: F401 (fixtures)

# (the fixtures are named as parameters below: ruff reads that as a redefinition)
from tools.sandbox import probe

pytestmark = pytest.mark.e2e
SUPPORT = probe()
needs_walls = pytest.mark.skipif(
    not (SUPPORT.landlock and SUPPORT.namespace),
    reason=f"no private mount namespace here: {SUPPORT.describe()}",
)
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock, reason=f"no Landlock here: {SUPPORT.describe()}"
)
SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d34"
# What a hostile command does with bastion's attach socket: find it (by listing the
# folder, or by its exact path) and read what the server says first (the transcript).
ATTACH = """
import glob, os, socket, sys
folder, exact = sys.argv[1], sys.argv[2]
print("listing", sorted(glob.glob(folder + "/**", recursive=True))[:20])
for path in sorted({exact, *glob.glob(folder + "/**/*.sock", recursive=True)}):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
        print("CONNECTED", path, s.recv(200)[:80])
    except OSError as exc:
        print("refused", path, exc.strerror)
"""


@pytest.fixture
def short() -> Iterator[Path]:
    """A folder in /tmp with a path short enough for sockets a few folders down."""
    path = Path(tempfile.mkdtemp(prefix="walls-"))
    yield path
    shutil.rmtree(path)


def lines(result: str, mark: str) -> list[str]:
    """The lines of a command's output that start with `mark` (not its echoed line)."""
    return [line for line in result.splitlines() if line.startswith(mark)]


def call(call_id: str, name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def tool_results(server) -> list[str]:
    return [m["content"] for m in server.requests()[-1]["messages"] if m["role"] == "tool"]


@needs_walls
@pytest.mark.parametrize("where", ["store", "runtime-dir", "temp-dir"])
def test_a_command_cannot_reach_bastions_attach_socket(
    loopback,  # noqa: F811
    bastion,  # noqa: F811
    short,
    monkeypatch,
    where,
):
    """Item 2, sandbox side: the session's own socket, in the store's folder or, when
    that path is too long for a socket, in a fallback folder under $XDG_RUNTIME_DIR or
    the temp dir. Before: the command connected and read the whole view."""
    from runtime.ipc.listen import socket_path

    b = bastion(None)
    b.env.pop("XDG_RUNTIME_DIR", None)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    b.home = short / "home"  # (short enough for a socket in it)
    folder = b.home / "sockets"
    if where != "store":  # a store path too long for a socket: a fallback folder
        b.home = short / ("h" * 100)
        folder = short / ("run" if where == "runtime-dir" else "t")
        folder.mkdir()
        if where == "runtime-dir":
            b.env["XDG_RUNTIME_DIR"] = str(folder)
            monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
        else:
            b.env["TMPDIR"] = str(folder)
            monkeypatch.setattr(tempfile, "tempdir", str(folder))
    b.env["BASTION_HOME"] = str(b.home)
    exact = socket_path(b.home, SID)  # where this session will listen
    assert str(exact).startswith(str(folder)), exact
    (b.cwd / "attach.py").write_text(ATTACH)
    command = f"{sys.executable} -I attach.py {folder} {exact}"
    server = loopback([call("c1", "run_command", command=command), {"text": "done"}])
    b.env["OPENAI_BASE_URL"] = server.base_url
    out = b.run("-p", "--session-id", SID, "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    [result] = tool_results(server)
    assert f"refused {exact}" in result, result
    assert "CONNECTED" not in result, result
    assert f"{SID}.sock" not in "".join(lines(result, "listing")), result  # not even listed
    assert f"reports a failed connection to {exact}; that socket is bastion's own" in result, result
    assert "network is off" not in result  # (a Unix socket: the walls, not the network)


HOSTILE = (
    "echo evil >> ~/.bashrc; "
    "echo 'approval_mode = \"full-auto\"' >> ~/.config/bastion/config.toml; "
    'printf \'[folders]\\n"/" = "trusted"\\n\' > ~/.config/bastion/trusted.toml; '
    "echo evil > ~/.zshrc; mkdir -p ~/.config/autostart; mkdir ~/bin; "
    "mv ~/.config ~/.config-old; mv ~/.local/share ~/.local/moved; "
    "ls -A ~/.local/share/bastion | sed 's/^/STORE /'; "
    "echo ok > ~/project/a.txt; echo ok > ~/.config/other/b.txt; echo ok > ~/notes.txt; "
    "echo done"
)


def home_workspace(b: Bastion, tmp_path: Path) -> Path:
    """A fake home that is also the workspace: the user's start-up files, bastion's
    config and store where they live by default, a project and another program's
    config to work in."""
    home = tmp_path / "user"
    for folder in ("project", ".config/bastion", ".config/other", ".local/share"):
        (home / folder).mkdir(parents=True)
    (home / ".bashrc").write_text("# mine\n")
    (home / ".config/bastion/config.toml").write_text("# the user's\n")
    (home / "notes.txt").write_text("old\n")
    b.cwd = home
    b.home = home / ".local/share/bastion"
    b.env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), BASTION_HOME=str(b.home))
    b.env.pop("XDG_DATA_HOME", None)
    return home


@needs_walls
def test_opened_in_home_commands_cannot_rewrite_start_up_files_or_bastions_config(
    loopback,  # noqa: F811
    bastion,  # noqa: F811
    tmp_path,
):
    """Item 6, commands (full-auto): ~/.bashrc and bastion's config stay as they were,
    no trust file, ~/.zshrc, autostart entry or ~/bin appears, ~/.config cannot be
    moved aside to plant another, the store is not even listed; existing files and
    folders are still writable, and the model is told why and what to do."""
    b = bastion(None)
    home = home_workspace(b, tmp_path)
    server = loopback([call("c1", "run_command", command=HOSTILE), {"text": "done"}])
    b.env["OPENAI_BASE_URL"] = server.base_url
    out = b.run("-p", "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    [result] = tool_results(server)
    assert (home / ".bashrc").read_text() == "# mine\n", result
    assert (home / ".config/bastion/config.toml").read_text() == "# the user's\n"
    for made in (".config/bastion/trusted.toml", ".zshrc", ".config/autostart", "bin"):
        assert not (home / made).exists(), made
    assert not (home / ".config-old").exists() and not (home / ".local/moved").exists()
    assert not lines(result, "STORE ")  # bastion.sqlite and its sockets are not listed
    assert (home / "project/a.txt").read_text() == "ok\n"
    assert (home / ".config/other/b.txt").read_text() == "ok\n"
    assert (home / "notes.txt").read_text() == "ok\n"
    assert (
        f"reports a refused write to {home}/.zshrc; commands cannot create entries directly"
        in result
    )
    assert "work in a project folder" in result
    assert f"{home}/.bashrc; that path is protected: {home}/.bashrc is a shell start-up" in result


@needs_landlock
def test_opened_in_home_write_file_cannot_touch_them_in_auto_edit(loopback, bastion, tmp_path):  # noqa: F811
    """Item 6, the tools (auto-edit writes without asking): write_file refuses a shell
    start-up file, bastion's config and trust file, and reading the store; a file of
    the user's project is written as before."""
    b = bastion(None)
    home = home_workspace(b, tmp_path)
    server = loopback(
        [
            call("c1", "write_file", path=".bashrc", content="evil\n", overwrite=True),
            call("c2", "write_file", path=".config/bastion/config.toml",
                 content='approval_mode = "full-auto"\n', overwrite=True),
            call("c3", "write_file", path=".config/bastion/trusted.toml",
                 content='[folders]\n"/" = "trusted"\n'),
            call("c4", "write_file", path=".zprofile", content="evil\n"),
            call("c5", "read_file", path=".local/share/bastion/bastion.sqlite"),
            call("c6", "write_file", path="project/c.txt", content="ok\n"),
            {"text": "done"},
        ]
    )  # fmt: skip
    b.env["OPENAI_BASE_URL"] = server.base_url
    out = b.run("-p", "go", "--approval-mode", "auto-edit")
    assert out.returncode == 0, out.stderr
    results = tool_results(server)
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert (home / ".config/bastion/config.toml").read_text() == "# the user's\n"
    assert not (home / ".config/bastion/trusted.toml").exists()
    assert not (home / ".zprofile").exists()
    assert (home / "project/c.txt").read_text() == "ok\n"
    assert "'.bashrc' is a shell start-up file" in results[0], results[0]
    for told in results[1:5]:
        assert told.startswith("REFUSED FORBIDDEN"), told
    assert "bastion's own" in results[1] and "bastion's own" in results[4]


@needs_walls
def test_a_command_cannot_find_read_or_signal_bastion(loopback, bastion):  # noqa: F811
    """Item 9: bastion's own process holds a marker in its environment (as it holds
    an API key); the command looks for it in every /proc/PID/environ, lists the
    processes, and signals its supervisor's parent (bastion). Before: all three."""
    marker = f"WALLS_{uuid.uuid4().hex}"
    command = (
        f"grep -l -a {marker} /proc/[0-9]*/environ | sed 's/^/FOUND /'; "
        "ps -eo args= | sed 's/^/LISTED /'; "
        "b=$(ps -o ppid= -p $PPID | tr -d ' '); kill -0 \"$b\" && echo signalled-bastion"
    )
    server = loopback([call("c1", "run_command", command=command), {"text": "done"}])
    b = bastion(server)
    out = b.run("-p", "go", "--approval-mode", "full-auto", env={"WALLS_MARKER": marker})
    assert out.returncode == 0, out.stderr
    [result] = tool_results(server)
    assert not lines(result, "FOUND ") and not lines(result, "signalled-bastion"), result
    listed = lines(result, "LISTED ")
    assert listed and not any("bin/bastion" in line for line in listed), listed


@needs_landlock
def test_without_walls_a_command_asks_even_in_full_auto(loopback, bastion):  # noqa: F811
    """The safe fallback: Landlock but no mount namespace (simulated), so bastion's
    sockets and folders cannot be hidden. A full-auto command asks; print mode cannot
    ask, so it is refused saying why; a rule the user gave (--allow) still runs it;
    the session's one line and doctor say so."""
    no_ns = {"BASTION_SANDBOX_PROBE": "no-namespace"}
    server = loopback([call("c1", "run_command", command="touch ran.txt"), {"text": "done"}])
    b = bastion(server)
    out = b.run("-p", "go", "--approval-mode", "full-auto", "--output-format", "json", env=no_ns)
    assert out.returncode == 3, out.stderr
    assert not (b.cwd / "ran.txt").exists()
    assert out.stderr.count("commands ask before they run, whatever the approval mode") == 1
    [result] = tool_results(server)
    assert "cannot hide bastion's own sockets and folders" in result, result
    assert json.loads(out.stdout.splitlines()[-1])["refused"], out.stdout
    allowed = loopback([call("c1", "run_command", command="touch ran.txt"), {"text": "done"}])
    b.env["OPENAI_BASE_URL"] = allowed.base_url
    out = b.run("-p", "go", "--approval-mode", "full-auto", "--allow", "touch", env=no_ns)
    assert out.returncode == 0, out.stderr
    assert (b.cwd / "ran.txt").exists()
    doctor = b.run("doctor", env=no_ns)
    assert "FAIL sandbox   commands ask before each run, whatever the approval mode" in (
        doctor.stdout
    ), doctor.stdout
