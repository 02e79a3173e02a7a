"""`bastion attach ID`: a second terminal on a session another process drives.

Plain text: the transcript on stdout as it streams (the events of the harness
driving it, through the one protocol: the driving process's, or this one's when no
process drove it: `tui.attached.connect`), status lines on stderr. Lines typed on
stdin act on the session:

    TEXT            a steer while the agent works, a new prompt when it is idle
    /queue TEXT     a follow-up: starts the next run when this one answers
    /steer TEXT     a steer (joins after the current tool round)
    /interrupt      interrupt the run (queued inputs are withdrawn and listed)
    /supersede [TEXT]  end the run; its unfinished answer leaves the model's context
    /urgent TEXT    stop the run after its current step and run TEXT next
    /reset [TEXT]   a new context from the model's handoff note (TEXT: what to stress)
    y | n           allow or deny the pending approval
    /withdraw       withdraw the newest queued input
    /quit           leave (so do Ctrl+C, and Ctrl+D at a terminal); the session goes on

When stdin is not a terminal its end stops input only: attach goes on watching
until it is interrupted, as a script following a session expects.

Everything is rendered from the one reducer's view (`Following`); what
was printed is remembered by entry id and length, never as a second transcript.
All of it is written through `_write` and `note`, which show its control
characters (`runtime.visible`) instead of handing them to the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import threading
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from runtime import (
    RESYNC,
    BastionError,
    ConversationView,
    DriverAt,
    HarnessClient,
    HarnessGone,
    Interruption,
    reduce,
    visible,
)
from runtime.model.errors import SessionFailedError
from runtime.model.records import (
    Approval,
    Entry,
    EntryKind,
    InboxItem,
    InboxMode,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.model.views import call_summary

if TYPE_CHECKING:
    from tui.attached import Reached

__all__ = ["AttachLine", "attach"]

HELP = (
    "type to steer (a prompt when idle) · /queue TEXT follow-up · /steer TEXT · "
    "/interrupt · /supersede [TEXT] · /urgent TEXT · /reset · y/n answer an approval · "
    "/withdraw · /jobs [stop N] · /quit"
)
_ENDED = {
    RunState.INTERRUPTED: "interrupted",
    RunState.FAILED: "failed",
    RunState.CANCELLED: "cancelled",
}


def pending_approval(view: ConversationView) -> ToolCallRecord | None:
    for call in view.tool_calls:
        if call.approval == Approval.PENDING and call.state == ToolCallState.PENDING:
            return call
    return None


def _first_line(text: str, limit: int = 100) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Following:
    """A session followed through a client: its view, folded from its events by the
    one reducer, and the ops the typed lines make."""

    def __init__(
        self, client: HarnessClient, conversation_id: str, source: str, home: Path | None = None
    ) -> None:
        self.client = client
        self.conversation_id = conversation_id
        self.home = home  # the store's folder (None: $BASTION_HOME's)
        self.source = source  # "live", "store" (followed through it: `driver`) or "here"
        self.driver: DriverAt | None = None  # where it is driven, when followed in the store
        self.view: ConversationView | None = None

    async def views(self) -> AsyncGenerator[ConversationView, None]:
        """Each view as the session changes. When the process serving it goes (it
        ended, crashed, or let the session go), the session is reached again
        (`tui.attached.connect`: another process that drives it now, or this one)."""
        from tui.attached import connect

        while True:
            async for view in self._views_of(self.client):
                yield view
            if self.client.failed is not None:  # a storage error ended it: no one drives
                raise self.client.failed  # it until its cause is fixed (seed 004)
            await self.client.close()
            self.reached(await connect(self.conversation_id, self.home))

    def reached(self, reached: Reached) -> None:
        self.client, self.source, self.driver = reached.client, reached.source, reached.driver

    async def _views_of(self, client: HarnessClient) -> AsyncGenerator[ConversationView, None]:
        conv_id = self.conversation_id
        channel = client.subscribe(conv_id)
        try:
            view = self.view = await client.snapshot(conv_id)
            yield view
            while (batch := await channel.get()) is not None:
                if batch is RESYNC:
                    view = await client.snapshot(conv_id)
                else:
                    assert isinstance(batch, list)
                    for event in batch:
                        view = reduce(view, event)
                    if view.resync_required:
                        view = await client.snapshot(conv_id)
                self.view = view
                yield view
        except HarnessGone:
            pass  # (a snapshot asked as it went)
        finally:
            channel.close()

    async def respond(self, call_id: str, approve: bool) -> None:
        await self.client.respond(self.conversation_id, call_id, approve)

    async def interrupt(self) -> Interruption:
        return await self.client.interrupt(self.conversation_id)

    async def submit(self, text: str, mode: InboxMode) -> InboxItem:
        return await self.client.submit(self.conversation_id, text, mode=mode)

    async def withdraw(self, item_id: str) -> bool:
        return await self.client.withdraw(self.conversation_id, item_id)


class AttachLine:
    """Prints a session's views as a transcript and applies typed lines through it."""

    def __init__(self, follower: Following, out: TextIO, err: TextIO) -> None:
        self.follower = follower
        self.out = out
        self.err = err
        self._printed: dict[str, int] = {}  # entry id -> characters printed
        self._calls: set[str] = set()  # tool calls shown
        self._asked: set[str] = set()  # approvals asked
        self._ended: set[str] = set()  # runs whose end was shown
        self._source: tuple[str, int | None] | None = None
        self._open_line = False  # stdout's last line is not ended yet (an answer streams)
        self._one_screen = _same_file(out, err)  # status lines would land in the answer

    # --- output -------------------------------------------------------------

    def render(self, view: ConversationView) -> None:
        """What is new in `view`, in transcript order: each entry, the tool calls of an
        answer right after it, a run's end after its last entry (a replay of a stored
        session reads as it happened, not with its calls and ends gathered last)."""
        self._status(view)
        calls: dict[str, list[ToolCallRecord]] = {}
        for call in view.tool_calls:
            calls.setdefault(call.entry_id, []).append(call)
        runs = {run.id: run for run in view.runs}
        entries = view.settled
        for at, entry in enumerate(entries):
            self._entry(view, entry)
            for call in calls.pop(entry.id, ()):
                self._call(call)
            after = entries[at + 1] if at + 1 < len(entries) else None
            if entry.run_id and (after is None or after.run_id != entry.run_id):
                self._run_end(runs.get(entry.run_id))
        for rest in calls.values():  # (calls of an entry not in the view: none expected)
            for call in rest:
                self._call(call)
        for run in view.runs:  # a run with no entry of its own
            self._run_end(run)
        if view.runs and view.active_run is None:
            self._end_line()  # the last answer ends with its line
        pending = pending_approval(view)
        if pending is not None and pending.id not in self._asked:
            self._asked.add(pending.id)
            self._write(
                f"\nallow {pending.name} {call_summary(pending.name, pending.arguments)}? [y/n]"
            )
        self.out.flush()

    def _entry(self, view: ConversationView, entry: Entry) -> None:
        text = view.text_of(entry)
        done = self._printed.get(entry.id)
        if entry.kind == EntryKind.TOOL_RESULT:
            if done is None and entry.status != "streaming":
                self._write(f"\n  ⎿ {_first_line(str(text))}")
                self._printed[entry.id] = len(text)
            return
        if done is None:
            self._write("\n> " if entry.kind == EntryKind.USER else "\n")
            done = 0
        elif len(text) < done:  # a retried answer starts over
            self._write("\n↺ ")
            done = 0
        if len(text) > done:
            self._write(text.slice(done))
        self._printed[entry.id] = len(text)

    def _call(self, call: ToolCallRecord) -> None:
        if call.id not in self._calls:
            self._calls.add(call.id)
            self._write(f"\n  ⏺ {call.name} {call_summary(call.name, call.arguments)}")

    def _run_end(self, run: Run | None) -> None:
        label = _ENDED.get(RunState(run.state)) if run is not None else None
        if run is not None and label and run.id not in self._ended:
            self._ended.add(run.id)
            why = (run.error or {}).get("message") or ""
            self._write(f"\n[run {label}{': ' + why if why else ''}]")

    def _write(self, text: str) -> None:
        if text:
            self.out.write(visible(text))
            self._open_line = not text.endswith("\n")

    def _end_line(self) -> None:
        """End the line an answer left open (before a status line, or when its run
        has ended), so what comes next starts a line of its own."""
        if self._open_line:
            self.out.write("\n")
            self.out.flush()
            self._open_line = False

    def _status(self, view: ConversationView) -> None:
        """Where the session is driven: said on attaching, and again when it moves."""
        follower = self.follower
        if follower.source == "store" and view.lease_pid == follower.client.server_pid:
            gone = follower.driver.where() if follower.driver else "another process"
            follower.source = "here"  # the follower took the lease: its driver died
            self.note(
                f"the process driving {follower.conversation_id} ({gone}) stopped: this "
                f"terminal drives it now, as `bastion -r` would; nothing committed is lost"
            )
        source = (follower.source, follower.client.server_pid)
        if self._source == source:
            return
        first = self._source is None
        self._source = source
        if follower.source == "live":
            line = f"live from the process driving it (pid {follower.client.server_pid})"
        elif follower.source == "store":
            where = follower.driver.where() if follower.driver else "another process"
            line = (
                f"following it through the store: {where} drives it (another machine or "
                "home); prompts, y/n and /interrupt reach it there, the answer shows as "
                "it is checkpointed"
            )
        elif first:
            line = "no process drove this session, so this one drives it"
        else:
            line = "the process driving it went, so this one drives it now"
        self.note(f"attached to {follower.conversation_id}; {line}")
        if first:
            self.note(HELP)

    def note(self, text: str) -> None:
        if self._one_screen:
            self._end_line()  # (a status line never glued to an answer on one terminal)
        print(visible(text), file=self.err, flush=True)

    # --- input --------------------------------------------------------------

    async def _jobs(self, words: list[str]) -> None:
        """`/jobs`: the session's background jobs, one line each; `/jobs stop N`."""
        client, conv_id = self.follower.client, self.follower.conversation_id
        if words[:1] == ["stop"] and len(words) == 2:
            job = await client.stop_job(conv_id, words[1])
            self.note(f"{job.id} {job.words()}: {visible(job.command)}")
            return
        if words:
            self.note("usage: /jobs, or /jobs stop N")
            return
        found = await client.jobs(conv_id)
        if not found:
            self.note("no background jobs")
        for job in found:
            last = job.last_line(70)
            self.note(
                f"{job.number} {job.words()}  {visible(job.command)}"
                + (f"  | {visible(last)}" if last else "")
            )

    async def handle(self, line: str) -> bool:
        """Apply one typed line; False to leave. A refusal is one line on stderr."""
        text = line.strip()
        try:
            return await self._handle(text)
        except BastionError as exc:
            self.note(f"bastion: {exc}")
            return True

    async def _handle(self, text: str) -> bool:
        follower = self.follower
        view = follower.view
        command, _, rest = text.partition(" ")
        if not text:
            return True
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            self.note(HELP)
        elif text.lower() in ("y", "n", "yes", "no"):
            call = pending_approval(view) if view is not None else None
            if call is None:
                self.note("nothing is waiting for approval")
            else:
                await follower.respond(call.id, text.lower().startswith("y"))
        elif command == "/interrupt":
            done = await follower.interrupt()
            self.note("interrupted" if done else "no run to interrupt")
            for item in done.withdrawn:
                self.note(f"withdrawn: {item.text}")
        elif command in ("/supersede", "/urgent", "/reset"):
            await self._context(command, rest.strip())
        elif command == "/withdraw":
            await self._withdraw(view)
        elif command == "/jobs":
            await self._jobs(rest.split())
        elif command in ("/queue", "/followup", "/steer"):
            mode = InboxMode.STEER if command == "/steer" else InboxMode.FOLLOW_UP
            self._queued(await follower.submit(rest, mode))
        elif command.startswith("//"):  # `//text` sends `/text`, as in the app
            busy = view is not None and view.active_run is not None
            mode = InboxMode.STEER if busy else InboxMode.PROMPT
            self._queued(await follower.submit(text[1:], mode))
        elif command.startswith("/"):
            from tui.slash import find

            if find(command[1:]) is not None:  # the app's and --plain's
                self.note(
                    f"{command} is the app's: run `bastion attach {follower.conversation_id}` in "
                    f"a terminal for it (here, line by line: {HELP})"
                )
            else:
                self.note(f"unknown command {command} ({HELP})")
        else:
            busy = view is not None and view.active_run is not None
            self._queued(await follower.submit(text, InboxMode.STEER if busy else InboxMode.PROMPT))
        return True

    async def _context(self, command: str, rest: str) -> None:
        """/supersede, /urgent, /reset (tui.slash_context has the app's): one line each."""
        client, conv = self.follower.client, self.follower.conversation_id
        if command == "/supersede":
            done = await client.supersede(conv, rest or None)
            self.note("superseded: the unfinished answer and its work are left out of the context")
            for item in done.withdrawn:
                self.note(f"withdrawn: {item.text}")
        elif command == "/urgent":
            if not rest:
                self.note("usage: /urgent TEXT (runs next, before queued input)")
                return
            item = await client.submit(conv, rest, mode=InboxMode.INTERRUPT_NEXT)
            self.note("urgent: the run stops after its current step; this runs next"
                      if item.state == "queued" else "sent: nothing was running")  # fmt: skip
        else:
            entry = await client.reset(conv, rest or None)
            words = len(entry.text.split())
            self.note(f"reset: a new context starts from the model's handoff note ({words} words)")

    def _queued(self, item: InboxItem) -> None:
        if item.state == "queued":
            self.note(f"queued ({item.mode}): {_first_line(item.text)}")

    async def _withdraw(self, view: ConversationView | None) -> None:
        queued = view.queued_inbox if view is not None else ()
        if not queued:
            self.note("nothing is queued")
        elif await self.follower.withdraw(queued[-1].id):
            self.note(f"withdrawn: {queued[-1].text}")
        else:
            self.note("too late: it was placed already")


def _same_file(a: TextIO, b: TextIO) -> bool:
    """Whether two streams write to one file or terminal (stdout and stderr both on the
    terminal, as usual; not when either is redirected)."""
    if a is b:
        return True
    try:
        return os.path.samestat(os.fstat(a.fileno()), os.fstat(b.fileno()))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def _stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """Read stdin on a thread (a terminal or a pipe alike); None at its end."""

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="attach-stdin", daemon=True).start()


async def attach(conversation_id: str) -> int:
    """Follow and act on `conversation_id` until /quit, end of input or Ctrl+C."""
    from tui.attached import connect

    reached = await connect(conversation_id)
    follower = Following(reached.client, conversation_id, reached.source)
    follower.driver = reached.driver
    try:
        screen = AttachLine(follower, sys.stdout, sys.stderr)
        views = follower.views()
        screen.render(await anext(views))  # an unknown id fails here, before any input

        async def show() -> None:
            async for view in views:
                screen.render(view)

        showing = asyncio.create_task(show())
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        _stdin_lines(asyncio.get_running_loop(), lines)
        try:
            while (line := await _next_line(lines, showing)) is not None:
                if not await screen.handle(line):
                    break
            else:
                if not sys.stdin.isatty():
                    # Input ended (a script, </dev/null): go on watching until interrupted.
                    await showing
        finally:
            showing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await showing
            await views.aclose()
        return 0
    except SessionFailedError as exc:  # the driving process's store failed (seed 004)
        from tui.exits import EXIT_FAILED, error_line

        error_line(exc.line(conversation_id))
        return EXIT_FAILED
    finally:
        await follower.client.close()


async def _next_line(lines: asyncio.Queue[str | None], showing: asyncio.Task[None]) -> str | None:
    """The next typed line; the view task's failure (the store gave out) is raised here."""
    getting = asyncio.ensure_future(lines.get())
    await asyncio.wait({getting, showing}, return_when=asyncio.FIRST_COMPLETED)
    if getting.done():
        return getting.result()
    getting.cancel()
    showing.result()  # raises what ended it
    return None
