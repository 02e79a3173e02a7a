"""`Harness.reset`: a new context in the same session, from a handoff note the model
writes (runtime.context.handoff says what and why).

One line each way it cannot happen, and nothing changed: a run going or input queued
(`Busy`: a reset does not cut a run or jump a queue; the user ends the run first or
waits), nothing in the context yet (`ResetFailed`), the note's request failing or
coming back empty (`ResetFailed`), the conversation changing while the note was
written (`ResetFailed`: the note would miss it). The note is committed as one `reset`
entry by a compare-and-set on the conversation's version, fenced by the driver's
lease token when this process drives it; a crash before that commit leaves the
context as it was, after it the reset is whole.
"""

from __future__ import annotations

from typing import Any

from runtime.context.handoff import handoff_request, write_note
from runtime.harness.driving import DrivingOps
from runtime.model.errors import Busy, ResetFailed
from runtime.model.ids import now, uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.store import failpoints
from runtime.store.tx import Tx

__all__ = ["ResetOps"]

_BUSY_HINT = "wait for the run to end, or end it first (Esc, or /supersede), then /reset"


class ResetOps(DrivingOps):
    async def reset(self, conversation_id: str, instructions: str | None = None) -> Entry:
        """Ask the model for a handoff note, then start a new context from it: the reset
        entry (see the module for what it refuses)."""
        self._check_open()
        self._needs_driver(conversation_id, "/reset")
        snap = await self.store.snapshot(conversation_id)
        version = snap.conversation.version
        if await self.store.unfinished(conversation_id):
            raise Busy("a run is going (or input waits for one): nothing was reset",
                       hint=_BUSY_HINT)  # fmt: skip
        driver = self._drivers.get(conversation_id)
        spec = (
            driver.config.model_info.spec if driver is not None else snap.conversation.agent.model
        )
        provider, model = self.resolve_model(spec)
        info = self.model_info(spec)
        request = handoff_request(model, snap.entries, instructions, info.context_window * 3)
        if request is None:
            raise ResetFailed(
                "nothing to reset: the context is empty",
                hint="a reset hands the context on in a note; send a prompt first",
            )
        text, usage = await write_note(provider, request, info)
        failpoints.hit("reset.noted")
        data: dict[str, Any] = {"handoff": True, "usage": usage, "base_version": version}
        if instructions:
            data["instructions"] = instructions
        entry = Entry(
            uuid7(), conversation_id, 0, EntryKind.RESET, EntryStatus.COMPLETE, text, now(),
            data=data,
        )  # fmt: skip

        def build(tx: Tx) -> Entry:
            if tx.active_run() is not None or tx.queued_inbox():
                raise Busy("a run started while the note was written: nothing was reset",
                           hint=_BUSY_HINT)  # fmt: skip
            if tx.version != version:
                raise ResetFailed(
                    "the conversation changed while the handoff note was written: "
                    "nothing was reset",
                    hint="the context is as it was; /reset again",
                )
            return tx.add_entry(entry)

        token = driver.token if driver is not None else None
        added: Entry = await self.store.transact(
            conversation_id, build, token=token, publish=self._publish
        )
        failpoints.hit("reset.committed")
        return added
