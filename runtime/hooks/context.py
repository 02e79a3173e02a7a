"""What a run offers the hooks around it: `RunContext`, the narrow side of the model
loop's `RunExecutor` that `runtime.hooks.points` may use (its conversation, the entries
it has read, whether an interrupt is under way, the store to read, a commit under its
lease, and a way to track entries it wrote), so the hooks room imports nothing of the
run room and the run room hands them no more than this."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from runtime.model.records import Entry
    from runtime.store.database import Store
    from runtime.store.tx import Tx

__all__ = ["RunContext"]

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
