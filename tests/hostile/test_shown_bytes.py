"""Issue 34, item 9: a folder whose name is not UTF-8 gives no traceback.

Python reads such a name as text with `surrogateescape` (b"\\xff" becomes
"\\udcff"), which no store, request or terminal can take. Two cases, each through
the real `bastion`:

- a folder *inside* the workspace named b"sub\\xff" (a clone can ship one): what
  list_directory, glob and search_files print about it, and run_command's record
  of the workspace (for /rewind), were refused by the store and the run failed
  with UnicodeEncodeError; now the name reaches the model and the screen as
  `sub\\xff`, and the run goes on;
- the workspace's own path not UTF-8: `-p`, `--plain` and the app crashed creating
  the session, `bastion sessions` listing it and `bastion trust` recording it; now
  each says in one line why it cannot and what to do, or lists nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess

import pytest

from tests.e2e import conftest as e2e
from tests.tui.test_tmux import Tmux, bastion_bin

bastion, loopback = e2e.bastion, e2e.loopback  # the real command, a loopback model (fixtures)
pytestmark = pytest.mark.e2e

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
SUB = os.fsdecode(b"sub\xff")  # "sub\udcff"


def call(call_id: str, name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def planted(cwd) -> None:
    """A folder inside the workspace whose name is not UTF-8, a file in it."""
    folder = os.path.join(os.fsencode(cwd), b"sub\xff")
    os.mkdir(folder)
    with open(os.path.join(folder, b"notes\xfe.txt"), "w") as handle:
        handle.write("a needle here\n")


def run_bytes(b, *args: str, cwd: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """`b.run`, in a working directory given as bytes (a path that is not UTF-8)."""
    return subprocess.run(
        b.cmd(*args), cwd=cwd or os.fsencode(b.cwd), env=b.env, capture_output=True,
        text=True, errors="replace", stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("tool", "arguments", "shown"),
    [
        ("list_directory", {}, "sub\\xff/"),
        ("glob", {"pattern": "**/*.txt"}, "sub\\xff/notes\\xfe.txt"),
        ("search_files", {"pattern": "needle"}, "sub\\xff/notes\\xfe.txt:1:a needle here"),
        ("run_command", {"command": "ls"}, "sub\ufffd"),  # (its output: decoded, replaced)
    ],
)
def test_a_name_that_is_not_utf8_inside_the_workspace(loopback, bastion, tool, arguments, shown):
    server = loopback([call("c1", tool, **arguments), {"text": "listed"}])
    b = bastion(server)
    planted(b.cwd)
    out = b.run("-p", "look", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "UnicodeEncodeError" not in out.stderr
    told = [m["content"] for m in server.requests()[-1]["messages"] if m["role"] == "tool"]
    assert shown in told[0]
    [session] = json.loads(b.run("sessions", "--json").stdout)
    exported = b.run("export", session["id"], "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert any(shown in e["text"] for e in json.loads(exported.stdout)["entries"])


def hostile_workspace(b) -> bytes:
    """The workspace moved to a path whose last name is not UTF-8."""
    folder = os.fsencode(b.cwd.parent) + b"/work\xff"
    os.mkdir(folder)
    return folder


@pytest.mark.parametrize("front", [["-p", "hi"], ["--plain", "hi"]])
def test_a_workspace_whose_path_is_not_utf8_is_refused_in_one_line(loopback, bastion, front):
    b = bastion(loopback([{"text": "never"}]))
    out = run_bytes(b, *front, cwd=hostile_workspace(b))
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("bastion: ") and "work\\xff: bastion cannot work in a folder" in line
    assert "rename the folder" in line


def test_sessions_and_trust_in_such_a_folder_say_so_or_list_nothing(loopback, bastion):
    b = bastion(loopback([{"text": "ok"}]))
    assert b.run("-p", "elsewhere").returncode == 0  # a session in a UTF-8 folder
    folder = hostile_workspace(b)
    (b.cwd.parent / "work\udcff" / ".bastion").mkdir()  # (a project to trust)
    listed = run_bytes(b, "sessions", cwd=folder)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert listed.stdout == "" and "no conversations here" in listed.stderr
    assert run_bytes(b, "sessions", "--json", cwd=folder).stdout.strip() == "[]"
    trusting = run_bytes(b, "trust", cwd=folder)
    assert trusting.returncode == 2 and "Traceback" not in trusting.stderr
    assert "cannot record a decision for a folder whose path is not UTF-8" in trusting.stderr
    doctor = run_bytes(b, "doctor", cwd=folder)
    assert "Traceback" not in doctor.stderr and "work\\xff is not trusted" in doctor.stdout


@needs_tmux
def test_the_app_says_why_it_cannot_open_such_a_folder(tmp_path, loopback, bastion):
    b = bastion(loopback([{"text": "never"}]))
    hostile_workspace(b)
    env = {k: v for k, v in b.env.items() if k in ("PATH", "HOME", "LANG")} | {
        k: v for k, v in b.env.items() if k.startswith(("BASTION_", "XDG_", "OPENAI_"))
    }
    script = (  # (printf makes the byte: the script itself stays UTF-8)
        f'cd "$(printf "%s/work\\377" {shlex.quote(str(b.cwd.parent))})" && '
        f"{shlex.quote(bastion_bin())}; echo exit=$?; read _"
    )
    terminal = Tmux(tmp_path)
    try:
        terminal.start(["sh", "-c", script], env | {"TERM": "xterm-256color"}, b.cwd)
        screen = terminal.wait_for(lambda s: "exit=" in s, "the app to leave")
        assert "exit=2" in screen and "Traceback" not in screen
        said = "bastion cannot work in a folder whose path is not UTF-8"
        assert "".join(said.split()) in "".join(screen.split())  # (the line wraps)
    finally:
        terminal.kill()
