"""`bastion -p`: one answer, for scripts. Text, json or stream-json on stdout.

text: the final answer on stdout; progress and diagnostics on stderr only.
json: one result object. stream-json: one public event per line, then the result.
Text output shows every control character a model, command, hook or server put in
it (`runtime.visible`: `^[` for ESC); the JSON formats escape them (`\u001b`), so a
terminal showing either is never driven by them.
Print mode cannot ask for approval: what would ask is refused and the model is
told why. At the end, stderr names the refused calls and the flags that would
allow them, the json result lists them under `refused`, and a run that
completed with refusals exits EXIT_REFUSED (3): it could not do all it was asked.
Background jobs still running when the answer is done are ended (each with its
whole process tree): one line on stderr names them, and the json result lists them
under `jobs` (id, command, state, exit code, reason, last output).
A run its budget stopped (runtime.run.budget) ends interrupted: the json result's
`stop_reason` names the limit (`max_turns`, `max_cost`, `time_limit`,
`session_max_cost`; `user` for a signal) and `error` says it in words; it exits EXIT_BUDGET (4).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import shlex
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from runtime import (
    BUDGET_CODES,
    AgentRecord,
    BastionError,
    EmptyInput,
    EventChannel,
    Harness,
    HarnessClient,
    Interruption,
    JobRecord,
    NoModelConfigured,
    TodoItem,
    expand_prompt,
    first_run_report,
    local_client,
    visible,
    visible_json,
)
from runtime.model.errors import (
    RequestKeyReused,
    SessionFailedError,
    StoreError,
    UnknownConversation,
)
from runtime.model.events import (
    AttemptReset,
    CompactionProgress,
    EntryAdded,
    TodosUpdated,
    ToolCallUpdated,
    event_to_dict,
)
from runtime.model.records import (
    EntryKind,
    EntryStatus,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.model.views import ReasoningDeltas, TextDeltas, ViewEvent, call_summary
from tui.exits import (
    EXIT_BUDGET,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    UsageError,
    close_and_say,
    error_line,
)
from tui.plan_lines import plan_block
from tui.session import Session, drive_session, open_session

STATUS = {
    RunState.COMPLETED: "completed",
    RunState.FAILED: "failed",
    RunState.INTERRUPTED: "interrupted",
    RunState.CANCELLED: "interrupted",
}
EXIT = {"completed": EXIT_OK, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}


def read_prompt(opts: Any, stdin: TextIO) -> str | None:
    """The prompt from the argument, else stdin when it is not a terminal; None if neither."""
    if opts.prompt is not None:
        return str(opts.prompt)
    if stdin is not None and not stdin.isatty():
        return stdin.read()
    return None


def run(opts: Any) -> int:
    prompt = read_prompt(opts, sys.stdin)
    resuming = bool(opts.resume or opts.continue_ or opts.session_id)
    if opts.prompt is None and resuming and prompt is not None and not prompt.strip():
        prompt = None  # an empty stdin while resuming means "finish what is there"
    if prompt is not None and not prompt.strip():
        raise UsageError("the prompt is empty: pass it as an argument or on stdin")
    if prompt is None and not resuming:
        raise UsageError("-p needs a prompt (argument or stdin), or --resume ID to finish a run")
    if getattr(opts, "theme", None):  # (no screen to colour, but a wrong name is still wrong)
        _check_theme(opts.theme)
    return asyncio.run(_main(opts, prompt))


def _check_theme(name: str) -> None:
    """UsageError, as the app would say it, when there is no theme `name` (Textual's
    themes are loaded for this only: print mode never loads Textual otherwise)."""
    from runtime import ConfigError
    from themes import check_theme_name
    from tui.theming import user_folder

    folder = user_folder()
    try:
        check_theme_name(name, "--theme", folder.themes, folder.problems)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


async def _main(opts: Any, prompt: str | None) -> int:
    started = time.monotonic()
    out = Printer(opts.output_format, sys.stdout, sys.stderr)
    try:
        session = await open_session(opts)
        if prompt is None and not session.created:  # (said before its driver goes on)
            try:
                await _say_kept_partial(session.harness, session.conversation.id)
            except BaseException:
                await session.harness.close()
                raise
        session = await drive_session(session, interactive=False, on_refusal=out.refused)
    except NoModelConfigured:
        error_line(await first_run_report())
        return EXIT_USAGE
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    if not gc.isenabled():  # (tui.cli turned it off: start-up allocates much, frees little)
        gc.freeze()  # what start-up loaded stays out of the collector's passes
        gc.enable()
    for note in session.config.notes:  # project settings ignored (an untrusted folder)
        error_line(note)
    if notice := session.sandbox_notice():
        error_line(notice)
    conv = session.conversation
    # The harness in this process, reached through the one protocol all the same.
    harness = await local_client(session.harness, client="print")
    run: Run | None = None
    try:
        # stream-json prints every delta as it came; the other formats print no delta
        events = harness.subscribe(conv.id, join=opts.output_format != "stream-json")
        pump = asyncio.create_task(out.pump(events))
        interrupted = _install_interrupt(harness, conv.id)
        try:
            run = await _work(harness, session, prompt, opts)
        finally:
            await harness.unsubscribe(events)
            await pump
        if run is None:
            error_line(f"conversation {conv.id} has nothing to finish and no answer yet")
            return EXIT_USAGE
        # The run's own conversation: a request key admitted by another process (a
        # retried script racing itself) names that one, not the one this opened.
        result = await _result(
            harness, run.conversation_id, run, started, session_usage=opts.output_format != "text"
        )
        if interrupted.is_set() and result["status"] != "completed":
            result["status"] = "interrupted"
        refused = await _refused(harness, conv.id, run)
        result["refused"] = [_refusal(call) for call in refused]
        ended = await end_jobs(harness, run.conversation_id)
        result["jobs"] = [_job(job) for job in ended]
        stopped = await end_agents(harness, run.conversation_id)
        result["agents"] = [_agent(agent) for agent in stopped]
        out.result(result)
        if ended:
            error_line(jobs_summary(ended))
        if stopped:
            error_line(agents_summary(stopped))
        if refused:
            error_line(refusal_summary(refused, session.approval_mode))
        if refused and result["status"] == "completed":
            return EXIT_REFUSED
        if result.get("stop_reason") in BUDGET_CODES:
            return EXIT_BUDGET
        return EXIT[result["status"]]
    except (EmptyInput, RequestKeyReused, NotAdmitted) as exc:
        error_line(str(exc))  # nothing was admitted: bad input or an unusable store
        return EXIT_USAGE
    except SessionFailedError as exc:  # a storage error ended the harness (seed 004)
        saved = await asyncio.to_thread(saved_answer, session.harness.home, conv.id)
        result = _failure(conv.id, run, exc, started)
        result["error"]["reason"] = exc.reason  # (the code: session_failed)
        out.failed(result, exc.line(conv.id), saved)
        return EXIT_FAILED
    except BastionError as exc:
        # The run could not go on (its driver failed, the store gave out): the result
        # object still ends json output, saying so.
        out.result(_failure(conv.id, run, exc, started))
        return EXIT_FAILED
    finally:
        await close_and_say(harness)


async def _work(
    harness: HarnessClient, session: Session, prompt: str | None, opts: Any
) -> Run | None:
    conv_id = session.conversation.id
    if prompt is not None:
        expansion = await expand_prompt(prompt, session.conversation.cwd, harness)
        for attachment in expansion.attachments:
            if attachment.note:
                error_line(attachment.summary())
        prompt = expansion.text
        try:
            item = await harness.submit(conv_id, prompt, request_key=opts.request_key)
        except (StoreError, UnknownConversation) as exc:
            raise NotAdmitted(exc.message, hint=exc.hint) from exc
        return await harness.wait(item.id, item.conversation_id)
    if session.created:
        return None
    return await harness.wait_idle(conv_id)


async def _say_kept_partial(harness: Harness, conversation_id: str) -> None:
    """Finishing a run a crash cut off mid-answer: one line on stderr saying the text
    already shown was kept (marked interrupted) and the model goes on from it, so what
    follows on stdout is the rest of the answer, not all of it again (issue 25, item 5).
    Read before the session is driven (its driver may finish the run at once)."""
    view = await harness.snapshot(conversation_id)
    going = {run.id for run in view.runs if not run.terminal}
    answers = [e for e in view.entries if e.kind == EntryKind.ASSISTANT]
    last = answers[-1] if answers else None
    if last is None or last.run_id not in going or not last.text:
        return
    if last.status in (EntryStatus.STREAMING, EntryStatus.INTERRUPTED):
        error_line(
            f"resuming an answer cut off after {len(last.text)} characters: "
            "kept as interrupted; the rest follows"
        )


async def _refused(harness: HarnessClient, conversation_id: str, run: Run) -> list[ToolCallRecord]:
    """The calls of `run` that were refused without running (in order)."""
    calls = await harness.run_calls(run.conversation_id, run.id)
    return [c for c in calls if c.state == ToolCallState.DENIED]


WHY_ENDED = "the answer was done, and -p ends the jobs it leaves running"


async def end_jobs(harness: HarnessClient, conversation_id: str) -> list[JobRecord]:
    """The background jobs still running when the answer is done: stopped (each with
    its whole process tree, the model told in a note), as recorded once ended."""
    running = [job for job in await harness.jobs(conversation_id) if job.running]
    return [await harness.stop_job(conversation_id, job.id, why=WHY_ENDED) for job in running]


async def end_agents(harness: HarnessClient, conversation_id: str) -> list[AgentRecord]:
    """The background subagents still running when the answer is done: stopped (their
    runs interrupted, what they did kept; `bastion --resume` shows them), as recorded
    once stopped. -p ends with its answer: nothing is left running unseen."""
    running = [agent for agent in await harness.agents(conversation_id) if agent.running]
    return [await harness.stop_agent(conversation_id, agent.id) for agent in running]


def _agent(agent: AgentRecord) -> dict[str, Any]:
    return {
        "id": agent.id, "agent": agent.agent, "description": agent.description,
        "state": agent.state, "last_words": agent.last_words,
    }  # fmt: skip


def agents_summary(agents: list[AgentRecord]) -> str:
    """One line: the background subagents -p stopped because the answer was done."""
    named = "; ".join(f"{agent.id} {agent.description}" for agent in agents)
    few = "subagent" if len(agents) == 1 else "subagents"
    return f"stopped {len(agents)} background {few} still running when the answer was done: {named}"


def _job(job: JobRecord) -> dict[str, Any]:
    return {
        "id": job.id, "command": job.command, "state": job.state, "exit_code": job.exit_code,
        "reason": job.end_reason, "last_output": job.last_output,
    }  # fmt: skip


def jobs_summary(jobs: list[JobRecord]) -> str:
    """One line: the jobs -p ended because the answer was done."""
    named = "; ".join(f"{job.id} {job.command}" for job in jobs)
    few = "job" if len(jobs) == 1 else "jobs"
    return f"ended {len(jobs)} background {few} still running when the answer was done: {named}"


def _refusal(call: ToolCallRecord) -> dict[str, Any]:
    try:
        arguments: Any = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = call.arguments
    refusal = (call.result or {}).get("refusal") or {}
    reason = refusal.get("message", "") if isinstance(refusal, dict) else ""
    return {
        "tool": call.name,
        "arguments": arguments,
        "summary": call_summary(call.name, call.arguments),
        "reason": _first_line(str(reason)),
    }


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line.removeprefix("REFUSED FORBIDDEN: ")


def _can_be_a_rule(text: str) -> bool:
    from runtime import BadRule, command_rule

    try:
        command_rule(text)
    except BadRule:
        return False
    return True


def refusal_summary(refused: list[ToolCallRecord], approval_mode: str) -> str:
    """One line: which calls were refused, and the flags that would have let them run."""
    named = "; ".join(f"{c.name} {call_summary(c.name, c.arguments, limit=60)}" for c in refused)
    ways = []
    commands = [
        call_summary(c.name, c.arguments, limit=60) for c in refused if c.name == "run_command"
    ]
    tools = [c.name for c in refused if "__" in c.name]  # MCP tools (runtime.mcp): NAME__tool
    edits = [c for c in refused if c.name != "run_command" and "__" not in c.name]
    if edits and approval_mode in ("read-only", "ask"):
        ways.append("--approval-mode auto-edit (edits)")
    if tools:
        server = tools[0].split("__", 1)[0]
        ways.append(f"--allow {tools[0]} (that MCP tool; {server}__* for all of {server}'s)")
    allowable = [text for text in commands if _can_be_a_rule(text)]
    if allowable:  # (never a shell or interpreter: such a rule would allow everything)
        ways.append(f"--allow {shlex.quote(allowable[0])} (commands starting with it)")
    if commands:
        ways.append("--approval-mode full-auto (edits and commands)")
    count = f"{len(refused)} tool call{'s' if len(refused) != 1 else ''}"
    head = f"refused {count} (approval mode {approval_mode}; -p cannot ask): {named}"
    if approval_mode == "full-auto":  # no flag allows more: a rule or a path denied them
        return f"{head}; each reason is in the json result's refused list"
    return f"{head}; to allow, rerun with {' or '.join(ways) or '--approval-mode full-auto'}"


class NotAdmitted(BastionError):
    """The prompt could not be admitted (the store refused it): nothing was stored."""

    code = "not_admitted"


def _failure(
    conversation_id: str, run: Run | None, exc: BastionError, started: float
) -> dict[str, Any]:
    return {
        "type": "result",
        "session_id": conversation_id,
        "run_id": run.id if run is not None else None,
        "status": "failed",
        "result": "",
        "usage": {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                  "cost": None, "quality": "unavailable"},
        "error": {"code": exc.code, "message": str(exc)},
        "duration_ms": int((time.monotonic() - started) * 1000),
    }  # fmt: skip


def _install_interrupt(harness: HarnessClient, conversation_id: str) -> asyncio.Event:
    """First SIGINT/SIGTERM interrupts the run (committed as interrupted); a second exits."""
    flag = asyncio.Event()
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[Interruption]] = set()

    def on_signal() -> None:
        if flag.is_set():
            raise SystemExit(EXIT_INTERRUPTED)
        flag.set()
        print("bastion: interrupting (again to quit at once)", file=sys.stderr)
        task = loop.create_task(harness.interrupt(conversation_id))
        pending.add(task)
        task.add_done_callback(pending.discard)

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    return flag


async def _result(
    harness: HarnessClient,
    conversation_id: str,
    run: Run,
    started: float,
    *,
    session_usage: bool = True,
) -> dict[str, Any]:
    """The result object; `session_usage` (the whole session's usage, which reads the
    whole session) only when it is printed: text output shows the answer alone."""
    answer = await harness.answer(run.conversation_id, run.id)
    conv = await harness.get_conversation(conversation_id)
    status = STATUS.get(RunState(run.state), "failed")
    usage = run.usage or {}
    return {
        "type": "result",
        "session_id": conversation_id,
        "run_id": run.id,
        "status": status,
        "result": answer,
        "usage": {
            "input_tokens": int(usage.get("input_tokens", 0)),
            "output_tokens": int(usage.get("output_tokens", 0)),
            "cached_input_tokens": int(usage.get("cached_input_tokens", 0)),
            "reasoning_tokens": int(usage.get("reasoning_tokens", 0)),
            "cost": usage.get("cost"),
            "quality": usage.get("quality", "unavailable"),
        },
        "session_usage": (await harness.usage(conversation_id)).to_dict()
        if session_usage
        else None,
        "error": None
        if status == "completed"
        else (run.error or {"code": status, "message": run.reason or status}),
        "stop_reason": _stop_reason(status, run),
        "model": conv.agent.model,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }


def saved_answer(home: Path, conversation_id: str) -> str:
    """What was saved of the session's last answer, read afresh from the store in `home`
    after a storage error ended the harness ("" when it cannot be read: a damaged file)."""
    from runtime import ReadOnlyStore, committed_view

    try:
        with ReadOnlyStore.open(home) or contextlib.nullcontext() as found:
            if found is None:
                return ""
            view = found.read(lambda db: committed_view(db, conversation_id))
    except (BastionError, sqlite3.Error):
        return ""
    answers = [e for e in view.entries if e.kind == EntryKind.ASSISTANT]
    if not answers or answers[-1].run_id != (view.runs[-1].id if view.runs else None):
        return ""
    return str(view.text_of(answers[-1]))


def _stop_reason(status: str, run: Run) -> str | None:
    """Why an interrupted run stopped: the budget limit its error names, else the user."""
    if status != "interrupted":
        return None
    code = (run.error or {}).get("code")
    return str(code) if code in BUDGET_CODES else "user"


class Printer:
    """Writes print mode's output in one of the three formats."""

    def __init__(self, fmt: str, stdout: TextIO, stderr: TextIO) -> None:
        self.fmt = fmt
        self.stdout = stdout
        self.stderr = stderr
        self._started: set[str] = set()  # calls whose line was printed

    def note(self, text: str, *, lines: bool = False) -> None:
        """A line (`lines`: lines) on stderr, its control characters shown."""
        print(visible(text, lines=lines), file=self.stderr)

    def refused(self, tool: str, text: str) -> None:
        self.note(f"bastion: refused {tool}: {_first_line(text)}")

    async def pump(self, events: EventChannel) -> None:
        """Each event as it comes (a stream-json subscription drops none: it is unbounded)."""
        while (batch := await events.get()) is not None:
            if isinstance(batch, list):
                for event in batch:
                    self.event(event)

    def event(self, event: ViewEvent) -> None:
        if self.fmt == "stream-json":
            # (its subscription does not join deltas: every event is the harness's own)
            if not isinstance(event, TextDeltas | ReasoningDeltas):
                self.stdout.write(visible_json(event_to_dict(event)) + "\n")
            return
        if isinstance(event, ToolCallUpdated) and event.tool_call.state == "running":
            call = event.tool_call
            if call.id not in self._started:  # (a running call is updated again as it goes)
                self._started.add(call.id)
                self.note(f"· {call.name} {call_summary(call.name, call.arguments)}")
        elif isinstance(event, AttemptReset):
            self.note(f"bastion: retrying the model request ({event.reason})")
        elif isinstance(event, TodosUpdated) and event.todos:  # the model's plan, on change
            items = [TodoItem.from_dict(t) for t in event.todos]
            self.note(plan_block(items), lines=True)
        elif isinstance(event, CompactionProgress):
            self._compaction(event)
        elif isinstance(event, EntryAdded) and "hook" in event.entry.data:
            # a hook's block or failure (runtime.hooks): its note entry's one line
            self.note(f"bastion: {_first_line(event.entry.text)}")

    def _compaction(self, event: CompactionProgress) -> None:
        from tui.run_words import compaction_event_line

        line = compaction_event_line(event)
        if event.phase == "done":
            line = f"compacted {event.entries} entries: ~{event.freed} tokens freed"
        if line is not None:
            self.note(f"bastion: {line}")

    def failed(self, result: dict[str, Any], line: str, saved: str) -> None:
        """A storage error ended the session: in text, what was saved of the answer on
        stdout and one line on stderr saying so; in json, the result object."""
        if self.fmt != "text":
            result["result"] = saved
            self.stdout.write(visible_json(result) + "\n")
        elif saved:
            text = visible(saved)
            self.stdout.write(text if text.endswith("\n") else text + "\n")
            line += f" (the {len(saved):,} characters above were saved)"
        self.stdout.flush()
        error_line(line)

    def result(self, result: dict[str, Any]) -> None:
        if self.fmt == "text":
            # The answer, or as much of it as was given before the run stopped (a budget,
            # an interrupt, a failure): what streamed is kept, and said on stdout.
            text = visible(result["result"])
            if text:
                self.stdout.write(text if text.endswith("\n") else text + "\n")
            if result["status"] != "completed":
                error = result["error"] or {}
                line = f"run {result['status']}: {error.get('message', result['status'])}"
                if text:  # (read back from the store: it is what was kept)
                    line += (
                        f"; the {len(text):,} characters above were saved "
                        f"(`bastion -r {result['session_id']}` goes on from them)"
                    )
                error_line(line)
        else:
            self.stdout.write(visible_json(result) + "\n")
        self.stdout.flush()
