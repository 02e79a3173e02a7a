"""A subagent's transcript, live: the screen a `task` row opens (click, or Enter on it).

A subagent (runtime.agents) is its own conversation, driven by the same harness
as its parent, so this screen is that conversation's snapshot kept current by its
events through the runtime's one reducer, exactly as the main transcript is. The
line above it names the agent, its task, its id (for `bastion attach ID`) and its
state. Esc interrupts the subagent while it runs (only it: the parent's call then
reports it interrupted) and goes back once it has ended; Enter or q goes back.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from runtime import ConversationView
from runtime.model.errors import BastionError
from tui.markup import escape
from tui.widgets.transcript import Transcript

if TYPE_CHECKING:
    from runtime import HarnessClient

__all__ = ["SubagentScreen"]

FRAME = 0.05  # seconds between redraws while events arrive (they are joined meanwhile)


class SubagentScreen(Screen[None]):
    DEFAULT_CSS = """
    SubagentScreen #subagent-head {
        height: auto;
        padding: 0 1;
        background: $accent 15%;
        color: $foreground;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "back", "Back", show=False),
        Binding("q", "back", "Back", show=False),
    ]

    def __init__(self, harness: HarnessClient, conversation_id: str, label: str) -> None:
        super().__init__()
        self.harness = harness
        self.conversation_id = conversation_id
        self.label = label
        self.view: ConversationView | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._head(), id="subagent-head")
        yield Transcript()

    def on_mount(self) -> None:
        self.run_worker(self._follow(), exclusive=True, group="subagent")

    def _head(self) -> str:
        run = self.view.active_run if self.view is not None else None
        last = self.view.runs[-1] if self.view is not None and self.view.runs else None
        state = run.state if run is not None else (last.state if last else "…")
        esc = "esc interrupts it" if run is not None else "esc goes back"
        if self.view is not None and any(
            c.approval == "pending" and c.state == "pending" for c in self.view.tool_calls
        ):
            state = "[b $warning]asks for your approval: enter goes back to answer[/]"
        else:
            state = escape(state)
        return (
            f"[b]subagent {escape(self.label)}[/b] · {state} · "
            f"[$foreground-muted]{self.conversation_id} · {esc} · enter goes back[/]"
        )

    async def _follow(self) -> None:
        from runtime.model.views import reduce

        channel = self.harness.subscribe(self.conversation_id)
        try:
            view = await self.harness.snapshot(self.conversation_id)
            await self._show(view)
            while (batch := await channel.get()) is not None:
                if isinstance(batch, list):
                    for event in batch:
                        view = reduce(view, event)
                if not isinstance(batch, list) or view.resync_required:
                    view = await self.harness.snapshot(self.conversation_id)
                await self._show(view)
                await asyncio.sleep(FRAME)
        except NoMatches:
            pass  # the screen was closed meanwhile
        finally:
            channel.close()

    async def _show(self, view: ConversationView) -> None:
        self.view = view
        await self.query_one(Transcript).show(view)
        self.query_one("#subagent-head", Static).update(self._head())

    def escape_pressed(self) -> None:
        """Esc (the app's key): interrupt the subagent while it runs, else go back."""
        if self.view is not None and self.view.active_run is not None:
            self.run_worker(self._interrupt(), group="subagent-input")
        else:
            self.action_back()

    async def _interrupt(self) -> None:
        try:
            await self.harness.interrupt(self.conversation_id)
        except BastionError as exc:
            self.notify(str(exc), title="interrupt", severity="error")

    def action_back(self) -> None:
        if self.is_current:  # (a second key may come after it was closed)
            self.dismiss(None)
