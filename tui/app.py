"""`bastion [PROMPT]`: the Textual app.

The app keeps one thing: the current `ConversationView`. A worker takes the
harness's events from a coalescing `EventChannel` (runtime.threaded) once per
frame, folds them through the runtime's one reducer (`runtime.reduce`),
reloads a snapshot when the view says `resync_required` (or the channel
overflowed), and hands the view to the widgets, which update only what
changed. Keys turn into harness calls (submit, interrupt, respond); nothing is
shown that the store does not say.

`bastion` runs the harness on a thread of its own (`ThreadedHarness`), so a slow
frame never delays the model loop, its checkpoints or its tools:

    app = BastionApp(threaded_harness, conversation_id, first_prompt="hi")  # already driven
    app.run()

or, when the harness must be opened on the app's own event loop (snapshot
tests), `BastionApp(opener=open_fn)` where `open_fn()` returns `(harness,
conversation_id)`; the app then closes that harness when it exits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult, CSSPathType
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import Static

from runtime.errors import BastionError, EmptyInput
from runtime.firstrun import NoModelConfigured
from runtime.mentions import expand_mentions, split_attachments
from runtime.records import EntryKind, InboxMode
from runtime.threaded import ThreadedHarness, channel_for
from runtime.views import ConversationView, reduce
from themes import CSS_PATH as THEME_CSS
from themes import DEFAULT_THEME, check_theme_name
from themes.user import ThemeFolder
from tui import slash, theming
from tui.live_config import LiveConfig
from tui.markup import escape
from tui.widgets import (
    ApprovalPrompt,
    CommandHints,
    CommandOutput,
    InboxStrip,
    PromptInput,
    StatusBar,
    ToolCallLine,
    Transcript,
)
from tui.widgets.completion import FileCompletion

if TYPE_CHECKING:  # the harness's modules load after the first frame (see tui.launch)
    from runtime import ConfigWatcher
    from runtime.harness import Harness, SessionSettings
    from tui.attach_app import AttachedHarness

__all__ = ["BastionApp", "Opener", "run"]

Opener = Callable[[], Awaitable[tuple["Harness | ThreadedHarness", str]]]

QUIT_WINDOW = 2.0  # seconds in which a second Ctrl+C quits
FRAME = 1 / 30  # the view is shown at most this often; events in between are folded together
REST = 2.0  # after a frame that took t seconds, wait at least REST * t before the next
WELCOME = "[b $primary]bastion[/]  [$foreground-muted]type a request and press Enter[/]"
PLACEHOLDER_IDLE = "Ask Bastion to do something…"
PLACEHOLDER_BUSY = "Enter steers the run after this step · Tab queues a follow-up…"
NEW_OUTPUT = "[$accent]↓ new output below[/]  [$foreground-muted]PageDown or End to follow[/]"


class BastionApp(App[int]):
    """A transcript, a prompt, an approval line and a status bar over one conversation."""

    CSS_PATH: ClassVar[CSSPathType] = ["app.tcss", THEME_CSS]
    TITLE = "bastion"
    COMMANDS: ClassVar[set[Any]] = {slash.SlashProvider}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+tab", "cycle_mode", "Approval mode", show=False, priority=True),
        Binding("escape", "interrupt", "Interrupt", show=False, priority=True),
        Binding("ctrl+c", "quit_twice", "Quit", show=False, priority=True),
        Binding("pageup", "page(-1)", "Page up", show=False, priority=True),
        Binding("pagedown", "page(1)", "Page down", show=False, priority=True),
        Binding("ctrl+o", "toggle_output", "Command output", show=False),
        # While the @file list is open these move in it and choose; else they go on.
        *(
            Binding(key, f"completion('{key}')", show=False, priority=True)
            for key in ("up", "down", "tab", "enter")
        ),
    ]

    def __init__(
        self,
        harness: Harness | ThreadedHarness | None = None,
        conversation_id: str | None = None,
        *,
        first_prompt: str | None = None,
        opener: Opener | None = None,
        theme: str = DEFAULT_THEME,
        model: str | None = None,
        theme_folder: ThemeFolder | None = None,
        watch_config: Callable[[], ConfigWatcher] | None = None,
        pinned: Collection[str] = (),
    ) -> None:
        super().__init__()
        if (harness is None or conversation_id is None) and opener is None:
            raise ValueError("BastionApp needs a harness and conversation id, or an opener")
        self.harness = harness
        self.conversation_id = conversation_id or ""
        self.view: ConversationView | None = None
        self.settings: SessionSettings | None = None  # this process's model and mode
        self._mode_lock = asyncio.Lock()
        self._first_prompt = first_prompt
        self._opener = opener
        self._model = model  # shown until the first view says which model the session uses
        self.pending_restore: Any = None  # the last /rewind's restore plan, for /restore
        self.open_error: BastionError | None = None  # why the opener failed, if it did
        # The user's theme files (read now unless given); an unknown name is a ConfigError.
        self.theme_folder = theme_folder or theming.user_folder()
        check_theme_name(theme, "", self.theme_folder.themes, self.theme_folder.problems)
        self._quit_armed = False
        self._welcome_gone = False
        self.ready = asyncio.Event()  # set once the first view is on screen
        theming.install(self, theme, self.theme_folder)
        # Follows config.toml edits once the session is open; `pinned`: settings set by flags.
        self.live_config = LiveConfig(self, watch_config, pinned) if watch_config else None

    # --- layout -----------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Transcript(id="transcript"):
            yield Static(WELCOME, id="welcome")
        yield Static(NEW_OUTPUT, id="new-output")
        yield InboxStrip(id="inbox")
        yield ApprovalPrompt()
        yield CommandOutput()
        yield CommandHints()
        yield FileCompletion(id="file-completion")
        yield PromptInput(
            self._sent,
            has_queued=lambda: bool(self.view and self.view.queued_inbox),
            completing=lambda: self.query_one(CommandHints).shown,
            placeholder=PLACEHOLDER_IDLE,
            id="prompt",
        )
        yield StatusBar()

    def on_mount(self) -> None:
        self.query_one(PromptInput).focus()
        if self._model:
            self.query_one(StatusBar).show_model(self._model)
        # The session opens once the first frame is drawn: the prompt takes keys at once.
        self.call_after_refresh(self.follow)

    async def on_unmount(self) -> None:
        if self._opener is not None and self.harness is not None:
            await self.harness.close()

    # --- events → view → widgets -----------------------------------------

    @work(exclusive=True, group="events")
    async def follow(self) -> None:
        """Fold the harness's events into the view and show it; runs for the app's life."""
        if self.harness is None and self._opener is not None:
            try:
                self.harness, self.conversation_id = await self._opener()
            except NoModelConfigured as exc:  # first run: say how to choose a model
                from tui.widgets.firstrun import FirstRunScreen

                self.open_error = exc
                await self.push_screen(FirstRunScreen())
                return
            except BastionError as exc:  # the caller prints it once the terminal is back
                self.open_error = exc
                self.exit(2, return_code=2)
                return
        harness, conv_id = self.harness, self.conversation_id
        assert harness is not None
        if getattr(harness, "attached", False):
            await self._follow_attached(harness)
            return
        if self.live_config is not None:
            self.run_worker(self.live_config.run(), group="config-watch")
        loop = asyncio.get_running_loop()
        channel = channel_for(harness, conv_id)
        try:
            self.settings = await harness.session_settings(conv_id)
            await self.show(await harness.snapshot(conv_id))
            assert self.view is not None
            completion = self.query_one(FileCompletion)
            completion.attach(self.query_one("#prompt"), self.view.conversation.cwd)
            self.ready.set()
            self._watch_themes()
            if self._first_prompt:
                prompt, self._first_prompt = self._first_prompt, None
                await self.send(prompt)
            while (batch := await channel.get()) is not None:
                started = loop.time()
                view = self.view
                assert view is not None
                if isinstance(batch, list):
                    for event in batch:
                        view = reduce(view, event)
                else:  # RESYNC: the channel overflowed and dropped what it held
                    view = replace(view, resync_required=True)
                if view.resync_required:
                    view = await harness.snapshot(conv_id)
                await self.show(view)
                # Let events gather (the channel joins them) rather than draw each one, and
                # when drawing is slow rest as long as it took: the harness thread shares the
                # interpreter with this one and must keep most of it while it streams.
                spent = loop.time() - started
                await asyncio.sleep(max(FRAME - spent, REST * spent))
        except NoMatches:
            pass  # the screen is being torn down: the app is closing
        finally:
            channel.close()

    async def _follow_attached(self, harness: AttachedHarness) -> None:
        """`bastion attach`: show each view the follower folds, at most once a frame."""
        loop = asyncio.get_running_loop()
        try:
            async for view in harness.views():
                started = loop.time()
                await self.show(view)
                if not self._quit_armed:
                    self.query_one(StatusBar).notice(harness.source())
                self.ready.set()
                spent = loop.time() - started
                await asyncio.sleep(max(FRAME - spent, REST * spent))
        except NoMatches:
            pass  # the screen is being torn down: the app is closing

    async def show(self, view: ConversationView) -> None:
        """Render `view`: each widget updates only what changed since the last one.

        `self.view` becomes `view` once everything shows it.
        """
        if view.settled and not self._welcome_gone:
            self._welcome_gone = True
            await self.query("#welcome").remove()
        await self.query_one(Transcript).show(view)
        self.view = view
        self.query_one(StatusBar).show(view, self.settings)
        self.query_one(InboxStrip).show(view)
        prompt = self.query_one(PromptInput)
        prompt.placeholder = PLACEHOLDER_BUSY if view.active_run else PLACEHOLDER_IDLE
        if self.query_one(ApprovalPrompt).show(view):
            self.call_after_refresh(self._focus_approval)

    def _watch_themes(self) -> None:
        """Report user theme files that did not load, and reload them when they change."""
        theming.startup_problems(self, self.theme_folder)
        self.run_worker(theming.watch(self, self.theme_folder), group="themes", exclusive=True)

    def on_transcript_new_output(self, event: Transcript.NewOutput) -> None:
        self.query_one("#new-output").set_class(event.below, "-shown")

    def action_page(self, direction: int) -> None:
        transcript = self.query_one(Transcript)
        if direction < 0:
            transcript.scroll_page_up(animate=False)
        else:
            transcript.scroll_page_down(animate=False)

    def action_toggle_output(self) -> None:
        """All of the newest command's output, or its tail again (a click does it for any)."""
        rows = [row for row in self.query(ToolCallLine) if row.expandable]
        if rows:
            rows[-1].expanded = not rows[-1].expanded

    def _focus_approval(self) -> None:
        """Focus the approval line while it asks (so y/n reach it), else the prompt."""
        approval = self.query_one(ApprovalPrompt)
        (approval if approval.call is not None else self.query_one(PromptInput)).focus()

    # --- input --------------------------------------------------------------

    async def send(self, text: str, *, follow_up: bool = False) -> None:
        """Submit `text`: a new run when idle, a steer while a run is going; a follow-up
        (the next run once this one answers) when asked for."""
        await self.ready.wait()  # sent before the session opened: it goes once it has
        assert self.harness is not None
        busy = self.view is not None and self.view.active_run is not None
        mode = InboxMode.STEER if busy else InboxMode.PROMPT
        if self.view is not None and text.strip():  # @path mentions become attachments
            expansion = await asyncio.to_thread(expand_mentions, text, self.view.conversation.cwd)
            text = expansion.text
        try:
            await self.harness.submit(
                self.conversation_id, text, mode=InboxMode.FOLLOW_UP if follow_up else mode
            )
        except EmptyInput:
            pass
        except BastionError as exc:
            self.notify(str(exc), title="not sent", severity="error")

    def _sent(self) -> list[str]:
        """What the user sent in this conversation, oldest first (the prompt's history)."""
        if self.view is None:
            return []
        return [split_attachments(e.text)[0] for e in self.view.settled if e.kind == EntryKind.USER]

    async def on_prompt_input_sent(self, event: PromptInput.Sent) -> None:
        text = event.text
        try:
            command = slash.parse(text)
        except slash.UnknownCommand as exc:
            self.say(f"{escape(str(exc))}  [$foreground-muted]{exc.hint}[/]", error=True)
            return  # the draft stays, to fix
        event.prompt.clear()
        event.prompt.forget_position()
        self.query_one(CommandOutput).close()
        if command is not None:
            self.run_slash(*command)
            return
        if text.startswith("//"):
            text = text[1:]
        self.run_worker(self.send(text, follow_up=event.follow_up), group="input")

    def on_text_area_changed(self, event: PromptInput.Changed) -> None:
        if isinstance(event.text_area, PromptInput):
            self.query_one(CommandHints).offer(slash.completions(event.text_area.text))

    def on_prompt_input_completion_key(self, event: PromptInput.CompletionKey) -> None:
        hints = self.query_one(CommandHints)
        chosen = hints.chosen
        if event.key in ("up", "down"):
            hints.move(-1 if event.key == "up" else 1)
        elif chosen is not None:
            if event.key == "enter" and slash.find(event.prompt.text.strip()[1:]):
                hints.offer([])  # a whole command name: Enter runs it as typed
                event.prompt.post_message(PromptInput.Sent(event.prompt, event.prompt.text, False))
                return
            event.prompt.set_value(f"/{chosen.name}" + (" " if chosen.args else ""))
            if event.key == "enter" and not chosen.args:
                event.prompt.post_message(PromptInput.Sent(event.prompt, event.prompt.text, False))

    def on_prompt_input_pull_queued(self, event: PromptInput.PullQueued) -> None:
        self.run_worker(self._pull_queued(event.prompt), group="input")

    async def _pull_queued(self, prompt: PromptInput) -> None:
        """The newest queued item back into the prompt, withdrawn from the queue."""
        assert self.harness is not None
        queued = self.view.queued_inbox if self.view else ()
        if not queued:
            return
        item = queued[-1]
        if await self.harness.withdraw(self.conversation_id, item.id):
            if not prompt.text:
                prompt.set_value(item.text)
        else:
            self.notify("that message was already taken by the run", title="not withdrawn")

    # --- commands -----------------------------------------------------------

    @work(group="command")
    async def run_slash(self, command: slash.SlashCommand, arg: str) -> None:
        await command.run(self, arg)

    def say(self, markup: str, *, error: bool = False) -> None:
        """Show a command's output (markup) above the prompt."""
        self.query_one(CommandOutput).say(markup, error=error)

    def use_settings(self, settings: SessionSettings) -> None:
        self.settings = settings
        if self.view is not None:
            self.query_one(StatusBar).show(self.view, settings)

    async def new_session(self) -> None:
        """A new conversation in this directory, with this one's model and mode."""
        assert self.harness is not None
        fresh = await self.harness.new_session(self.conversation_id)
        await self._show_conversation(fresh.id)

    def set_draft(self, text: str) -> None:
        """Put `text` in the prompt to edit (what /rewind hands back)."""
        prompt = self.query_one(PromptInput)
        prompt.set_value(text)
        prompt.focus()

    async def pick_session(self) -> str | None:
        """The session picker (this directory's sessions first); the id chosen, or None."""
        from tui.widgets.picker import SessionPicker

        assert self.harness is not None and self.view is not None
        picker = await SessionPicker.load(self.harness, self.view.conversation.cwd)
        return await self.push_screen_wait(picker)

    async def resume_session(self, conversation_id: str) -> None:
        """Go on with stored conversation `conversation_id` here (this one is released)."""
        assert self.harness is not None
        await self.harness.switch_session(self.conversation_id, conversation_id)
        await self._show_conversation(conversation_id)

    async def _show_conversation(self, conversation_id: str) -> None:
        self.workers.cancel_group(self, "events")  # stop following the old conversation
        self.conversation_id = conversation_id
        self.view = None
        await self.query_one(Transcript).remove()
        transcript = Transcript(id="transcript")  # a fresh one: the transcript shows one view
        await self.mount(transcript, before=0)
        await transcript.mount(Static(WELCOME, id="welcome"))
        self._welcome_gone = False
        self.query_one(CommandOutput).close()
        self.follow()

    @work(group="mode", exclusive=False)
    async def action_cycle_mode(self) -> None:
        """Shift+Tab: the next approval mode, shown on the status line; the prompt keeps
        its focus and its draft."""
        async with self._mode_lock:  # presses in quick succession step one mode each
            if self.harness is None or self.settings is None:
                return
            modes = slash.MODES
            current = self.settings.approval_mode
            at = modes.index(current) if current in modes else -1
            try:
                settings = await self.harness.set_approval_mode(
                    self.conversation_id, modes[(at + 1) % len(modes)]
                )
            except BastionError as exc:
                self.notify(str(exc), title="approval mode", severity="error")
                return
            self.use_settings(settings)

    def on_approval_prompt_answered(self, event: ApprovalPrompt.Answered) -> None:
        self.query_one(PromptInput).focus()
        self.run_worker(self._respond(event), group="input")

    async def _respond(self, answer: ApprovalPrompt.Answered) -> None:
        assert self.harness is not None
        try:
            saved = await self.harness.respond(
                self.conversation_id,
                answer.tool_call_id,
                answer.approve,
                always=answer.always,
                message=answer.message,
            )
        except BastionError as exc:
            self.notify(str(exc), title="approval", severity="error")
            return
        if saved:
            where = "this session" if answer.always == "session" else ".bastion/settings.toml"
            names = ", ".join(rule.describe() for rule in saved)
            self.notify(f"saved to {where}: {names}", title="always allowed")

    def on_approval_prompt_shown(self, event: ApprovalPrompt.Shown) -> None:
        self.run_worker(self._propose(event.tool_call_id), group="rules")

    async def _propose(self, tool_call_id: str) -> None:
        """Ask the runtime which rules `a` would save, and show them in the prompt."""
        assert self.harness is not None
        try:
            rules = await self.harness.proposed_rules(self.conversation_id, tool_call_id)
        except BastionError as exc:
            self.notify(str(exc), title="approval", severity="error")
            return
        self.query_one(ApprovalPrompt).set_rules(tool_call_id, rules)

    # --- actions ------------------------------------------------------------

    def action_completion(self, key: str) -> None:
        """Up/Down/Tab/Enter in the open @file list; otherwise they go on as usual."""
        if not self.query_one(FileCompletion).handle_key(key):
            raise SkipAction()

    def action_interrupt(self) -> None:
        if self.query_one(FileCompletion).handle_key("escape"):
            return  # Esc closes the @file list first
        if self.harness is not None and self.view is not None and self.view.active_run is not None:
            self.run_worker(self._interrupt(), group="input")
        else:
            self.query_one(CommandOutput).close()

    async def _interrupt(self) -> None:
        """Interrupt the run; queued steers and follow-ups come back to the prompt."""
        assert self.harness is not None
        done = await self.harness.interrupt(self.conversation_id)
        if done.withdrawn:
            prompt = self.query_one(PromptInput)
            texts = [split_attachments(item.text)[0] for item in done.withdrawn]
            if prompt.text.strip():
                texts.append(prompt.text)
            prompt.set_value("\n".join(texts))

    async def action_quit_twice(self) -> None:
        """First press warns; a second within QUIT_WINDOW interrupts any run and quits.

        Quitting on purpose ends the run as interrupted (committed), so the next
        `bastion -c` does not pick it up again; a crash, by contrast, leaves it to resume.
        """
        if self._quit_armed:
            attached = getattr(self.harness, "attached", False)  # leaving: the session goes on
            if (
                self.harness is not None
                and self.view is not None
                and self.view.active_run
                and not attached
            ):
                await self.harness.interrupt(self.conversation_id)
            self.exit(0)
            return
        self._quit_armed = True
        self.query_one(StatusBar).notice("[b $warning]press Ctrl+C again to quit[/]")
        self.set_timer(QUIT_WINDOW, self._disarm_quit)

    def _disarm_quit(self) -> None:
        self._quit_armed = False
        self.query_one(StatusBar).notice(None)


def run(opts: Any) -> int:
    """`bastion [PROMPT]`; see `tui.launch.run`, which the command line calls directly."""
    from tui.launch import run as launch

    return launch(opts)
