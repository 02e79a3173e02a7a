"""Driving the installed `bastion` in a real terminal (tmux), for benchmarks and e2e tests.

    term = Terminal(workdir)                      # a private tmux server socket
    term.start([bastion, "--model", "openai/x"], env, cwd, size=(100, 30))
    term.wait_for(lambda screen: "done" in screen, timeout=60)
    term.kill()

Also: the markdown answers the benchmarks stream, the ledger's checkpoint times,
and the RSS and CPU time of a process with those under it (the app and its harness
process) from /proc.
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

TMUX = shutil.which("tmux")


class Control:
    """A tmux control-mode client (`tmux -C`) on the session: each command is a line on
    its stdin and its output a `%begin`…`%end` block on its stdout, so sending a key or
    reading the screen costs no process (a `tmux` process per poll costs milliseconds
    each, and their start-up competes for the cores with what is measured). It asks
    for no `%output` notifications and has no size, so the window keeps its own."""

    def __init__(self, socket: str, target: str) -> None:
        self.process = subprocess.Popen(
            [TMUX or "tmux", "-L", socket, "-C", "attach-session", "-t", target, "-f", "no-output"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )  # (buffered: an unbuffered readline reads a byte a system call, a screen ~5,000)
        self._block()  # the attach-session command's own

    def command(self, line: str) -> str:
        """Run one tmux command line; its output (RuntimeError if tmux said %error)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        return self._block()

    def _block(self) -> str:
        assert self.process.stdout is not None
        lines: list[bytes] = []
        inside = False
        while True:
            raw = self.process.stdout.readline()
            if not raw:
                raise RuntimeError("the tmux control client ended")
            if not inside:  # notifications between blocks (%session-changed, …)
                inside = raw.startswith(b"%begin ")
            elif raw.startswith((b"%end ", b"%error ")):
                text = b"".join(lines).decode(errors="replace")
                if raw.startswith(b"%error "):
                    raise RuntimeError(f"tmux: {text.strip()}")
                return text
            else:
                lines.append(raw)

    def close(self) -> None:
        with suppress(OSError, ValueError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Terminal:
    """One tmux session on a private server socket (never the user's tmux)."""

    def __init__(self, workdir: Path) -> None:
        self.socket = f"bastion-bench-{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        self.exit_file = workdir / "exit-code"
        self.control: Control | None = None  # once started: keys and screens go through it

    @staticmethod
    def available() -> bool:
        return TMUX is not None

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def start(
        self, argv: list[str], env: dict[str, str], cwd: Path, size: tuple[int, int] = (100, 30)
    ) -> float:
        """Run `argv` in a window of `size`; returns the monotonic time it was started."""
        self.exit_file.unlink(missing_ok=True)
        script = self.workdir / f"run-{uuid.uuid4().hex[:6]}.sh"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        script.write_text(
            f"#!/bin/sh\n{exports}cd {shlex.quote(str(cwd))}\n"
            f"{shlex.join(argv)}\necho $? > {shlex.quote(str(self.exit_file))}\nsleep 30\n"
        )
        script.chmod(0o755)
        width, height = size
        started = time.monotonic()
        self.tmux(
            "new-session", "-d", "-s", "main", "-x", str(width), "-y", str(height), str(script)
        )
        if self.control is None:
            self.control = Control(self.socket, "main")
        return started

    def send(self, *keys: str, literal: bool = False) -> None:
        args = ["send-keys", "-t", "main", *(["-l"] if literal else []), *keys]
        if self.control is None:
            self.tmux(*args)
        else:
            self.control.command(shlex.join(args))

    def screen(self) -> str:
        if self.control is None:
            return self.tmux("capture-pane", "-p", "-t", "main")
        return self.control.command("capture-pane -p -t main")

    def wait_for(
        self, check: Callable[[str], bool], what: str, timeout: float = 30, poll: float = 0.02
    ) -> tuple[float, str]:
        """Poll the screen until `check` holds: (the monotonic time it did, the screen)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            now = time.monotonic()
            if check(screen):
                return now, screen
            if now > deadline:
                raise TimeoutError(f"timed out waiting for {what}; the screen was:\n{screen}")
            time.sleep(poll)  # poll the screen: tmux has no change event

    def app_pid(self, timeout: float = 10) -> int:
        """The pid of the command started (the child of the pane's shell)."""
        deadline = time.monotonic() + timeout
        shell = int(self.tmux("list-panes", "-t", "main", "-F", "#{pane_pid}").split()[0])
        while True:
            children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
            if children:
                return int(children[0])
            if time.monotonic() > deadline:
                raise TimeoutError("the command did not start")
            time.sleep(0.01)  # poll: the pane's command starts asynchronously

    def exited(self) -> bool:
        return self.exit_file.exists() and bool(self.exit_file.read_text().strip())

    def kill(self) -> None:
        if self.control is not None:
            control, self.control = self.control, None
            control.close()
        self.tmux("kill-server")


def family(pid: int) -> list[int]:
    """`pid` and every process under it (the app and its harness process)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        with suppress(FileNotFoundError, ProcessLookupError):
            for task in Path(f"/proc/{current}/task").iterdir():
                queue += [int(c) for c in (task / "children").read_text().split()]
    return found


def rss_mib(pid: int) -> float:
    """The resident memory of `pid` and the processes under it, summed."""
    total = 0
    for member in family(pid):
        with suppress(FileNotFoundError, ProcessLookupError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of `pid` and the processes under it (all threads)."""
    total = 0
    for member in family(pid):
        with suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, window: float = 0.5, threshold: float = 0.02, timeout: float = 60) -> float:
    """Block until `pid` uses under `threshold` of a core over `window`; the time it did."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(window)  # the window the CPU use is measured over
        now = cpu_seconds(pid)
        if now - last < threshold * window:
            return time.monotonic() - window
        last = now
    raise TimeoutError(f"process {pid} never went idle")


def checkpoint_times(db: Path) -> list[float]:
    """The time of every text checkpoint ('entry.text_appended'), in order: its mark
    (runtime.store.marks), or its ledger row in a store from before schema 10."""
    from runtime.store import marks

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT conversation_id, seq, time FROM ledger WHERE type = 'entry.text_appended'"
        ).fetchall()
        rows += marks.times(con)
    finally:
        con.close()
    return [row[2] for row in sorted(rows)]


def largest_gap(times: list[float]) -> float:
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def markdown_answer(size: int) -> str:
    """About `size` characters of markdown with many blocks: headings, prose, lists, code.

    The last line is `END OF ANSWER <size>`, to look for on screen.
    """
    parts: list[str] = []
    total, n = 0, 0
    while total < size:
        n += 1
        block = (
            f"## Section {n}\n\n"
            f"Paragraph {n} explains the **durable** ledger and the `checkpoint` rule: every "
            "streamed answer is committed at most every hundred milliseconds, so a crash loses "
            "only a moment of text.\n\n"
            f"- item one of list {n}\n- item two, with *emphasis*\n- item three\n\n"
            f"```python\ndef step_{n}(x: int) -> int:\n    return x * {n} + 1\n```\n\n"
            f"> A quote in block {n}.\n\n"
        )
        parts.append(block)
        total += len(block)
    parts.append(f"END OF ANSWER {size}\n")
    return "".join(parts)
