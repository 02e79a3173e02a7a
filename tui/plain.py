"""`bastion --plain`: line mode, for terminals and people who want scrollback, not a screen.

prompt_toolkit reads a line (with history); a `/command` runs from the registry the
app uses (`tui.slash`, through `tui.plain_commands`); the harness runs the rest; the answer is
drawn as it streams (rich Markdown, live while it grows, final when it ends);
tool calls are dim lines with the first line of their result; an approval is a
`[y/a/n/e]` question (after the diff of a write or edit). Ctrl+C interrupts a run, and at the prompt exits; Ctrl+\\ supersedes a run going (`/supersede`); Ctrl+D exits.

Like the app, it renders only from the view the runtime's reducer keeps; what
it already printed is remembered by entry id, not by copying the transcript.
Every text it prints that came from the model, a command, a hook or a server goes
through `shown` (or `Markdown` of `visible` text): its control characters are
shown (`runtime.visible`), never written to the terminal as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from msgspec.structs import replace
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from runtime import (
    RESYNC,
    Attachment,
    BastionError,
    ConversationView,
    EmptyInput,
    EventChannel,
    Harness,
    HarnessClient,
    NoModelConfigured,
    Rule,
    TodoItem,
    expand_prompt,
    first_run_report,
    local_client,
    reduce,
    split_attachments,
    visible,
)
from runtime.model.errors import SessionFailedError
from runtime.model.events import CompactionProgress
from runtime.model.records import (
    Entry,
    EntryKind,
    EntryStatus,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.model.views import background_note, call_summary, child_label
from tui.diffs import call_diff, diff_lines, rules_text
from tui.plan_lines import plan_header, plan_rows
from tui.run_words import budget_stop, compaction_event_line, summary_label
from tui.usage import count
from tui.widgets.approval import pending_approval

__all__ = ["LineMode", "run"]

Ask = Callable[[str], Awaitable[str]]
PROMPT = "› "
_DIFF_STYLES = {
    "file": "bold",
    "hunk": "cyan",
    "add": "green",
    "remove": "red",
    "context": "dim",
    "note": "dim italic",
}


def shown(text: str, style: str = "", *, lines: bool = True) -> Text:
    """`text` as Rich prints it plainly (never as markup), its control characters shown."""
    return Text(visible(text, lines=lines), style=style)


COMMAND_TAIL = 10  # lines of a command's output the line mode shows (the model has it all)


def result_lines(tool: str, text: str) -> list[str]:
    """A tool result as the line mode shows it: a command's `$ command`, its exit code
    and duration, and the last COMMAND_TAIL lines of its output (with how many were
    left out); any other tool's first line, and how many more it has."""
    lines = text.splitlines()
    if not lines:
        return []
    if tool == "run_command":
        head, output = lines[:2], lines[2:]
        if len(output) > COMMAND_TAIL:
            skipped = len(output) - COMMAND_TAIL
            output = [f"… {skipped} earlier line{'s' if skipped != 1 else ''}"]
            output += lines[-COMMAND_TAIL:]
        return [line if len(line) <= 200 else line[:199] + "…" for line in head + output]
    first = _first_line(text)
    more = sum(1 for line in lines if line.strip()) - 1
    return [first + (f"  (+{more} line{'s' if more != 1 else ''})" if more > 0 else "")]


def _first_line(text: str, limit: int = 100) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class _Growing:
    """The answer streaming in, rendered as Markdown only when Live refreshes."""

    def __init__(self) -> None:
        self.text = ""

    def __rich__(self) -> Markdown:
        return Markdown(visible(self.text))


class LineMode:
    """Reads prompts, submits them, prints what the view says happened."""

    def __init__(
        self,
        harness: HarnessClient,
        conversation_id: str,
        console: Console,
        read_line: Ask,
        ask: Ask | None = None,
    ) -> None:
        self.harness = harness
        self.conversation_id = conversation_id
        self.console = console
        self.read_line = read_line
        self.ask = ask or read_line
        self.view: ConversationView | None = None
        self.left_stored: str | None = None  # the last stored conversation /new etc. left
        self._sub: EventChannel | None = None
        self._printed: set[str] = set()  # entry ids (and "call:result" keys) already printed
        self._last_call: str | None = None  # the call whose line was printed last
        self._plan_shown: tuple[TodoItem, ...] = ()  # the todo list as last printed
        self._typed: set[str] = set()  # inbox ids of prompts the user typed here
        self._live: Live | None = None
        self._live_entry: str | None = None
        self._growing = _Growing()
        self._asked: set[str] = set()
        self.draft: str | None = None  # text a command hands back for the next prompt
        self.kept_draft: str | None = None  # what the current prompt started with
        self.pending_restore: Any = None  # the last /rewind's plan, for /restore
        self.quit_code: int | None = None  # set by /quit

    # --- the loop -----------------------------------------------------------

    async def loop(self, first_prompt: str | None = None) -> int:
        """Prompt, run, repeat until Ctrl+D (or Ctrl+C at the prompt). Returns the exit code."""
        self._sub = self.harness.subscribe(self.conversation_id)
        try:
            self.view = await self.harness.snapshot(self.conversation_id)
            model = self.view.conversation.agent.model
            self.console.print(
                Text.assemble(
                    ("bastion", "bold"),
                    "  ",
                    (visible(model, lines=False), "cyan"),
                    ("  Ctrl+D exits, Ctrl+C interrupts", "dim"),
                )
            )
            self._render()
            if self._busy():
                await self.follow()
            text = first_prompt
            while self.quit_code is None:
                if text is None:
                    # the prompt starts with a draft a command handed back (`run`'s read_line)
                    self.kept_draft, self.draft = self.draft, None
                    try:
                        text = await self.read_line(PROMPT)
                    except (EOFError, KeyboardInterrupt):
                        return 0
                if text.strip():
                    try:
                        await self.handle(text, typed=text is not first_prompt)
                    except EOFError:
                        return 0
                text = None
            return self.quit_code
        except SessionFailedError as exc:  # a storage error ended the harness (seed 004)
            from tui.exits import EXIT_FAILED, error_line

            self._stop_live()
            error_line(exc.line(self.conversation_id))
            return EXIT_FAILED
        finally:
            self._stop_live()
            await self.harness.unsubscribe(self._sub)

    async def handle(self, text: str, *, typed: bool = True) -> None:
        """A `/command` runs (an unknown one is one line); anything else is sent."""
        from tui import slash
        from tui.plain_commands import PlainHost

        kept, self.kept_draft = self.kept_draft, None
        after = slash.after_draft(text, kept)  # a command typed after a handed-back draft
        try:
            parsed = slash.parse(after or text)
        except slash.UnknownCommand as exc:
            self.console.print(shown(str(exc), "red"), soft_wrap=True)
            return
        if parsed is None:
            await self.send(text[1:] if text.startswith("//") else text, typed=typed)
            return
        if after is not None and kept and not slash.is_command(kept):
            self.draft = kept  # the message stays for the next prompt
        command, arg = parsed
        settings = await self.harness.session_settings(self.conversation_id)
        try:
            await command.run_in(PlainHost(self, settings), arg)
        except SessionFailedError:
            raise  # (the session ends: `loop` says so)
        except BastionError as exc:
            self.console.print(shown(str(exc), "red"), soft_wrap=True)

    async def switch(self, conversation_id: str, *, replay: bool) -> None:
        """Go on with `conversation_id` (already driven here): its events from now on;
        with `replay`, its transcript printed first (a resumed one; a new or copied
        one's history is not printed again)."""
        assert self._sub is not None
        self._stop_live()
        await self.harness.unsubscribe(self._sub)
        if self.view is not None and self.view.version > 0:  # stored: it had a prompt
            self.left_stored = self.conversation_id  # named on leaving if the next is not
        self.conversation_id = conversation_id
        self._sub = self.harness.subscribe(conversation_id)
        self.view = await self.harness.snapshot(conversation_id)
        if replay:
            self._printed.clear()
            self._plan_shown = ()
        else:
            self._plan_shown = self.view.todos
            self._printed.update(e.id for e in self.view.entries)
            self._printed.update(c.id for c in self.view.tool_calls)
            self._printed.update(f"{c.id}:result" for c in self.view.tool_calls)
            self._printed.update(f"{r.id}:end" for r in self.view.runs)
        self._render()

    async def send(self, text: str, *, typed: bool = True) -> None:
        if not text.strip():
            return
        cwd = self.view.conversation.cwd if self.view is not None else "."
        expansion = await expand_prompt(text, cwd, self.harness)
        try:
            item = await self.harness.submit(self.conversation_id, expansion.text)
        except EmptyInput:
            return
        if typed:
            self._typed.add(item.id)
            self._print_attachments(expansion.attachments)
        await self.follow()

    def _print_attachments(self, attachments: Sequence[Attachment]) -> None:
        for attachment in attachments:
            style = "dim" if attachment.attached else "yellow"
            self.console.print(shown("  📎 " + attachment.summary(), style))

    def _busy(self) -> bool:
        view = self.view
        return view is not None and (view.active_run is not None or bool(view.queued_inbox))

    async def follow(self) -> None:
        """Print events until no run is going and nothing is queued; Ctrl+C interrupts."""
        assert self._sub is not None
        with self._interrupt_on_ctrl_c():
            await self._pull()
            while self._busy():
                call = pending_approval(self.view)  # type: ignore[arg-type]
                if call is not None and call.id not in self._asked:
                    await self._approve(call)
                    continue
                await self._pull(wait=True)

    async def _pull(self, *, wait: bool = False) -> None:
        """Fold whatever events are queued (waiting for one if `wait`) and print the view."""
        assert self._sub is not None and self.view is not None
        batch = self._sub.poll()
        if batch == [] and wait:
            batch = await self._sub.get()
        if batch is None:  # the harness closed (a storage error: it says which)
            if self.harness.failed is not None:
                raise self.harness.failed
            raise EOFError("the harness closed")
        view = self.view
        if batch is RESYNC:
            view = replace(view, resync_required=True)
        for event in batch if isinstance(batch, list) else ():
            view = reduce(view, event)
            if isinstance(event, CompactionProgress):
                self._compaction(event)
        if view.resync_required:
            view = await self.harness.snapshot(self.conversation_id)
        self.view = view
        self._render()

    @contextlib.contextmanager
    def _interrupt_on_ctrl_c(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[object]] = set()

        def interrupt() -> None:
            self._stop_live()
            view = self.view
            job: Awaitable[Any]
            compacting = (
                view.compacting.get(view.active_run.id) if view and view.active_run else None
            )
            if compacting is not None and not compacting.background:
                self.console.print("[yellow]cancelling the compaction…[/]")  # not the run
                job = self.harness.cancel_compaction(self.conversation_id)
            else:
                self.console.print("[yellow]interrupting…[/]")
                job = self.harness.interrupt(self.conversation_id)
            task = loop.create_task(job)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        def supersede() -> None:  # Ctrl+\: end the run, its answer out of the context
            self._stop_live()
            task = loop.create_task(self._supersede())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        installed = []
        for signum, handler in ((signal.SIGINT, interrupt), (signal.SIGQUIT, supersede)):
            try:
                loop.add_signal_handler(signum, handler)
                installed.append(signum)
            except (NotImplementedError, RuntimeError, ValueError, AttributeError):
                pass
        try:
            yield
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    async def _supersede(self) -> None:
        """Ctrl+\\ while a run goes (`/supersede` in the app): one line either way."""
        try:
            await self.harness.supersede(self.conversation_id)
        except BastionError as exc:
            self.console.print(shown(str(exc), "red"), soft_wrap=True)
            return
        self.console.print(
            "[yellow]superseded: the unfinished answer and its work are left out of the "
            "model's context (kept in the transcript)[/]"
        )

    async def _approve(self, call: ToolCallRecord) -> None:
        """y once, a always (the rule shown, then the scope asked), n deny, e deny with a
        message for the model. Anything else asks again; Ctrl+C or Ctrl+D interrupts."""
        self._asked.add(call.id)
        self._stop_live()
        self._print_diff(call)
        rules = await self.harness.proposed_rules(self.conversation_id, call.id)
        if rules:
            line = shown(f"  a = always allow {rules_text(rules)}", "dim")
            self.console.print(line, soft_wrap=True)
        keys = "[y/a/n/e" if rules else "[y/n/e"
        if call.name == "run_command":
            self.console.print(
                Text("  o = outside the sandbox once, w = with network once", style="dim")
            )
            keys += "/o/w"
        keys += "]"
        child = child_label(self.view, call) if self.view is not None else ""
        who = f"subagent {child} asks: " if child else ""
        what = call_summary(call.name, call.arguments)
        if note := background_note(call.name, call.arguments):
            what += f" {note}"
        question = f"{who}Allow {call.name} {what}? {keys} "
        question = visible(question)  # (prompt_toolkit shows C0 and C1, not bidi controls)
        try:
            while True:
                answer = (await self.ask(question)).strip().lower()
                options = await self._answer_options(
                    answer, bool(rules), call.name == "run_command"
                )
                if options is not None:
                    break
                self.console.print(Text(f"answer one of {keys}"))
        except (EOFError, KeyboardInterrupt):
            await self.harness.interrupt(self.conversation_id)
            return
        try:
            saved = await self.harness.respond(self.conversation_id, call.id, **options)
        except BastionError as exc:
            self.console.print(shown(str(exc), "red"))
            return
        if saved:
            where = (
                "this session" if options.get("always") == "session" else ".bastion/settings.toml"
            )
            line = shown(f"  saved to {where}: {rules_text(saved)}", "dim")
            self.console.print(line, soft_wrap=True)

    async def _answer_options(
        self, answer: str, can_save: bool, command: bool = False
    ) -> dict[str, Any] | None:
        if answer in ("y", "yes"):
            return {"approve": True}
        if command and answer in ("o", "w"):
            return {"approve": True, "sandbox": "outside" if answer == "o" else "network"}
        if answer in ("n", "no"):
            return {"approve": False}
        if answer == "a" and can_save:
            scope = ""
            while scope not in ("s", "p"):
                scope = (await self.ask("save for this [s]ession or the [p]roject? ")).strip()
            return {"approve": True, "always": "session" if scope == "s" else "project"}
        if answer == "e":
            message = (await self.ask("tell the model: ")).strip()
            return {"approve": False, "message": message or None}
        return None

    def _ran_unasked(self, call: ToolCallRecord) -> None:
        """A call that ran without asking here: the rules that allowed it, a write's diff."""
        if call.id in self._asked:
            return
        allowed = (call.review or {}).get("allowed_by") or ()
        if allowed:
            names = ", ".join(Rule.from_dict(r).describe() for r in allowed)
            self.console.print(shown(f"    allowed by {names}", "dim italic"), soft_wrap=True)
        if call.state == ToolCallState.DONE:
            self._print_diff(call, limit=20)

    def _print_diff(self, call: ToolCallRecord, limit: int = 60) -> None:
        diff, note = call_diff(call)
        for kind, line in diff_lines(diff, note, limit=limit):
            self.console.print(shown("  " + line, _DIFF_STYLES[kind]), soft_wrap=True)

    # --- printing -----------------------------------------------------------

    def _render(self) -> None:
        view = self.view
        assert view is not None
        entries = view.entries
        runs = {run.id: run for run in view.runs}
        for at, entry in enumerate(entries):
            if entry.id not in self._printed:
                self._entry(view, entry)
            if entry.kind == EntryKind.ASSISTANT and entry.status != EntryStatus.STREAMING:
                self._tool_calls(view, entry.id)  # an answer's calls right under it
            after = entries[at + 1] if at + 1 < len(entries) else None
            run = runs.get(entry.run_id or "")
            if after is not None and run is not None and after.run_id != run.id and run.terminal:
                self._run_end(view, run)  # (a replay reads as it happened)
        self._tool_calls(view)
        self._plan(view)
        if view.runs and view.active_run is None:
            self._run_end(view, view.runs[-1])
        self._held(view)

    def _entry(self, view: ConversationView, entry: Entry) -> None:
        match entry.kind:
            case EntryKind.USER:
                self._printed.add(entry.id)
                if entry.data.get("from_agent"):  # a background agent's answer, sent here
                    self.console.print(Text(visible(entry.text), style="italic"))
                elif entry.data.get("inbox_id") not in self._typed:
                    prompt, attachments = split_attachments(entry.text)
                    self.console.print(
                        Text.assemble((PROMPT, "bold blue"), (visible(prompt), "bold"))
                    )
                    self._print_attachments(attachments)
            case EntryKind.ASSISTANT:
                self._assistant(entry, view)
            case EntryKind.TOOL_RESULT:
                pass  # printed under its call
            case EntryKind.SUMMARY:
                self._printed.add(entry.id)
                self.console.print(shown(summary_label(entry), "dim italic"))
            case EntryKind.RESET if entry.data.get("handoff"):  # not the note: its size
                self._printed.add(entry.id)
                words = len(entry.text.split())
                line = f"— context reset: the model goes on from its handoff note ({words} words) —"
                self.console.print(shown(line, "dim italic"))
            case _:  # a note (a hook's block or failure, a denial): its line, whole
                self._printed.add(entry.id)
                line = _first_line(entry.text, 1000) or entry.kind
                self.console.print(shown(line, "dim italic"))

    def _held(self, view: ConversationView) -> None:
        """One line when input queued behind a failed run is held (issue 25, item 13)."""
        fresh = [item for item in view.held_inbox if f"{item.id}:held" not in self._printed]
        if fresh:
            self._printed.update(f"{item.id}:held" for item in fresh)
            count = len(view.held_inbox)
            self.console.print(
                f"[yellow]◼ {count} message{'s' if count != 1 else ''} held (the run before "
                "failed): /send sends it"
                "[/]"
            )

    def _assistant(self, entry: Entry, view: ConversationView) -> None:
        self._reasoning(entry, view)
        if entry.status == EntryStatus.STREAMING:
            if entry.text:
                if self._live is None or self._live_entry != entry.id:
                    self._stop_live()
                    self._growing = _Growing()
                    self._live = Live(
                        self._growing,
                        console=self.console,
                        refresh_per_second=10,
                        vertical_overflow="ellipsis",
                    )
                    self._live_entry = entry.id
                    self._live.start()
                self._growing.text = entry.text  # drawn at the next refresh, not per delta
            return
        self._printed.add(entry.id)
        if self._live is not None and self._live_entry == entry.id:
            self._growing.text = entry.text
            self._stop_live()
        elif entry.text:
            self.console.print(Markdown(visible(entry.text)))
        if entry.status == EntryStatus.INTERRUPTED:
            self.console.print("[yellow]◼ interrupted[/]")
        elif entry.status == EntryStatus.FAILED:
            run = view.run(entry.run_id) if entry.run_id else None
            message = (run.error or {}).get("message", "") if run else ""
            self.console.print(shown(f"✗ failed{': ' + message if message else ''}", "red"))

    def _reasoning(self, entry: Entry, view: ConversationView) -> None:
        """One dim line when an answer's reasoning starts (or, replayed, how much there
        was); the text itself is the app's, folded there."""
        key = f"{entry.id}:reasoning"
        if key in self._printed or self._live_entry == entry.id:
            return
        live = view.reasoning.get(entry.id)
        thought = str(live) if live is not None else str(entry.data.get("reasoning") or "")
        if not thought:
            return
        self._printed.add(key)
        streaming = entry.status == EntryStatus.STREAMING
        line = "▸ thinking…" if streaming else f"▸ thought · {count(len(thought))} chars"
        self.console.print(Text(line, style="dim italic"))

    def _tool_calls(self, view: ConversationView, entry_id: str | None = None) -> None:
        """The calls not printed yet (those of answer `entry_id` only, if given), each
        with its result once it has one."""
        for call in view.tool_calls:
            if entry_id is not None and call.entry_id != entry_id:
                continue
            if call.id not in self._printed:
                self._stop_live()
                self._printed.add(call.id)
                line = f"· {call.name} {call_summary(call.name, call.arguments)}"
                self.console.print(shown(line, "dim", lines=False))
                self._last_call = call.id
            done = f"{call.id}:result"
            if done not in self._printed and call.result_entry_id:
                result = view.entry(call.result_entry_id)
                if result is not None:
                    self._printed.add(done)
                    style = "dim" if result.data.get("ok", True) else "dim red"
                    # Not under its own line (more calls were listed, or reads finished
                    # out of order): the result names its call.
                    whose = (
                        ""
                        if self._last_call == call.id
                        else f"{call.name} " + (f"{call_summary(call.name, call.arguments, 60)}: ")
                    )
                    head, *rest = result_lines(call.name, result.text) or [""]
                    self.console.print(shown(f"  └ {whose}{head}", style, lines=False))
                    for more in rest:
                        self.console.print(shown(f"    {more}", style, lines=False))
                    self._last_call = None
                    self._ran_unasked(call)

    def _plan(self, view: ConversationView) -> None:
        """The todo list (runtime.plan), printed whole each time it changes."""
        if view.todos == self._plan_shown:
            return
        self._plan_shown = view.todos
        if not view.todos:
            return
        self._stop_live()
        styles = {"done": "dim strike", "in_progress": "bold cyan", "more": "dim"}
        self.console.print(shown(plan_header(view.todos), "blue"))
        for status, mark, content in plan_rows(view.todos):
            self.console.print(shown(f"  {mark} {content}", styles.get(status, "")))

    def _run_end(self, view: ConversationView, run: Run) -> None:
        key = f"{run.id}:end"
        if key in self._printed:
            return
        self._printed.add(key)
        self._stop_live()
        if run.state == RunState.FAILED and not any(
            e.run_id == run.id and e.status == EntryStatus.FAILED for e in view.entries
        ):
            message = (run.error or {}).get("message", "")
            self.console.print(shown(f"✗ run failed: {message}", "red"))
        elif run.state == RunState.INTERRUPTED and (stop := budget_stop(run)):
            self.console.print(Text(f"◼ stopped: {stop}", style="yellow"))
        self.console.print()

    def _compaction(self, event: CompactionProgress) -> None:
        line = compaction_event_line(event)
        if line is not None:
            self._stop_live()
            cancels = event.phase == "started" and not event.background
            hint = " (Ctrl+C cancels it, not the run)" if cancels else ""
            self.console.print(shown(line + hint, "dim italic"))

    def _stop_live(self) -> None:
        live, self._live, self._live_entry = self._live, None, None
        if live is not None:
            live.stop()


def prompt_session(history: Any = None, **io: Any) -> Any:
    """The line prompt: Enter sends; Ctrl+J or Alt+Enter break the line; a paste
    arrives whole. Bracketed pastes are inserted as they are; a terminal that pastes
    without brackets sends lines as Enter presses, so an Enter with more keys already
    waiting behind it breaks the line instead of sending (three pasted lines are one
    prompt, not three runs). `io` (input=, output=) is for tests."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.key_binding import KeyBindings

    keys = KeyBindings()

    @keys.add("enter")
    def _enter(event: Any) -> None:
        if event.app.key_processor.input_queue:
            event.current_buffer.newline(copy_margin=False)
        else:
            event.current_buffer.validate_and_handle()

    @keys.add("c-j")
    @keys.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.newline(copy_margin=False)

    return PromptSession(
        history=history,
        multiline=True,
        key_bindings=keys,
        prompt_continuation=lambda width, line, wrap: " " * (width - 2) + "· ",
        **io,
    )


def run(opts: Any) -> int:
    """`bastion --plain [PROMPT]`: the exit code."""
    return asyncio.run(_main(opts))


async def _main(opts: Any) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    from tui.exits import EXIT_OK, EXIT_USAGE, close_and_say, error_line
    from tui.launch import resume_hint
    from tui.session import start_session
    from tui.sessionlist import wants_picker

    try:
        if wants_picker(opts):  # `-r` without an id: a numbered list first
            chosen = await _choose(PromptSession())
            if chosen is None:
                return EXIT_OK
            opts.resume = chosen
        session = await start_session(opts, interactive=True)
    except NoModelConfigured:
        error_line(await first_run_report())
        return EXIT_USAGE
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    from tui.slash import install_files

    for note in (*session.config.notes, *install_files(session.config.commands)):
        error_line(note)
    if notice := session.sandbox_notice():
        error_line(notice)
    conv = session.conversation
    # The harness in this process, reached through the one protocol all the same.
    harness = await local_client(session.harness, client="plain")
    try:
        try:
            history: Any = FileHistory(str(session.harness.home / "plain-history"))
        except OSError:
            history = InMemoryHistory()
        prompts: PromptSession[str] = prompt_session(history)
        questions: PromptSession[str] = PromptSession()

        async def read_line(prompt: str) -> str:
            return await prompts.prompt_async(prompt, default=mode.kept_draft or "")

        mode = LineMode(
            harness,
            conv.id,
            line_console(),
            read_line=read_line,
            ask=questions.prompt_async,
        )
        code = await mode.loop(first_prompt=opts.prompt)
        if harness.failed is not None:  # (its line said how to resume)
            return code
        # The conversation left in: this one if stored, else the last stored one it
        # left (after /new with nothing sent), as the app does.
        if await harness.exists(mode.conversation_id):  # (/resume, /new: another one)
            print(resume_hint(mode.conversation_id))
        elif mode.left_stored is not None:
            print(resume_hint(mode.left_stored))
        return code or EXIT_OK
    finally:
        await close_and_say(harness)


def line_console(**options: Any) -> Console:
    """The line mode's console: no `:name:` emoji codes (a resource's `t:notes://…`
    or a model's `:smile:` is shown as written) and no highlighting guesses."""
    return Console(highlight=False, emoji=False, **options)


async def _choose(prompts: Any) -> str | None:
    """`--plain -r`: the numbered session list, read with `prompts` (a PromptSession)."""
    from tui.sessionlist import choose_numbered

    harness = await local_client(await Harness.open(), client="plain")
    try:
        console = line_console()
        return await choose_numbered(
            harness, prompts.prompt_async, lambda line: console.print(Text(line))
        )
    finally:
        await harness.close()
