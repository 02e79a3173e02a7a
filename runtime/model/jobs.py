"""A background job (tools/jobs.py) as plain data: its record in the store, what a
`jobs.updated` event carries and `/jobs` lists, and the words said of its end.

Only the model room's records below it: the store, the events and the front ends use it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from runtime.model.ids import now, uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus

__all__ = ["JOB_STATES", "JobRecord", "ended_note", "job_age", "job_note"]

#: running; exited (by itself); stopped (stop_job, /jobs stop, or its session ending:
#: `end_reason` says which); lost (it ended when the bastion driving it stopped).
JOB_STATES = ("running", "exited", "stopped", "lost")
LAST_OUTPUT_CHARS = 2000  # what a record keeps of a job's last output


class JobRecord(msgspec.Struct, frozen=True):
    conversation_id: str
    number: int
    tool_call_id: str
    command: str
    cwd: str = "."
    state: str = "running"
    exit_code: int | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    end_reason: str = ""
    output_id: str = ""
    last_output: str = ""  # at its end (while it runs: as of when it was asked)
    sandbox: dict[str, Any] = msgspec.field(default_factory=dict)  # what applied to it
    process: dict[str, Any] | None = None  # its supervisor's record (tools.lifetime.reap)
    notes: tuple[str, ...] = ()  # what its end said besides (processes killed, …)

    @property
    def id(self) -> str:
        return f"job_{self.number}"

    @property
    def running(self) -> bool:
        return self.state == "running"

    def but(self, **changes: Any) -> JobRecord:
        return msgspec.structs.replace(self, **changes)

    def last_line(self, limit: int = 80) -> str:
        lines = [s.strip() for s in self.last_output.splitlines() if s.strip()]
        line = lines[-1] if lines else ""
        return line if len(line) <= limit else line[: limit - 1] + "…"

    def words(self) -> str:
        """`running`, `exited with code 3`, `stopped (by the user) with signal 15`, …"""
        if self.state == "running":
            return "running"
        if self.state == "lost":
            return "ended when bastion stopped"
        code = self.exit_code
        how = "" if code is None else f" with signal {-code}" if code < 0 else f" with code {code}"
        if self.state == "stopped":
            return f"stopped ({self.end_reason}){how}" if self.end_reason else f"stopped{how}"
        return f"exited{how}"

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__struct_fields__}
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRecord:
        known = cls.__struct_fields__
        values = {k: v for k, v in data.items() if k in known}
        values["notes"] = tuple(values.get("notes") or ())
        return cls(**values)


def job_age(seconds: float) -> str:
    """`12 s`, `4 min`, `2 h 05 min`."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def ended_note(jobs: list[JobRecord], why: str) -> tuple[str, str]:
    """(the line the user reads, what the model is told) of `jobs` ending together:
    `why` is "crash" (the bastion process driving them stopped) or the reason they were
    stopped ("bastion closed the session"); each with its last output."""
    names = ", ".join(f"{j.id} (`{j.command}`)" for j in jobs)
    few = "job" if len(jobs) == 1 else "jobs"
    if why == "crash":
        how = "ended when the previous bastion process stopped"
        told = "each was killed with every process it started"
    else:
        how, told = f"{'was' if len(jobs) == 1 else 'were'} stopped: {why}", why
    parts = [
        f"[bastion: background {few} {names} {how} ({told}). Start one again with "
        "run_command background: true if it is still needed.]"
    ]
    for job in jobs:
        tail = job.last_output.rstrip()
        said = f"its last output:\n{tail}" if tail else "it had printed nothing"
        parts.append(f"{job.id} `{job.command}` ({job.words()}): {said}")
    return f"background {few} {names} {how}", "\n\n".join(parts)


def job_note(conversation_id: str, line: str, told: str, jobs: list[JobRecord]) -> Entry:
    """A note entry: `line` for the user, `told` for the model (runtime.context.messages
    sends a note's `for_model` as a user message)."""
    data = {"jobs": [j.id for j in jobs], "for_model": told}
    return Entry(
        uuid7(), conversation_id, 0, EntryKind.NOTE, EntryStatus.COMPLETE, line, now(),
        data=data,
    )  # fmt: skip
