"""What a finished run_command row shows: exit code, duration, and its output's tail.

Read from the view alone: the call's committed result (`ToolCallRecord.result`,
in every snapshot, so a reopened session shows the same) holds the command's
`data` as run_command returned it: `output` (everything, or its head and tail
with a line saying how much is left out), `exit_code`, `signal`, `timed_out`,
`duration_ms`. The row shows the last TAIL_LINES lines; expanded, all of the
output, bounded to the last MAX_LINES lines and MAX_CHARS characters with a
note when cut.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from textual.content import Content

from runtime import visible
from runtime.model.records import ToolCallRecord
from tui.markup import escape

__all__ = ["MAX_CHARS", "MAX_LINES", "TAIL_LINES", "CommandOutput"]

TAIL_LINES = 10  # lines of a finished command's output shown under it
MAX_LINES = 2_000  # at most this many lines when expanded (the last ones)
MAX_CHARS = 256 * 1024  # and at most this many characters
TOGGLE_KEY = "ctrl+o"

# Colours (SGR: `ESC [ … m`) are dropped and the text they colour kept; every other
# control sequence and character is shown, not obeyed (`runtime.visible`), as
# `less -R` does: a command's output cannot move the cursor, erase what the row
# shows, retitle the window or write the clipboard, nor hide what it printed.
_COLOURS = re.compile(r"\x1b\[[0-9;:]*m")


def clean(text: str) -> str:
    if "\x1b" in text:
        text = _COLOURS.sub("", text)
    return visible(text).expandtabs(4)


def duration(ms: int) -> str:
    """`340 ms`, `1.2 s`, `2 m 05 s`."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    return f"{minutes} m {seconds:02d} s"


class CommandOutput(msgspec.Struct, frozen=True):
    """A finished command's output and how it ended, from its call's result."""

    lines: tuple[str, ...]  # the last MAX_LINES lines (and MAX_CHARS characters) at most
    omitted: int  # earlier lines left out to keep within those bounds
    exit_code: int | None
    signal: int | None
    timed_out: bool
    duration_ms: int | None
    job: str = ""  # a background job's "job_1 running" (tools/jobs.py), as its call left it

    @classmethod
    def of(cls, record: ToolCallRecord | None) -> CommandOutput | None:
        """The output of `record` if it is a finished run_command with one, else None."""
        if record is None or record.name != "run_command" or not record.result:
            return None
        data: Any = record.result.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("output"), str):
            return None
        text = clean(data["output"]).rstrip("\n")
        omitted = 0
        if len(text) > MAX_CHARS:
            start = text.find("\n", len(text) - MAX_CHARS) + 1  # from the first whole line
            omitted, text = text.count("\n", 0, start), text[start:]
        lines = text.split("\n") if text.strip() else []
        if len(lines) > MAX_LINES:
            omitted, lines = omitted + len(lines) - MAX_LINES, lines[-MAX_LINES:]
        return cls(
            lines=tuple(lines),
            omitted=omitted,
            exit_code=_int(data.get("exit_code")),
            signal=_int(data.get("signal")),
            timed_out=bool(data.get("timed_out")),
            duration_ms=_int(data.get("duration_ms")),
            job=f"{data['job_id']} {data.get('words', '')}" if data.get("background") else "",
        )

    @property
    def expandable(self) -> bool:
        return len(self.lines) > TAIL_LINES

    def status(self) -> str:
        """`exit 0 · 1.2 s · 34 lines`, the ending coloured by how it went."""
        if self.job:  # (its state when the call returned: /jobs has it now)
            ending = f"[$warning]background {escape(self.job)}[/]"
        elif self.timed_out:
            ending = "[$warning]timed out[/]"
        elif self.signal:
            ending = f"[$error]killed by signal {self.signal}[/]"
        elif self.exit_code is None:
            ending = "[$warning]no exit code[/]"
        else:
            tone = "$success" if self.exit_code == 0 else "$error"
            ending = f"[{tone}]exit {self.exit_code}[/]"
        parts = [ending]
        if self.duration_ms is not None:
            parts.append(duration(self.duration_ms))
        count = len(self.lines) + self.omitted
        parts.append("no output" if not count else f"{count:,} line{'s' if count != 1 else ''}")
        return "  [$foreground-muted]·[/]  ".join(parts)

    def content(self, expanded: bool) -> Content:
        """The lines under the call: status, then the tail (or all), then how to toggle.

        The output's lines are plain text (never read as markup), styled as a whole.
        """
        shown = self.lines if expanded else self.lines[-TAIL_LINES:]
        rows = [Content.from_markup(f"  [$foreground-muted]└[/] {self.status()}")]
        if expanded and self.omitted:
            rows.append(
                Content.from_markup(
                    f"    [$warning]… {self.omitted:,} earlier lines not shown "
                    f"(a row keeps the last {MAX_LINES:,} lines and {MAX_CHARS // 1024} KiB)[/]"
                )
            )
        rows += [Content.styled(f"    {line}", "$foreground-muted") for line in shown]
        if self.expandable:
            more = f"last {TAIL_LINES} lines" if expanded else f"all {len(self.lines):,} lines"
            hint = f"    {TOGGLE_KEY} or click: {more}"
            rows.append(Content.styled(hint, "$foreground-muted italic"))
        return Content("\n").join(rows)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
