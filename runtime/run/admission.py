"""Admitting input: a new conversation's record, the prompt checks, and the one
transaction that admits a prompt (the admission check by request key, then a user
entry and a queued run when idle, or a queued inbox item when busy)."""

from __future__ import annotations

import time
from typing import Any

from runtime.model.errors import Busy, ConfigError, EmptyInput, RequestKeyReused
from runtime.model.ids import uuid7
from runtime.model.records import Conversation, InboxItem, InboxMode, InboxState
from runtime.run.driver import new_run
from runtime.run.placing import user_entry
from runtime.store.database import request_digest
from runtime.store.dialect import dialect_of
from runtime.store.tx import Tx


def new_conversation(
    cwd: str,
    *,
    settings: dict[str, Any] | None = None,
    title: str = "",
    conversation_id: str | None = None,
) -> Conversation:
    check_folder(cwd)
    stamp = time.time()
    return Conversation(conversation_id or uuid7(), title, cwd, dict(settings or {}), stamp, stamp)


def check_folder(cwd: str) -> None:
    """A session's folder is kept in the store and named to the model, so its path must
    be text: a ConfigError (one line) when a name on it is not UTF-8."""
    from runtime.store.surrogates import escaped, utf8

    if not utf8(cwd):
        raise ConfigError(
            f"{escaped(cwd)}: bastion cannot work in a folder whose path is not UTF-8",
            hint="rename the folder with the \\x bytes to a UTF-8 name, or start bastion "
            "in another folder",
        )


def check_text(text: str) -> None:
    if not text.strip():
        raise EmptyInput("the prompt is empty", hint="type something for the agent to do")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EmptyInput(
            "the prompt is not valid UTF-8 text",
            hint="pass the prompt as UTF-8 (check the terminal's or the file's encoding)",
        ) from None


class AdmittedBefore(Exception):
    """Raised inside the transaction that would create a conversation for its first
    prompt when the prompt's request key was admitted already (another process won
    the race): the transaction rolls back, so no empty conversation is left, and the
    caller returns `item`, the key's admitted item, in its own conversation."""

    def __init__(self, item: InboxItem) -> None:
        super().__init__(item.id)
        self.item = item


def admitted_item(tx: Tx, text: str, request_key: str, mode: InboxMode) -> InboxItem | None:
    """The item `request_key` admitted (in whichever conversation), or None if it is new.
    RequestKeyReused if the key was admitted for other input. Where writers run at once
    (PostgreSQL), the key is locked first: of two processes admitting one key, the
    second waits for the first to commit and then finds its admission here."""
    if lock := dialect_of(tx.db).key_lock:
        tx.rows(lock, (f"admission:{request_key}",))
    rows = tx.rows(
        "SELECT inbox_id, digest, conversation_id FROM admissions WHERE request_key = ?",
        (request_key,),
    )
    if not rows:
        return None
    inbox_id, known, owner = rows[0]
    if known and known != request_digest(text, mode):
        raise RequestKeyReused(
            f"request key {request_key!r} was already used for a different prompt",
            hint="use a new request key for new input",
        )
    found = tx.inbox_item(inbox_id, owner)
    assert found is not None, f"admission {request_key} without its item in {owner}"
    return found


def admit_first_tx(tx: Tx, text: str, request_key: str | None, mode: InboxMode) -> InboxItem:
    """`admit_tx` in the transaction that creates the conversation: AdmittedBefore (the
    creation rolled back) when the request key was admitted already."""
    if request_key is not None and (found := admitted_item(tx, text, request_key, mode)):
        raise AdmittedBefore(found)
    return admit_tx(tx, text, request_key, mode)


def admit_tx(
    tx: Tx, text: str, request_key: str | None, mode: InboxMode, *, reject_busy: bool = False
) -> InboxItem:
    """Inside one transaction: the admission check, then the user entry and a queued run
    (idle) or a queued inbox item (busy; `reject_busy`: Busy instead, nothing written)."""
    digest = request_digest(text, mode)
    if request_key is not None and (found := admitted_item(tx, text, request_key, mode)):
        return found
    item = InboxItem(
        uuid7(), tx.conversation_id, mode, text, InboxState.QUEUED, time.time(), request_key
    )
    if request_key is not None:
        tx.execute(
            "INSERT INTO admissions (request_key, conversation_id, inbox_id, digest, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (request_key, tx.conversation_id, item.id, digest, item.created_at),
        )
    if tx.active_run() is not None or tx.queued_inbox():
        if reject_busy:  # (decided in the transaction that would admit it: no race)
            raise Busy(
                "a run is going in this conversation (or input waits for one), so this "
                "input was not admitted",
                hint="send it again when the run ends, or send it as a steer or follow-up",
            )
        return tx.insert_inbox(item)
    # Idle: admitted straight into a new run (the item is placed as it is inserted).
    run = new_run(tx.conversation_id, item.id)
    entry = user_entry(item, run.id)
    placed = tx.insert_inbox(item.but(state=InboxState.PLACED, run_id=run.id, entry_id=entry.id))
    tx.add_entry(entry)
    tx.insert_run(run)
    conv = tx.conversation()
    if not conv.title:
        tx.update_conversation(conv.but(title=title_from(text)))
    return placed


def title_from(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
