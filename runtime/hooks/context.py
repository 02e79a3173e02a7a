"""What a run offers the hooks around it: `RunContext`, the narrow side of the model
loop's `RunExecutor` that `runtime.hooks.points` may use (its conversation, the entries
it has read, whether an interrupt is under way, the store to read, a commit under its
lease, and a way to track entries it wrote), so the hooks room imports nothing of the
run room and the run room hands them no more than this."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from runtime.model.records import Entry, ToolCallRecord
    from runtime.store.database import Store
    from runtime.store.tx import Tx

__all__ = ["CallVetting", "RunContext"]

T = TypeVar("T")


class RunContext(Protocol):
    conversation_id: str
    interrupting: bool

    @property
    def entries(self) -> Sequence[Entry]: ...

    @property
    def store(self) -> Store: ...

    async def commit(
        self, build: Callable[[Tx], T], after: Callable[[T], None] | None = None
    ) -> T: ...

    def track(self, entry: Entry | None) -> None: ...


class CallVetting(Protocol):
    """What the model loop checks again when a PreToolUse hook rewrites a call's
    arguments: the tool's schema, the diff an edit would make, and, inside the
    transaction that stores the new arguments, the approval the user's rules and
    guarded paths give them (a rule that allowed what the model asked does not
    allow what a hook made of it)."""

    def schema_problem(self, name: str, arguments: dict[str, object]) -> str | None: ...

    async def preview(self, name: str, arguments: str) -> dict[str, object] | None: ...

    def redecide(self, tx: Tx, call: ToolCallRecord) -> ToolCallRecord: ...
