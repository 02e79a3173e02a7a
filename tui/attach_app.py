"""`bastion attach ID` on a terminal: the Textual app over a session another process drives.

The app is the same one `bastion` runs; in place of a harness it is given an
`AttachedHarness`, which answers the calls the app makes (submit, respond,
interrupt, snapshot) through a `runtime.Follower`, and whose `views()` the app
shows as they come. The follower folds the driving process's events (deltas
included) with the runtime's reducer, or follows the ledger when no process
serves the session; the status line says which.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from runtime import BastionError, ConversationView, Follower, Harness, InboxMode, NeedsDriver

if TYPE_CHECKING:
    from runtime import (
        Conversation,
        Entry,
        HarnessAPI,
        InboxItem,
        Interruption,
        McpServerStatus,
        Redirection,
        RestorePlan,
        RestoreReport,
        Rewound,
        Rule,
        SearchHit,
        SessionSettings,
        SessionSummary,
    )

__all__ = ["AttachedHarness", "run_app"]


class AttachedHarness:
    """The Harness calls `BastionApp` makes, applied to an attached session."""

    attached = True  # how the app tells it apart without importing this module first
    elsewhere = True
    gone: BastionError | None = None

    def take_opening(self, conversation_id: str) -> None:
        return None

    def __init__(self, follower: Follower) -> None:
        self.follower = follower

    def views(self) -> AsyncIterator[ConversationView]:
        return self.follower.views()

    def source(self) -> str:
        """Where the view comes from, for the status line (markup)."""
        if self.follower.source == "socket":
            return "[$success]attached[/] · live from the driving process"
        return "[$warning]attached[/] · no driver: following the ledger"

    async def snapshot(self, conversation_id: str, last: int | None = None) -> ConversationView:
        """The follower's view (whole: `last` is a bound on what is needed, not a request)."""
        view = self.follower.view
        if view is None:
            return await self.follower.harness.snapshot(conversation_id)
        return view

    async def submit(
        self, conversation_id: str, text: str, *, mode: InboxMode = InboxMode.PROMPT, **_: Any
    ) -> InboxItem:
        return await self.follower.submit(text, mode)

    async def respond(
        self,
        conversation_id: str,
        tool_call_id: str,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
        sandbox: str | None = None,
    ) -> tuple[Rule, ...]:
        return await self.follower.respond(
            tool_call_id, approve, always=always, message=message, sandbox=sandbox
        )

    async def proposed_rules(
        self, conversation_id: str, tool_call_id: str, scope: str = "session"
    ) -> Any:
        """What "always" would save, worked out from the store (as the driver would)."""
        return await self.follower.harness.proposed_rules(conversation_id, tool_call_id, scope)

    async def interrupt(self, conversation_id: str) -> Interruption:
        return await self.follower.interrupt()

    async def redirect(self, conversation_id: str, text: str) -> Redirection:
        return await self.follower.redirect(text)

    async def set_reasoning_effort(self, conversation_id: str, effort: str) -> str:
        """Stored with the conversation: its driver reads it with the next run."""
        value: str = await self.follower.harness.set_reasoning_effort(conversation_id, effort)
        return value

    async def cancel_compaction(self, conversation_id: str) -> bool:
        return await self.follower.cancel_compaction()

    async def withdraw(self, conversation_id: str, item_id: str) -> bool:
        return await self.follower.withdraw(item_id)

    async def close(self) -> None:
        await self.follower.harness.close()

    # --- read from the store, as any process may --------------------------------

    async def session_settings(self, conversation_id: str) -> SessionSettings:
        return await self.follower.harness.session_settings(conversation_id)

    async def export(self, conversation_id: str) -> dict[str, Any]:
        return await self.follower.harness.export(conversation_id)

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        return await self.follower.harness.search(query, limit)

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]:
        return await self.follower.harness.session_summaries(limit)

    async def resolve_id(self, text: str) -> str:
        return await self.follower.harness.resolve_id(text)

    async def short_ids(self, ids: Sequence[str]) -> dict[str, str]:
        return await self.follower.harness.short_ids(ids)

    # --- only the driving process may: NeedsDriver, the one line the app shows ------

    async def send_held(self, conversation_id: str) -> tuple[InboxItem, ...]:
        raise NeedsDriver("sending held input (/send)")

    async def compact(self, conversation_id: str, instructions: str | None = None) -> Entry | None:
        raise NeedsDriver("/compact")

    async def set_approval_mode(self, conversation_id: str, mode: str) -> SessionSettings:
        raise NeedsDriver("changing the approval mode")

    async def set_model(self, conversation_id: str, spec: str) -> SessionSettings:
        raise NeedsDriver("changing the model")

    async def set_defaults(
        self, conversation_id: str, *, model: str | None = None, approval_mode: str | None = None
    ) -> None:
        raise NeedsDriver("a config change")

    async def new_session(self, conversation_id: str) -> Conversation:
        raise NeedsDriver("/new")

    async def switch_session(self, conversation_id: str, to: str) -> Conversation:
        raise NeedsDriver("switching sessions")

    async def fork(self, conversation_id: str, at_entry: str | None = None) -> Conversation:
        raise NeedsDriver("/fork")

    async def rewind(self, conversation_id: str, entry_id: str) -> Rewound:
        raise NeedsDriver("/rewind")

    async def mcp_servers(self, *, wait: bool = False) -> tuple[McpServerStatus, ...]:
        raise NeedsDriver("/mcp")

    async def restore_plan(self, conversation_id: str, entry_id: str) -> RestorePlan:
        raise NeedsDriver("/rewind")

    async def restore(self, plan: RestorePlan) -> RestoreReport:
        raise NeedsDriver("/rewind")


def run_app(conversation_id: str, *, theme: str | None = None) -> int:
    """The app attached to `conversation_id` until the user quits (the session goes on)."""
    from runtime import load_config
    from tui.app import BastionApp
    from tui.launch import size_from_the_terminal

    size_from_the_terminal()
    asyncio.run(_check(conversation_id))  # an unknown id fails here, before the screen

    async def opener() -> tuple[Any, str]:
        harness = await Harness.open()
        return AttachedHarness(Follower(harness, conversation_id)), conversation_id

    config = load_config(os.getcwd())
    app = BastionApp(opener=opener, theme=theme or config.theme, catalog=config.model_info)
    return app.run() or 0


async def _check(conversation_id: str) -> None:
    async with await Harness.open() as harness:
        await harness.snapshot(conversation_id)


if TYPE_CHECKING:  # mypy checks that attach answers the whole contract

    def _conforms(attached: AttachedHarness) -> HarnessAPI:
        return attached
