"""The one contract between a front end and a harness: `HarnessAPI`.

Three things answer it, and mypy checks each against it (`tests/test_contract.py`
and `nox -s typecheck` over tui/):

- `runtime.Harness`, the harness in this process (plain mode, print mode, tests);
- `runtime.ipc.remote.RemoteHarness`, the app's client of the harness process, whose
  every method is one request over the socket pair;
- `tui.attach_app.AttachedHarness`, `bastion attach`'s follower of a session another
  process drives. What only the driving process can do (switch sessions, rewind,
  change the model, ...) raises `NeedsDriver`, a `BastionError` whose message is the
  one line the app shows; `attached` tells a front end so before it asks.

The app holds a `HarnessAPI` and nothing more specific, so a method missing from
any of the three is a type error, not an `AttributeError` in a user's terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.harness import Harness
    from runtime.ipc.remote import RemoteHarness
    from runtime.model.errors import BastionError
    from runtime.model.records import (
        Conversation,
        Entry,
        InboxItem,
        InboxMode,
        SessionSettings,
        SessionSummary,
    )
    from runtime.model.results import (
        Interruption,
        McpServerStatus,
        Redirection,
        RestorePlan,
        RestoreReport,
        Rewound,
        SearchHit,
    )
    from runtime.model.rules import Rule
    from runtime.model.views import ConversationView

__all__ = ["HarnessAPI"]


class HarnessAPI(Protocol):
    """What a front end may ask of a harness, wherever the harness runs."""

    @property
    def attached(self) -> bool:
        """A follower of a session another process drives (`bastion attach`)."""

    @property
    def elsewhere(self) -> bool:
        """The harness does not run on the caller's event loop."""

    @property
    def gone(self) -> BastionError | None:
        """Why a harness in another process ended; None while it serves."""

    def take_opening(self, conversation_id: str) -> tuple[Any, Any] | None:
        """The (settings, view) sent when the session was opened elsewhere, once."""

    async def close(self) -> None: ...

    # --- the session on screen -------------------------------------------------

    async def snapshot(self, conversation_id: str, last: int | None = None) -> ConversationView: ...

    async def submit(
        self,
        conversation_id: str,
        text: str,
        *,
        request_key: str | None = None,
        mode: InboxMode = ...,
        create: Conversation | None = None,
    ) -> InboxItem: ...

    async def withdraw(self, conversation_id: str, item_id: str) -> bool: ...

    async def send_held(self, conversation_id: str) -> tuple[InboxItem, ...]: ...

    async def interrupt(self, conversation_id: str) -> Interruption: ...

    async def redirect(self, conversation_id: str, text: str) -> Redirection: ...

    async def respond(
        self,
        conversation_id: str,
        tool_call_id: str,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
        sandbox: str | None = None,
    ) -> tuple[Rule, ...]: ...

    async def proposed_rules(
        self, conversation_id: str, tool_call_id: str, scope: str = "session"
    ) -> tuple[Rule, ...]: ...

    async def compact(
        self, conversation_id: str, instructions: str | None = None
    ) -> Entry | None: ...

    async def cancel_compaction(self, conversation_id: str) -> bool: ...

    # --- its settings -------------------------------------------------------------

    async def session_settings(self, conversation_id: str) -> SessionSettings: ...

    async def set_approval_mode(self, conversation_id: str, mode: str) -> SessionSettings: ...

    async def set_model(self, conversation_id: str, spec: str) -> SessionSettings: ...

    async def set_reasoning_effort(self, conversation_id: str, effort: str) -> str: ...

    async def set_defaults(
        self, conversation_id: str, *, model: str | None = None, approval_mode: str | None = None
    ) -> None: ...

    # --- other sessions -----------------------------------------------------------

    async def new_session(self, conversation_id: str) -> Conversation: ...

    async def switch_session(self, conversation_id: str, to: str) -> Conversation: ...

    async def fork(self, conversation_id: str, at_entry: str | None = None) -> Conversation: ...

    async def rewind(self, conversation_id: str, entry_id: str) -> Rewound: ...

    async def restore_plan(self, conversation_id: str, entry_id: str) -> RestorePlan: ...

    async def restore(self, plan: RestorePlan) -> RestoreReport: ...

    async def export(self, conversation_id: str) -> dict[str, Any]: ...

    # --- MCP servers (runtime.mcp) ----------------------------------------------------

    async def mcp_servers(self, *, wait: bool = False) -> tuple[McpServerStatus, ...]:
        """Each configured MCP server, its state and tools; with `wait`, once each has
        started or failed."""

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]: ...

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]: ...

    async def resolve_id(self, text: str) -> str: ...

    async def short_ids(self, ids: Sequence[str]) -> dict[str, str]: ...


if TYPE_CHECKING:  # mypy checks that both harnesses of the runtime answer the contract

    def _conforms(local: Harness, remote: RemoteHarness) -> tuple[HarnessAPI, HarnessAPI]:
        return local, remote
