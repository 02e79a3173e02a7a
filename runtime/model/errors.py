"""Typed errors of the harness. Each says what went wrong and what to do next."""

from __future__ import annotations

TYPE_CHECKING = False  # (typing costs the session commands ~5 ms to import)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class BastionError(Exception):
    """Base of every error the harness raises on purpose.

    `code` is stable for scripts (it lands in `--output-format json`), `message`
    is one line for a person, and `hint` says what to do next.
    """

    code = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


class ConfigError(BastionError):
    """Bad usage or configuration: unknown provider, missing key, bad setting."""

    code = "configuration"


class StoreError(BastionError):
    """The database cannot be used as it is (corrupt, unreadable, wrong schema)."""

    code = "store"


class SchemaTooNew(StoreError):
    code = "schema_too_new"


class StoreUnreachable(StoreError):
    """The database server cannot be reached, refused the login, or dropped the
    connection (a PostgreSQL store: runtime.store.pg)."""

    code = "store_unreachable"


class StoreFull(StoreError):
    """The disk (or the quota) holding the database is full."""

    code = "store_full"


class StoreIOError(StoreError):
    """The disk holding the database failed to read or write (an I/O error)."""

    code = "store_io"


class SessionFailedError(BastionError):
    """A storage error ended the harness (seed 004: "a storage error ends the Harness";
    the seed calls it SessionFailed): every run stopped without writing more, and every
    op after it is refused with this, naming the failure. `reason` is the code of the
    store error that caused it (`store_full`, `store_io`, `store_locked`, `store_corrupt`,
    `store_read_only`, `store`); the hint says what to do next. Commits are atomic, so
    the store holds everything committed before it: resume once the cause is fixed."""

    code = "session_failed"

    def __init__(self, message: str, *, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason

    @classmethod
    def of(cls, cause: StoreError) -> SessionFailedError:
        """The failure `cause` (the store's error) ends the harness with: its message, and
        what to do next (for a damaged file, the store's own hint: nothing resumes)."""
        fix = _FIXES.get(cause.code, "fix what that says")
        hint = (
            cause.hint
            if cause.code == "store_corrupt"
            else f"{fix}, then {_RESUME}: everything committed before it is kept"
        )
        return cls(f"the session stopped: {cause.message}", reason=cause.code, hint=hint)

    def line(self, conversation_id: str | None = None) -> str:
        """The one line a front end says, naming the session to resume when it knows it."""
        text = str(self)
        if conversation_id:
            text = text.replace(_RESUME, f"`bastion -r {conversation_id}` goes on")
        return text


_RESUME = "resume with `bastion -r ID`"


_FIXES = {
    "store_full": "free some space on that disk",
    "store_io": "check that disk (dmesg says why it failed)",
    "store_locked": "stop the process holding the database's lock",
    "store_read_only": "make the database writable again",
}


class UnknownConversation(BastionError):
    code = "unknown_conversation"


class ConversationExists(BastionError):
    """A new conversation's id was taken meanwhile (another process created it first:
    `--session-id` raced): nothing of this one was stored."""

    code = "conversation_exists"


class UnknownRun(BastionError):
    code = "unknown_run"


class InputHeld(BastionError):
    """The submission was queued behind a run that failed: it waits for the user."""

    code = "input_held"


class ConversationBusy(BastionError):
    """Another live process drives this conversation."""

    code = "conversation_busy"

    def __init__(self, message: str, *, pid: int | None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.pid = pid


class DrivenElsewhere(BastionError):
    """An op that acts in the process driving the conversation (its model, approval
    mode, compaction, jobs, history) asked of a process that only follows it through
    the store (`Harness.follow`): refused, nothing changed. Names who drives it."""

    code = "driven_elsewhere"

    def __init__(
        self, message: str, *, pid: int | None, host: str | None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.pid = pid
        self.host = host


class NotIdle(BastionError):
    """The harness process was asked to park (tui: `idle_park`) while the session has
    work: a run, queued input, a pending approval, a job, a subagent or another client.
    Nothing changed; it goes on driving."""

    code = "not_idle"


class Busy(BastionError):
    """Input sent with `when_busy="reject"` while a run goes or input waits: nothing
    was admitted (seed 004's reject-when-busy)."""

    code = "busy"


class NotRunning(BastionError):
    """An action on the run going (supersede) with no run going: nothing changed."""

    code = "not_running"


class ResetFailed(BastionError):
    """A reset's handoff note could not be written or kept (the model failed, wrote
    nothing, or the conversation changed meanwhile): the context is as it was."""

    code = "reset_failed"


class LeaseLost(BastionError):
    """This process's lease was taken over; its writes are refused by the fencing token."""

    code = "lease_lost"


class HarnessClosed(BastionError):
    code = "harness_closed"


class RequestKeyReused(BastionError):
    """A request key already admitted, sent again with different input."""

    code = "request_key_reused"


class UnfinishedWork(BastionError):
    """A conversation with a run in progress or queued input cannot be deleted."""

    code = "unfinished_work"


class NotPending(BastionError):
    """A transition lost: the approval was already answered, the item already placed."""

    code = "not_pending"


class StoreLocked(StoreError):
    """Another process held the database's write lock for longer than we wait."""

    code = "store_locked"

    def __init__(self, message: str, *, pid: int | None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.pid = pid


class StoreReadOnly(StoreError):
    """The database, or the directory it must live in, cannot be written."""

    code = "store_read_only"


class StoreCorrupt(StoreError):
    """The file is damaged or is not an SQLite database at all."""

    code = "store_corrupt"


class CompactionFailed(BastionError):
    """A compaction could not be made (nothing to compact, the summary model failed,
    or the conversation kept changing); the conversation is as it was."""

    code = "compaction_failed"


class EmptyInput(BastionError):
    """A prompt with nothing in it (only whitespace) is not sent."""

    code = "empty_input"


class UnknownEntry(BastionError):
    """An entry id that is not in the conversation named (fork, rewind)."""

    code = "unknown_entry"


class UnknownAgent(BastionError):
    """No background agent of that id (or description) in the session."""

    code = "unknown_agent"


class UnknownJob(BastionError):
    """No background job of that number in the conversation, or none this process runs."""

    code = "unknown_job"


class McpUnavailable(BastionError):
    """An MCP prompt or resource that cannot be had: no such server, prompt or listed
    resource, missing arguments, or the server is down or failed to answer."""

    code = "mcp_unavailable"


class AmbiguousId(BastionError):
    """A typed id prefix that starts more than one session's id; `matches` are their ids."""

    code = "ambiguous_id"

    def __init__(
        self, message: str, *, hint: str | None = None, matches: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, hint=hint)
        self.matches = matches

    @classmethod
    def among(
        cls, prefix: str, found: Sequence[Any], short: dict[str, str], *, more: bool
    ) -> AmbiguousId:
        """One line naming the sessions (at most five, newest first) `prefix` matches."""
        listed = found[:5]
        names = ", ".join(f"{short[c.id]} ({c.title or 'untitled'})" for c in listed)
        count = f"more than {len(listed)}" if more else str(len(found))
        return cls(
            f"{prefix} matches {count} sessions: {names}",
            hint="give more of the id",
            matches=tuple(c.id for c in listed),
        )


class HarnessGone(BastionError):
    """The harness's process ended (it crashed, or was killed) while this one used it."""

    code = "harness_gone"
