"""The store interface, written down: what the harness asks of its store, and what
an engine (an adapter: SQLite's file, a PostgreSQL database) gives the store.

`StoreAPI` is every transaction, read and ledger call the rooms above use
(`runtime.store.database.Store` is it, over either engine). Its promises, which
every engine keeps:

- A write is one transaction: `transact` runs a synchronous body (`Tx`) whose
  statements run at once, so each state change is a compare-and-set decided by
  its row count, never by a snapshot read earlier; its ledger events and the
  conversation's new version commit with it, and are published after the commit,
  even if the caller was cancelled meanwhile.
- With a fencing token, a transaction commits only while the token is the
  conversation's lease token (`LeaseLost` otherwise), checked under a lock on
  the conversation's row, so a stalled owner that wakes after another took over
  writes nothing.
- A read is one consistent read transaction.
- A storage error (the disk, the server, the connection; never a lost
  compare-and-set) fails the store once: `failure` is set, `on_failure` hears
  of it, and every later call is refused with it; nothing committed is lost.

`Engine` is what an adapter implements: transactions on its connections, the
dialect its SQL fragments come from (runtime.store.dialect), what its driver's
errors mean, and full-text search.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from runtime.model.events import DurableEvent
from runtime.model.records import (
    Conversation,
    Entry,
    InboxItem,
    Run,
    SessionSummary,
    ToolCallRecord,
)
from runtime.model.rules import Rule
from runtime.store.tx import Tx
from runtime.store.values import ForkHook, LeaseInfo, RunStart, Snapshot

if TYPE_CHECKING:
    from runtime.model.errors import SessionFailedError
    from runtime.model.results import SearchHit
    from runtime.store.dialect import Db, Dialect

__all__ = ["Engine", "ForkHook", "LeaseInfo", "RunStart", "Snapshot", "StoreAPI"]

T = TypeVar("T")
Publish = Callable[["DurableEvent"], None]


class Engine(Protocol):
    """An adapter: transactions on one database, in its dialect."""

    dialect: Dialect
    #: The SQLite file, or None (a server's database).
    path: Path | None
    #: The store as it may be shown (a URL without its password).
    where: str

    async def write(
        self,
        body: Callable[[Db], T],
        on_done: Callable[[T], None] | None,
        usable: Callable[[], None],
    ) -> T:
        """`body(db)` in one write transaction, whole on the engine's writer thread;
        `usable()` is called first (it raises when the store failed meanwhile);
        `on_done(result)` after the commit, even if the caller was cancelled."""
        ...

    async def read(self, fn: Callable[[Db], T]) -> T:
        """`fn(db)` in one consistent read transaction."""
        ...

    def storage_error(self, exc: BaseException) -> bool:
        """Is this StoreError (by its cause) the database failing, which fails the store?"""
        ...

    def stop_waiting(self) -> None:
        """Whatever waits for a lock or a connection gives up now."""
        ...

    def search(self, db: Db, query: str, limit: int) -> list[SearchHit]:
        """Conversations whose entries match `query`, best first (inside a read)."""
        ...

    async def close(self) -> None: ...


class StoreAPI(Protocol):
    """The store as the harness uses it (runtime.store.database.Store)."""

    dialect: Dialect
    where: str
    failure: SessionFailedError | None
    on_failure: Callable[[SessionFailedError], None] | None

    async def close(self) -> None: ...

    # --- transactions -------------------------------------------------------
    async def transact(
        self,
        conversation_id: str,
        body: Callable[[Tx], T],
        *,
        token: int | None = None,
        publish: Publish | None = None,
        after: Callable[[T], None] | None = None,
    ) -> T: ...

    async def create_conversation(
        self,
        conversation: Conversation,
        then: Callable[[Tx], T] | None = None,
        *,
        publish: Publish | None = None,
    ) -> tuple[Conversation, T | None]: ...

    async def fork_conversation(
        self,
        source_id: str,
        new_id: str,
        at: Callable[[list[Entry]], int],
        *,
        publish: Publish | None = None,
        also: ForkHook | None = None,
    ) -> Conversation: ...

    async def delete_conversation(
        self, conversation_id: str, *, force: bool = False, live: Callable[[LeaseInfo], bool]
    ) -> None: ...

    # --- the lease (fencing token) --------------------------------------------
    async def try_acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        pid: int,
        host: str,
        can_take: Callable[[LeaseInfo], bool],
        publish: Publish | None = None,
    ) -> tuple[LeaseInfo, bool]: ...

    async def heartbeat(self, conversation_id: str, token: int) -> bool: ...

    async def park_lease(
        self,
        conversation_id: str,
        token: int,
        owner: str,
        pid: int,
        host: str,
        publish: Publish | None = None,
    ) -> LeaseInfo: ...

    async def release_lease(
        self, conversation_id: str, token: int, publish: Publish | None = None
    ) -> bool: ...

    async def lease(self, conversation_id: str) -> LeaseInfo: ...

    # --- reads ----------------------------------------------------------------
    async def read(self, fn: Callable[[Db], T]) -> T: ...

    async def admission(self, request_key: str) -> tuple[str, str, str] | None: ...

    async def open_tool_calls(self, run_id: str) -> list[ToolCallRecord]: ...

    async def get_conversation(self, conversation_id: str) -> Conversation: ...

    async def exists(self, conversation_id: str) -> bool: ...

    async def deleted(self, conversation_id: str) -> bool: ...

    async def version(self, conversation_id: str) -> int: ...

    async def run(self, run_id: str) -> Run | None: ...

    async def inbox_item(self, item_id: str) -> InboxItem | None: ...

    async def tool_call(self, call_id: str) -> ToolCallRecord | None: ...

    async def session_rules(self, conversation_id: str) -> tuple[Rule, ...]: ...

    async def unfinished(self, conversation_id: str) -> bool: ...

    async def latest_run(self, conversation_id: str) -> Run | None: ...

    async def list_conversations(
        self, cwd: str | None = None, limit: int = 200, *, with_entries: bool = False
    ) -> list[Conversation]: ...

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]: ...

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]: ...

    async def snapshot(self, conversation_id: str, last: int | None = None) -> Snapshot: ...

    async def run_start(self, conversation_id: str, run_id: str) -> RunStart: ...

    # --- the ledger -----------------------------------------------------------
    async def ledger(
        self, conversation_id: str, after: int = 0, limit: int = 10_000, before: int = 1 << 62
    ) -> list[DurableEvent]: ...
