"""The Harness's session-level operations: full-text search and the session list,
fork and rewind, the restore plan and its carrying out, export and import, and
deletion. A mixin over `HarnessCore`; `Harness` is the public face."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from runtime import agents
from runtime.harness import transfer
from runtime.harness.core import HarnessCore
from runtime.model.errors import UnknownEntry
from runtime.model.ids import uuid7
from runtime.model.records import Conversation, Entry, SessionSummary
from runtime.model.results import RestorePlan, RestoreReport, Rewound, SearchHit
from runtime.run import effects
from runtime.run.driver import lease_live
from runtime.store import sessions, shortids
from runtime.store.database import DESCENDANTS_AND_SELF, remove_artifacts


class SessionOps(HarnessCore):
    async def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Conversations whose entries match `query` (full-text, ranked by bm25), each
        with its best entry and a snippet. SearchQueryError for an empty query; text
        that is not FTS5 syntax is searched as plain words."""
        return await self.store.search(query, limit)

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]:
        """The newest conversations (every directory) with their entry counts, for a picker."""
        return await self.store.session_summaries(limit)

    async def search_conversations(self, query: str) -> list[Conversation]:
        """The conversations of `search(query)`, best first."""
        return [hit.conversation for hit in await self.store.search(query)]

    async def fork(self, conversation_id: str, at_entry: str | None = None) -> Conversation:
        """A new conversation (fresh uuid7) sharing the history of `conversation_id` up to
        and including entry `at_entry` (None: all of it), created in one transaction;
        the source is untouched. UnknownEntry if the entry is not there."""
        self._check_open()

        def at(entries: list[Entry]) -> int:
            return sessions.fork_position(entries, at_entry, conversation_id)

        return await self.store.fork_conversation(
            conversation_id, uuid7(), at, publish=self._publish, also=agents.fork_children
        )

    async def rewind(self, conversation_id: str, entry_id: str) -> Rewound:
        """Fork just before the user message `entry_id`, and hand that message back for
        the prompt. Files are not touched: `restore_plan` says what can be undone."""
        self._check_open()
        found: list[Entry] = []

        def at(entries: list[Entry]) -> int:
            found.append(sessions.rewind_position(entries, entry_id, conversation_id))
            return found[0].position - 1

        conv = await self.store.fork_conversation(
            conversation_id, uuid7(), at, publish=self._publish, also=agents.fork_children
        )
        return Rewound(conv, found[0].text, conversation_id, entry_id)

    async def restore_plan(self, conversation_id: str, entry_id: str) -> RestorePlan:
        """What putting the workspace back to how it was before entry `entry_id` would
        do: the files it can restore or remove (from the calls' records), and the exact
        changes it cannot undo (a command outside git, a file changed by one, a call
        with no record). Nothing is changed; `restore(plan)` does it."""
        self._check_open()
        self._needs_driver(conversation_id, "restoring files (they are on the driver's machine)")
        conv = await self.store.get_conversation(conversation_id)

        def read(db: Any) -> list[effects.SpanCall]:
            row = db.execute(
                "SELECT position FROM entries WHERE id = ? AND conversation_id = ?",
                (entry_id, conversation_id),
            ).fetchone()
            if row is None:
                raise UnknownEntry(
                    f"conversation {conversation_id} has no entry {entry_id}",
                    hint=f"list its entries with `bastion export {conversation_id}`",
                )
            return effects.read_span(db, conversation_id, int(row[0]))

        span = await self.store.read(read)
        return await asyncio.to_thread(effects.plan, conversation_id, entry_id, conv.cwd, span)

    async def restore(self, plan: RestorePlan) -> RestoreReport:
        """Carry out `plan` through the workspace's tools (no path outside it is written);
        what could not be put back is reported, with what the plan could not undo."""
        self._check_open()
        self._needs_driver(
            plan.conversation_id, "restoring files (they are on the driver's machine)"
        )
        return await asyncio.to_thread(effects.restore, plan)

    async def export(self, conversation_id: str) -> dict[str, Any]:
        """The conversation as an export document (JSON-able): its records as stored and
        its ledger events. `import_conversation` reads it back."""
        view = await self.snapshot(conversation_id)
        return await self.store.read(lambda db: transfer.export_with(db, view))

    async def import_conversation(self, text: str, *, cwd: str) -> Conversation:
        """A new conversation (fresh ids throughout) working in `cwd` from an export
        document's text, validated whole first: ImportRefused, and nothing written, for
        a malformed file or one from a newer bastion. The file's own cwd, approval mode
        and anything but its model and instructions are never taken."""
        self._check_open()
        conv, history = transfer.parse_document(text, uuid7(), time.time(), cwd=cwd)
        created, _ = await self.store.create_conversation(
            conv, lambda tx: sessions.copy_history(tx, history), publish=self._publish
        )
        return await self.store.get_conversation(created.id)

    async def delete_conversation(self, conversation_id: str, *, force: bool = False) -> None:
        """Delete a conversation and everything of it (spilled output too); its id is
        never used again. Refused (UnfinishedWork) with work in progress unless `force`."""
        self._check_open()
        ttl = self.lease_ttl
        tree = await self.store.read(
            lambda db: [r[0] for r in db.execute(DESCENDANTS_AND_SELF, (conversation_id,))]
        )
        await self.store.delete_conversation(
            conversation_id, force=force, live=lambda lease: lease_live(lease, ttl)
        )
        for gone in tree or [conversation_id]:  # its subagents' spilled output too
            remove_artifacts(self.home / "artifacts" / gone)

    async def resolve_id(self, text: str) -> str:
        """The id of the one session `text` names: a full id, or any unique start of one
        (hex digits, hyphens optional; at least four), as git takes commit ids.
        UnknownConversation when it names none, AmbiguousId (naming them) when several."""
        return await self.store.read(lambda db: shortids.read_matches(db, text))

    async def short_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """Each of `ids` -> the prefix to show for it: at least eight hex digits, and long
        enough that no other stored session's id starts with it."""
        every = await self.store.read(shortids.read_ids)
        return shortids.short_ids(ids, every)
