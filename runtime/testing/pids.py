"""A sandboxed command's processes, seen from outside its PID namespace (tests).

A command runs in a PID namespace of its own (``tools/landlock.py``), so the pids
it writes down (``echo $$ > me.pid``) are its namespace's, not ours. A test that
wants to know whether such a process still runs asks for the live process whose
innermost pid is that one and whose working directory is the command's folder:
that pair tells two commands of the suite apart, however many namespaces number
their processes alike. Without a PID namespace the innermost pid is ours, and the
same question has the same answer.

    from runtime.testing.pids import running

    assert not running(int((ws / "bg.pid").read_text()), ws)
"""

from __future__ import annotations

import os
from pathlib import Path


def inner_pid(pid: int) -> int | None:
    """The innermost pid of our process ``pid`` (the last of /proc's NSpid), or None
    when it is gone or only a zombie."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            status = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip()[:1] in ("Z", "X"):
        return None
    ns = fields.get("NSpid", "").split()
    return int(ns[-1]) if ns else pid


def host_pids(inner: int, cwd: str | os.PathLike[str]) -> list[int]:
    """Our pids of the live processes whose innermost pid is ``inner`` and whose working
    directory is ``cwd``."""
    want = os.path.realpath(cwd)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or inner_pid(int(name)) != inner:
            continue
        try:
            if os.readlink(f"/proc/{name}/cwd") == want:
                found.append(int(name))
        except OSError:
            continue
    return found


def running(inner: int, cwd: str | os.PathLike[str] | Path) -> bool:
    """Whether the process a command in ``cwd`` knew as ``inner`` still runs."""
    return bool(host_pids(inner, cwd))
