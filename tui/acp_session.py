"""One session of `bastion acp`: a bastion conversation this process drives for an editor.

A session is opened the way every front end opens one (`tui.session.open_session`,
then `drive_session` with `interactive=True`, so an approval waits for an answer) and
reached through the one protocol (`runtime.local_client`, as print mode reaches its
harness). Its ACP session id is the conversation's id.

It follows the conversation the way `--plain` does: one subscription, the view the
runtime's reducer keeps, and what changed sent to the editor as `session/update`s
(`tui.acp_updates.Mirror`). A call waiting for approval (`pending_approval`, as
every front end reads it from the view) is asked with `session/request_permission`;
the option chosen becomes `HarnessClient.respond`. A prompt is submitted, waited for
(`HarnessClient.wait`), and answered once the view has seen its run end, so every
update of the turn reaches the editor before the `session/prompt` response.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Any, Final

import msgspec
from acp import RequestError
from acp.interfaces import Client
from acp.schema import PermissionOption, PromptResponse, StopReason

from runtime import (
    BUDGET_CODES,
    RESYNC,
    BastionError,
    ConversationView,
    EmptyInput,
    EventChannel,
    HarnessClient,
    UnknownConversation,
    expand_prompt,
    local_client,
    reduce,
)
from runtime.model.errors import SessionFailedError, UnknownRun
from runtime.model.events import AttemptReset, SettingsChanged
from runtime.model.records import Run, RunState, ToolCallRecord
from runtime.model.views import child_label
from tui import acp_commands
from tui.acp_modes import check_mode, mode_update
from tui.acp_updates import Mirror, PromptBlock, Update, permission_call, prompt_text
from tui.exits import error_line
from tui.session import Session, drive_session, open_session
from tui.widgets.approval import pending_approval

__all__ = ["AcpSession", "open_acp_session", "rpc_error"]

log = logging.getLogger(__name__)

# JSON-RPC error codes (ACP's): what no session or conversation has, invalid
# parameters, and everything else bastion refuses (its message says what).
NOT_FOUND: Final = -32002
INVALID_PARAMS: Final = -32602
FAILED: Final = -32603
CATCH_UP: Final = 10.0  # seconds the view gets to see a run end that the store has ended

ALLOWING: Final = ("allow_once", "allow_always")
ALLOW_ONCE: Final = PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once")
ALLOW_ALWAYS: Final = PermissionOption(
    option_id="allow_always", name="Always allow", kind="allow_always"
)
REJECT: Final = PermissionOption(option_id="reject_once", name="Reject", kind="reject_once")
#: A failed run's `error.reason` (runtime.providers.httpbase) that is an ACP stop reason.
STOP_REASONS: Final[dict[str, StopReason]] = {
    "answer withheld": "refusal",
    "output limit reached with no answer": "max_tokens",
}


def rpc_error(exc: BastionError, session_id: str | None = None) -> RequestError:
    """The JSON-RPC error for a refusal of bastion's: its one line, its code as data (a
    storage error that ended the session: its reason too, and the session to resume)."""
    code = NOT_FOUND if isinstance(exc, UnknownConversation) else FAILED
    if isinstance(exc, SessionFailedError):
        return RequestError(code, exc.line(session_id), {"code": exc.code, "reason": exc.reason})
    return RequestError(code, str(exc), {"code": exc.code})


def session_opts(opts: Any, resume: str | None) -> argparse.Namespace:
    """The options `open_session` reads: `bastion acp`'s flags, and the session to load."""
    return argparse.Namespace(
        model=opts.model,
        approval_mode=opts.approval_mode,
        resume=resume,
        session_id=None,
        continue_=False,
        trust=False,  # (only the user's recorded trust: an editor cannot grant it)
        request_key=None,
        allow=[],
    )


async def open_acp_session(
    opts: Any, cwd: str, client: Client, *, resume: str | None = None
) -> AcpSession:
    """Open (a new one, or `resume`) and drive a conversation in `cwd`, as `bastion`
    would; the project's files apply only if the user trusts the folder, and nothing
    is asked on stdio (what was ignored is said on stderr)."""
    session = await open_session(session_opts(opts, resume), cwd)
    for note in session.config.notes:  # project settings ignored (an untrusted folder)
        error_line(note)
    await drive_session(session, interactive=True)
    if notice := session.sandbox_notice():
        error_line(notice)
    try:
        harness = await local_client(session.harness, client="acp")
    except BaseException:
        await session.harness.close()
        raise
    return AcpSession(session, harness, client)


class AcpSession:
    """A conversation followed for one editor (see the module)."""

    def __init__(self, session: Session, harness: HarnessClient, client: Client) -> None:
        self.session = session
        self.harness = harness
        self.client = client
        self.id = session.conversation.id
        self.mirror = Mirror()
        self.view: ConversationView | None = None
        self._events: EventChannel | None = None
        self._follower: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()  # the view moved on (or stopped following)
        self._quiet = asyncio.Lock()  # held while a prompt is admitted: its entry is not echoed
        self._asking: tuple[str, asyncio.Task[None]] | None = None
        self._asked: set[str] = set()  # calls asked about once (never asked again)
        self._cancelled = False
        self._ended = False
        self.mode = ""  # the approval mode the editor was told (`start`, `set_mode`)

    @property
    def cwd(self) -> str:
        return self.session.conversation.cwd

    async def start(self) -> None:
        """Subscribe, send what the view holds (a loaded session's whole transcript:
        done before `session/load` is answered), then follow it."""
        self._events = self.harness.subscribe(self.id)  # (before the snapshot: none missed)
        self.view = await self.harness.snapshot(self.id)
        self.mode = (await self.harness.session_settings(self.id)).approval_mode
        await self._send([*self.mirror.updates(self.view), acp_commands.advertised()])
        self._consider(self.view)
        self._follower = asyncio.get_running_loop().create_task(self._follow())

    async def close(self) -> None:
        """Stop following and close the harness (its lease released; an unfinished run
        is resumed by whoever opens the conversation next)."""
        tasks = [t for t in (self._follower, self._asking[1] if self._asking else None) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.harness.close()

    async def set_mode(self, mode_id: object) -> None:
        """`session/set_mode`: the approval mode, switched as Shift+Tab switches it (an
        unknown mode is the request's one error line, nothing changed)."""
        mode = check_mode(mode_id)
        try:
            settings = await self.harness.set_approval_mode(self.id, mode)
        except BastionError as exc:
            raise rpc_error(exc) from None
        self.mode = settings.approval_mode  # (the editor asked for it: not told back)

    def _mode_updates(self, batch: list[object]) -> list[Update]:
        """A switch of the approval mode made elsewhere (an attached terminal), told."""
        told: list[Update] = []
        for event in batch:
            if isinstance(event, SettingsChanged) and event.approval_mode != self.mode:
                self.mode = event.approval_mode
                told.append(mode_update(self.mode))
        return told[-1:]

    # --- following -------------------------------------------------------------------

    async def _follow(self) -> None:
        assert self._events is not None
        try:
            while (batch := await self._events.get()) is not None:
                await self._fold(batch)
        except ConnectionError:
            log.info("the editor went away: session %s is no longer followed", self.id)
        except Exception:  # (a bug here must not leave a prompt waiting for ever)
            log.exception("following session %s failed", self.id)
        finally:
            self._ended = True
            async with self._changed:
                self._changed.notify_all()

    async def _fold(self, batch: object) -> None:
        """Reduce a batch of events into the view and tell the editor what changed."""
        assert self.view is not None
        view, restarted, modes = self.view, [], []
        if batch is RESYNC:
            view = msgspec.structs.replace(view, resync_required=True)
        elif isinstance(batch, list):
            modes = self._mode_updates(batch)
            for event in batch:
                if isinstance(event, AttemptReset):
                    restarted.append(event.entry_id)
                view = reduce(view, event)
        if view.resync_required:
            view = await self.harness.snapshot(self.id)
            self.mirror.rewind()
        self.view = view
        async with self._quiet:
            await self._send(modes + self.mirror.restart(restarted) + self.mirror.updates(view))
        self._consider(view)
        async with self._changed:
            self._changed.notify_all()

    async def _send(self, updates: list[Update]) -> None:
        for update in updates:
            await self.client.session_update(session_id=self.id, update=update)

    # --- approvals -------------------------------------------------------------------

    def _consider(self, view: ConversationView) -> None:
        """Ask about the call waiting for approval, once; stop asking about one that is
        no longer waiting (answered from another terminal, or its run ended)."""
        call = pending_approval(view)
        if self._asking is not None:
            asked, task = self._asking
            if call is not None and call.id == asked:
                return
            task.cancel()  # (nothing if it is done)
            self._asking = None
        if call is None or call.id in self._asked:
            return
        self._asked.add(call.id)
        task = asyncio.get_running_loop().create_task(self._ask(call, child_label(view, call)))
        self._asking = (call.id, task)

    async def _ask(self, call: ToolCallRecord, label: str) -> None:
        """`session/request_permission`; the option chosen becomes `respond` (any
        answer but an allowing option, a cancelled request included, denies)."""
        options = [ALLOW_ONCE, REJECT]
        with contextlib.suppress(BastionError):
            if await self.harness.proposed_rules(self.id, call.id):
                options.insert(1, ALLOW_ALWAYS)  # (a rule can be saved for this call)
        choice = None
        try:
            response = await self.client.request_permission(
                session_id=self.id,
                tool_call=permission_call(call, self.cwd, label),
                options=options,
            )
            if response.outcome.outcome == "selected":
                choice = response.outcome.option_id
        except (RequestError, ConnectionError) as exc:
            log.warning("the editor gave no answer about %s (%s): denied", call.name, exc)
        always = "session" if choice == "allow_always" else None
        try:
            await self.harness.respond(self.id, call.id, choice in ALLOWING, always=always)
        except BastionError as exc:  # answered elsewhere meanwhile, or its run ended
            log.info("the answer about %s was not taken: %s", call.name, exc)

    # --- prompts ---------------------------------------------------------------------

    async def prompt(self, blocks: list[PromptBlock]) -> PromptResponse:
        """Submit the prompt, wait for its run, say why it stopped (a failed run: its
        error, as a JSON-RPC error)."""
        text, skipped = prompt_text(blocks, self.cwd)
        for note in skipped:
            error_line(note)
        command = acp_commands.parse(text)
        if command is not None:  # /supersede, /urgent, /reset (tui.acp_commands)
            text = command.arg
        expansion = await expand_prompt(text, self.cwd, self.harness) if text else None
        self._cancelled = False
        try:
            if command is not None:
                command = replace(command, arg=expansion.text if expansion else "")
                # (a reset's note takes a while: the editor's updates are not held for it)
                async with contextlib.nullcontext() if command.name == "reset" else self._quiet:
                    found, line = await acp_commands.apply(self.harness, self.id, command)
                    if found is not None:
                        self.mirror.typed.add(found.id)  # the editor shows what was typed
                await self._send([line])
                if found is None:
                    return PromptResponse(stop_reason="end_turn")
                item = found
            else:
                async with self._quiet:
                    item = await self.harness.submit(self.id, expansion.text if expansion else "")
                    self.mirror.typed.add(item.id)
        except EmptyInput as exc:
            raise RequestError(INVALID_PARAMS, str(exc), {"code": exc.code}) from None
        except BastionError as exc:
            raise rpc_error(exc) from None
        try:
            run = await self.harness.wait(item.id, item.conversation_id)
        except UnknownRun:  # withdrawn (from another terminal) before it ran
            return PromptResponse(stop_reason="cancelled")
        except BastionError as exc:  # (a storage error that ended the session, too)
            raise rpc_error(exc, self.id) from None
        await self._caught_up(run.id)
        return self._stopped(run)

    async def cancel(self) -> None:
        """`session/cancel`: interrupt the run (the prompt then stops `cancelled`)."""
        self._cancelled = True
        try:
            await self.harness.interrupt(self.id)
        except BastionError as exc:
            log.info("cancel: %s", exc)

    async def _caught_up(self, run_id: str) -> None:
        """Wait until the view (and so the editor) has seen run `run_id` end."""

        def seen() -> bool:
            run = self.view.run(run_id) if self.view is not None else None
            return self._ended or (run is not None and run.terminal)

        try:
            async with asyncio.timeout(CATCH_UP), self._changed:
                await self._changed.wait_for(seen)
        except TimeoutError:
            log.warning("run %s ended but its last events did not arrive in time", run_id)

    def _stopped(self, run: Run) -> PromptResponse:
        state, error = RunState(run.state), run.error or {}
        meta = {"bastion": {"runId": run.id, "state": run.state}}
        reason: StopReason
        if state == RunState.COMPLETED:
            reason = "end_turn"
        elif state in (RunState.INTERRUPTED, RunState.CANCELLED):
            # a budget (max_turns, max_cost, time_limit) ended it, else a cancel
            reason = "max_turn_requests" if error.get("code") in BUDGET_CODES else "cancelled"
        elif self._cancelled:
            reason = "cancelled"  # (failing as it was interrupted)
        elif str(error.get("reason")) in STOP_REASONS:
            reason = STOP_REASONS[str(error.get("reason"))]
        else:
            message = str(error.get("message") or run.reason or f"the run {run.state}")
            raise RequestError(FAILED, message, {"code": error.get("code"), "runId": run.id})
        return PromptResponse(stop_reason=reason, field_meta=meta)
