"""Sessions as pickers list them: ordered, filtered, aged. No Textual here (plain mode
uses it), so `--plain -r` shows a numbered list without loading the app."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from runtime import HarnessClient, SessionSummary, visible

__all__ = [
    "NO_SESSIONS",
    "age",
    "choose_numbered",
    "filter_sessions",
    "home_relative",
    "order_sessions",
    "wants_picker",
]

NO_SESSIONS = "no sessions to resume yet: start one with `bastion`"


def wants_picker(opts: Any) -> bool:
    """`-r`/`--resume` given without an id."""
    return getattr(opts, "resume", None) == ""


def order_sessions(sessions: Sequence[SessionSummary], cwd: str) -> list[SessionSummary]:
    """`cwd`'s sessions first, then the others; newest first within each."""
    newest = sorted(sessions, key=lambda s: (-s.conversation.updated_at, s.conversation.id))
    here = [s for s in newest if s.conversation.cwd == cwd]
    return here + [s for s in newest if s.conversation.cwd != cwd]


def filter_sessions(
    sessions: Sequence[SessionSummary], query: str, *, letters: bool = True
) -> list[SessionSummary]:
    """The sessions holding every word of `query` (title, id, directory; any case), in
    order; when none does (and `letters`), those holding its letters in order."""
    words = query.casefold().split()
    if not words:
        return list(sessions)

    def haystack(s: SessionSummary) -> str:
        c = s.conversation
        return f"{c.title}\n{c.id}\n{c.cwd}".casefold()

    found = [s for s in sessions if all(w in haystack(s) for w in words)]
    if found or not letters:
        return found
    spread = re.compile(".*?".join(re.escape(c) for c in "".join(words)), re.DOTALL)
    return [s for s in sessions if spread.search(haystack(s))]


def age(then: float, now: float) -> str:
    """`just now`, `5m`, `3h`, `2d`, then the date."""
    seconds = max(0.0, now - then)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)}d ago"
    return time.strftime("%Y-%m-%d", time.localtime(then))


def home_relative(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path == home or path.startswith(home + os.sep) else path


async def choose_numbered(
    harness: HarnessClient, ask: Callable[[str], Awaitable[str]], say: Callable[[str], None]
) -> str | None:
    """The line-mode picker: a numbered list, then a number (Enter or Ctrl+D cancels)."""
    cwd = os.getcwd()
    sessions = order_sessions(await harness.session_summaries(), cwd)
    if not sessions:
        say(NO_SESSIONS)
        return None
    now = time.time()
    short = await harness.short_ids([s.conversation.id for s in sessions])
    for number, summary in enumerate(sessions, 1):
        c = summary.conversation
        where = "" if c.cwd == cwd else f"  ({visible(c.cwd, lines=False)})"
        title = visible(c.title, lines=False) if c.title else "(untitled)"
        say(
            f"{number:>3}. {title}  · {age(c.updated_at, now)} · {summary.entries} entries"
            f" · {short[c.id]}{where}"
        )
    while True:
        try:
            answer = (await ask(f"resume which (1-{len(sessions)}, Enter cancels)? ")).strip()
        except (EOFError, KeyboardInterrupt):
            return None
        if not answer:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(sessions):
            return sessions[int(answer) - 1].conversation.id
        say(f"type a number from 1 to {len(sessions)}, or press Enter to cancel")
