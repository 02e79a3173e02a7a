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
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import Input, Static

from runtime.errors import BastionError, EmptyInput
from runtime.firstrun import NoModelConfigured
from runtime.mentions import expand_mentions, split_attachments
from runtime.records import EntryKind, InboxMode
from runtime.threaded import ThreadedHarness, channel_for
from runtime.views import ConversationView, reduce
from themes import DEFAULT_THEME, THEMES
from themes import register as register_themes
from tui.widgets import ApprovalPrompt, InboxStrip, PromptInput, StatusBar, Transcript
from tui.widgets.completion import FileCompletion

if TYPE_CHECKING:  # the harness's modules load after the first frame (see tui.launch)
    from runtime.harness import Harness

__all__ = ["BastionApp", "Opener", "run"]

Opener = Callable[[], Awaitable[tuple["Harness | ThreadedHarness", str]]]

QUIT_WINDOW = 2.0  # seconds in which a second Ctrl+C quits
FRAME = 1 / 30  # the view is shown at most this often; events in between are folded together
REST = 2.0  # after a frame that took t seconds, wait at least REST * t before the next
WELCOME = "[b $primary]bastion[/]  [$foreground-muted]type a request and press Enter[/]"
PLACEHOLDER_IDLE = "Ask Bastion to do something…"
PLACEHOLDER_BUSY = "Steer the run: Enter queues a message for after this step…"
NEW_OUTPUT = "[$accent]↓ new output below[/]  [$foreground-muted]PageDown or End to follow[/]"


class BastionApp(App[int]):
    """A transcript, a prompt, an approval line and a status bar over one conversation."""

    CSS_PATH = "app.tcss"
    TITLE = "bastion"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "interrupt", "Interrupt", show=False, priority=True),
        Binding("ctrl+c", "quit_twice", "Quit", show=False, priority=True),
        Binding("pageup", "page(-1)", "Page up", show=False, priority=True),
        Binding("pagedown", "page(1)", "Page down", show=False, priority=True),
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
    ) -> None:
        super().__init__()
        if (harness is None or conversation_id is None) and opener is None:
            raise ValueError("BastionApp needs a harness and conversation id, or an opener")
        self.harness = harness
        self.conversation_id = conversation_id or ""
        self.view: ConversationView | None = None
        self._first_prompt = first_prompt
        self._opener = opener
        self._model = model  # shown until the first view says which model the session uses
        self.open_error: BastionError | None = None  # why the opener failed, if it did
        self._theme_name = theme if theme in THEMES else DEFAULT_THEME
        self._quit_armed = False
        self._welcome_gone = False
        self.ready = asyncio.Event()  # set once the first view is on screen
        register_themes(self)
        self.theme = self._theme_name

    # --- layout -----------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Transcript(id="transcript"):
            yield Static(WELCOME, id="welcome")
        yield Static(NEW_OUTPUT, id="new-output")
        yield InboxStrip(id="inbox")
        yield ApprovalPrompt()
        yield FileCompletion(id="file-completion")
        yield PromptInput(self._sent, placeholder=PLACEHOLDER_IDLE, id="prompt")
        yield StatusBar()

    def on_mount(self) -> None:
        self.query_one("#prompt", Input).focus()
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
        loop = asyncio.get_running_loop()
        channel = channel_for(harness, conv_id)
        try:
            await self.show(await harness.snapshot(conv_id))
            assert self.view is not None
            completion = self.query_one(FileCompletion)
            completion.attach(self.query_one("#prompt"), self.view.conversation.cwd)
            self.ready.set()
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

    async def show(self, view: ConversationView) -> None:
        """Render `view`: each widget updates only what changed since the last one.

        `self.view` becomes `view` once everything shows it.
        """
        if view.settled and not self._welcome_gone:
            self._welcome_gone = True
            await self.query("#welcome").remove()
        await self.query_one(Transcript).show(view)
        self.view = view
        self.query_one(StatusBar).show(view)
        self.query_one(InboxStrip).show(view)
        prompt = self.query_one("#prompt", Input)
        prompt.placeholder = PLACEHOLDER_BUSY if view.active_run else PLACEHOLDER_IDLE
        if self.query_one(ApprovalPrompt).show(view):
            self.call_after_refresh(self._focus_approval)

    def on_transcript_new_output(self, event: Transcript.NewOutput) -> None:
        self.query_one("#new-output").set_class(event.below, "-shown")

    def action_page(self, direction: int) -> None:
        transcript = self.query_one(Transcript)
        if direction < 0:
            transcript.scroll_page_up(animate=False)
        else:
            transcript.scroll_page_down(animate=False)

    def _focus_approval(self) -> None:
        """Focus the approval line while it asks (so y/n reach it), else the prompt."""
        approval = self.query_one(ApprovalPrompt)
        (approval if approval.call is not None else self.query_one("#prompt", Input)).focus()

    # --- input --------------------------------------------------------------

    async def send(self, text: str) -> None:
        """Submit `text`: a new run when idle, a steer while a run is going."""
        await self.ready.wait()  # sent before the session opened: it goes once it has
        assert self.harness is not None
        busy = self.view is not None and self.view.active_run is not None
        mode = InboxMode.STEER if busy else InboxMode.PROMPT
        if self.view is not None and text.strip():  # @path mentions become attachments
            expansion = await asyncio.to_thread(expand_mentions, text, self.view.conversation.cwd)
            text = expansion.text
        try:
            await self.harness.submit(self.conversation_id, text, mode=mode)
        except EmptyInput:
            pass
        except BastionError as exc:
            self.notify(str(exc), title="not sent", severity="error")

    def _sent(self) -> list[str]:
        """What the user sent in this conversation, oldest first (the prompt's history)."""
        if self.view is None:
            return []
        return [split_attachments(e.text)[0] for e in self.view.settled if e.kind == EntryKind.USER]

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        if not text.strip():
            return
        event.input.clear()
        self.query_one(PromptInput).forget_position()
        self.run_worker(self.send(text), group="input")

    def on_approval_prompt_answered(self, event: ApprovalPrompt.Answered) -> None:
        self.query_one("#prompt", Input).focus()
        self.run_worker(self._respond(event.tool_call_id, event.approve), group="input")

    async def _respond(self, tool_call_id: str, approve: bool) -> None:
        assert self.harness is not None
        try:
            await self.harness.respond(self.conversation_id, tool_call_id, approve)
        except BastionError as exc:
            self.notify(str(exc), title="approval", severity="error")

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

    async def _interrupt(self) -> None:
        """Interrupt the run; queued steers and follow-ups come back to the prompt."""
        assert self.harness is not None
        done = await self.harness.interrupt(self.conversation_id)
        if done.withdrawn:
            prompt = self.query_one("#prompt", Input)
            texts = [split_attachments(item.text)[0] for item in done.withdrawn]
            if prompt.value.strip():
                texts.append(prompt.value)
            prompt.value = "\n".join(texts)
            prompt.cursor_position = len(prompt.value)

    async def action_quit_twice(self) -> None:
        """First press warns; a second within QUIT_WINDOW interrupts any run and quits.

        Quitting on purpose ends the run as interrupted (committed), so the next
        `bastion -c` does not pick it up again; a crash, by contrast, leaves it to resume.
        """
        if self._quit_armed:
            if self.harness is not None and self.view is not None and self.view.active_run:
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
