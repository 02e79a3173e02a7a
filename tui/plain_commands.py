"""The slash commands in the line mode (`bastion --plain`): the registry of `tui.slash`,
the one the app uses, with the line mode as their host. A command the line mode
cannot carry out (/theme) says in one line that it needs the app; an unknown one
is one line too, and nothing of either is sent to the model.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text

from tui.sessionlist import choose_numbered

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rich.console import Console

    from runtime import ConversationView, HarnessClient
    from runtime.model.records import SessionSettings


class LineHost(Protocol):
    """What the commands use of the line mode (tui.plain.LineMode)."""

    harness: HarnessClient
    conversation_id: str
    view: ConversationView | None
    console: Console
    ask: Callable[[str], Awaitable[str]]
    pending_restore: Any
    draft: str | None
    quit_code: int | None

    async def switch(self, conversation_id: str, *, replay: bool) -> None: ...

    async def send(self, text: str, *, typed: bool = True) -> None: ...


__all__ = ["PlainHost", "rich_markup"]

_TAG = re.compile(r"(?<!\\)\[(?!/)([^\[\]]*)\]")


def rich_markup(markup: str) -> str:
    """Textual markup as Rich markup: theme variables (`$accent`, `$foreground-muted`)
    and percentages dropped from tags; a tag left with only a muted colour is dim."""

    def tag(match: re.Match[str]) -> str:
        words = match.group(1).split()
        kept = [w for w in words if not w.startswith("$") and not w.endswith("%")]
        if not kept:
            kept = ["dim"] if any("muted" in w for w in words) else ["bold"]
        return f"[{' '.join(kept)}]"

    return _TAG.sub(tag, markup)


class PlainHost:
    """What a slash command may use (`tui.slash.CommandHost`), in the line mode."""

    front_end = "plain"
    theme = ""

    def __init__(self, mode: LineHost, settings: SessionSettings | None) -> None:
        self.mode = mode
        self.settings = settings

    @property
    def harness(self) -> Any:
        return self.mode.harness

    @property
    def conversation_id(self) -> str:
        return self.mode.conversation_id

    @property
    def view(self) -> Any:
        return self.mode.view

    @property
    def available_themes(self) -> dict[str, Any]:
        return {}

    @property
    def pending_restore(self) -> Any:
        return self.mode.pending_restore

    @pending_restore.setter
    def pending_restore(self, plan: Any) -> None:
        self.mode.pending_restore = plan

    def say(self, markup: str, *, error: bool = False) -> None:
        text = Text.from_markup(rich_markup(markup), style="red" if error else "", emoji=False)
        self.mode.console.print(text, soft_wrap=True)

    def use_settings(self, settings: SessionSettings) -> None:
        self.settings = settings

    async def new_session(self) -> None:
        fresh = await self.harness.new_session(self.conversation_id)
        await self.mode.switch(fresh.id, replay=False)
        self.say("a new conversation: the next prompt starts it")

    async def pick_session(self) -> str | None:
        console = self.mode.console
        chosen: str | None = await choose_numbered(
            self.harness, self.mode.ask, lambda line: console.print(Text(line))
        )
        return chosen

    async def resume_session(self, conversation_id: str) -> None:
        await self.harness.switch_session(self.conversation_id, conversation_id)
        await self.mode.switch(conversation_id, replay=True)

    def set_draft(self, text: str) -> None:
        self.mode.draft = text  # the next prompt starts with it

    async def send_prompt(self, text: str) -> None:
        """A command file's prompt, sent as if typed (runtime.setup.commands)."""
        await self.mode.send(text)

    def copy_to_clipboard(self, text: str) -> None:
        """OSC 52, as the app does it: the terminal puts `text` on the clipboard (over
        SSH and in tmux with set-clipboard on); nothing when output is not a terminal."""
        import base64

        out = self.mode.console.file
        if getattr(out, "isatty", lambda: False)():
            out.write(f"\x1b]52;c;{base64.b64encode(text.encode()).decode()}\x07")
            out.flush()

    def exit(self, result: int | None = None) -> None:
        self.mode.quit_code = result or 0
