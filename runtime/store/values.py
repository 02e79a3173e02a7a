"""The values the store interface (runtime.store.interface) reads and takes: a
conversation's snapshot, what a run reads when it starts, a lease, a fork's hook.
(Apart from the interface so that the store loads them without its Protocols.)"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from runtime.model.events import DurableEvent
from runtime.model.records import Conversation, Entry, InboxItem, Run, ToolCallRecord
from runtime.model.rules import Rule
from runtime.model.todo import TodoItem
from runtime.store.tx import Tx

__all__ = ["ForkHook", "LeaseInfo", "RunStart", "Snapshot"]


class Snapshot(msgspec.Struct, frozen=True):
    """Everything stored about one conversation, read in one transaction."""

    conversation: Conversation
    entries: tuple[Entry, ...]
    runs: tuple[Run, ...]
    inbox: tuple[InboxItem, ...]
    tool_calls: tuple[ToolCallRecord, ...]
    rules: tuple[Rule, ...] = ()
    # Entries before `entries` left out (`snapshot(last=N)`), with their tool calls.
    earlier: int = 0
    todos: tuple[TodoItem, ...] = ()  # the model's checklist (runtime.plan)


class RunStart(msgspec.Struct, frozen=True):
    """What a run reads once when it starts, in one read transaction: the conversation,
    its entries, the run itself and the run's tool calls (not the other runs or inbox)."""

    conversation: Conversation
    entries: tuple[Entry, ...]
    run: Run | None
    tool_calls: tuple[ToolCallRecord, ...]


class LeaseInfo(msgspec.Struct, frozen=True):
    owner: str | None
    pid: int | None
    host: str | None
    heartbeat: float | None  # by the store's clock
    token: int
    #: The store's clock when this was read (runtime.store.database.store_clock): a
    #: heartbeat's age is `clock - heartbeat`, whatever this machine's clock says.
    clock: float | None = None


#: More for a fork's transaction: (the fork's Tx, old ids -> copied ones, a way to insert
#: another new conversation) -> the events of what it wrote elsewhere.
ForkHook = Callable[
    [Tx, dict[str, str], Callable[[Conversation], tuple[Tx, DurableEvent]]], list[DurableEvent]
]
