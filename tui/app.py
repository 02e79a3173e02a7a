"""`bastion [PROMPT]`: the Textual app.

The app keeps one thing: the current `ConversationView`. A worker takes the
harness's events from a coalescing `EventChannel` (runtime.ipc.channel) once per
frame, folds them through the runtime's one reducer (`runtime.reduce`),
reloads a snapshot when the view says `resync_required` (or the channel
overflowed), and hands the view to the widgets, which update only what
changed. Keys turn into harness calls (submit, interrupt, respond); nothing is
shown that the store does not say.

`bastion` runs the harness in a process of its own (`tui.child`), so a slow frame
never delays the model loop, its checkpoints or its tools, and a flood of text never
delays a key's echo. The app holds a `HarnessClient` (runtime.ipc.client): every key
becomes one typed op of the one protocol, whoever serves it (its harness process,
or, for `bastion attach`, the process driving the session):

    app = BastionApp(client, conversation_id, first_prompt="hi")  # already driven
    app.run()

or `BastionApp(opener=open_fn)`, where `open_fn()` returns `(client,
conversation_id)` once the session is open; the app closes that client when it
exits (its owner's close closes the harness too).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar

from msgspec.structs import replace
from textual import events, work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.widgets import Static

from runtime.model.errors import BastionError
from themes import DEFAULT_THEME, check_theme_name
from tui import theming
from tui.app_keys import KeyActions
from tui.app_prompt import PromptActions
from tui.app_status import StatusParts
from tui.pacing import GAP, MAX_HOLD, due, hold, pause, urgent
from tui.textual_compat import begin_batch, end_batch
from tui.widgets.prompt import PromptInput
from tui.widgets.status import StatusBar
from tui.widgets.transcript import Transcript

if TYPE_CHECKING:  # loaded after the first frame (see tui.launch and `_mount_rest`)
    from textual.command import Provider
    from textual.driver import Driver
    from textual.notifications import SeverityLevel

    from runtime import ConfigWatcher, EventChannel, HarnessClient, UsageTotals
    from runtime.model.records import SessionSettings
    from runtime.model.views import ConversationView
    from themes.user import ThemeFolder
    from tui import slash
    from tui.live_config import LiveConfig
    from tui.parking import Parking
    from tui.widgets.approval import ApprovalPrompt
    from tui.widgets.command_panel import CommandHints, CommandOutput
    from tui.widgets.completion import FileCompletion
    from tui.widgets.inbox import InboxStrip

__all__ = ["BastionApp", "Opener", "preload"]


Opener = Callable[[], Awaitable[tuple["HarnessClient", str]]]

WELCOME = "[b $primary]bastion[/]  [$foreground-muted]type a request and press Enter[/]"
PLACEHOLDER_IDLE = "Ask Bastion to do something…"
PLACEHOLDER_BUSY = "Enter steers the run after this step · Tab queues a follow-up…"
NEW_OUTPUT = "[$accent]↓ new output below[/]  [$foreground-muted]Ctrl+End to follow[/]"


def _slash_provider() -> type[Provider]:
    from tui.palette import SlashProvider

    return SlashProvider


#: What a view with entries draws: loaded after a new session's first frame, and before
#: a stored one's (`preload`).
VIEW_MODULES = ("runtime.ipc.channel", "runtime.model.views", "tui.widgets.entries")
#: What the app loads after its first frame: the parts `_mount_rest` mounts, and what a
#: view with entries draws.
LATE_MODULES = (
    *VIEW_MODULES,
    "tui.slash",
    "tui.widgets.approval",
    "tui.widgets.command_panel",
    "tui.widgets.completion",
    "tui.widgets.inbox",
    "tui.widgets.status_fields",
    "tui.widgets.todo",
)
#: A stored session's first frame waits this long at most for its view (seconds).
FIRST_VIEW_WAIT = 0.5


def preload() -> None:
    """Import VIEW_MODULES and warm the Markdown renderer now. A resumed conversation
    shows its entries with the first frame, so the launcher calls this while the
    harness process finds it. (The parts `_mount_rest` mounts load after that frame.)"""
    for name in VIEW_MODULES:
        import_module(name)
    from tui.widgets.markdown import warm

    warm()


class BastionApp(PromptActions, KeyActions, StatusParts, App[int]):
    """A transcript, a prompt, an approval line and a status bar over one conversation."""

    CSS_PATH: ClassVar[str] = "app.tcss"
    TITLE = "bastion"
    COMMANDS: ClassVar[set[Any]] = {_slash_provider}  # loaded when the palette opens
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+tab", "cycle_mode", "Approval mode", show=False, priority=True),
        Binding("escape", "interrupt", "Interrupt", show=False, priority=True),
        Binding("ctrl+c", "quit_twice", "Quit", show=False, priority=True),
        Binding("pageup", "page(-1)", "Page up", show=False, priority=True),
        Binding("pagedown", "page(1)", "Page down", show=False, priority=True),
        Binding("ctrl+o", "toggle_output", "Command output", show=False),
        Binding("ctrl+r", "send_held", "Send held input", show=False, priority=True),
        # While the @file list is open these move in it and choose; else they go on.
        *(
            Binding(key, f"completion('{key}')", show=False, priority=True)
            for key in ("up", "down", "tab", "enter")
        ),
    ]

    def __init__(
        self,
        harness: HarnessClient | None = None,
        conversation_id: str | None = None,
        *,
        first_prompt: str | None = None,
        opener: Opener | None = None,
        theme: str = DEFAULT_THEME,
        model: str | None = None,
        theme_folder: ThemeFolder | None = None,
        watch_config: Callable[[], ConfigWatcher] | None = None,
        pinned: Collection[str] = (),
        stored: bool = False,
        notes: Collection[str] = (),
        sandbox_notice: Callable[[], str | None] | None = None,
        catalog: Callable[[str], Any] | None = None,
        notify: str = "auto",
        commands: Sequence[Any] = (),
        parking: Parking | None = None,
    ) -> None:
        super().__init__()
        self.parking = parking  # its harness process parked while idle (tui.parking)
        self._command_files = commands  # /name commands of the user's and a project's files
        from tui.notices import Notifier
        from tui.textual_compat import write_raw

        # a run's end and an approval, told when the terminal is behind other windows
        self.notifier = Notifier(notify, lambda text: write_raw(self, text), self.bell)
        self._notes = notes  # said once the session is on screen (ignored settings; attach)
        self._sandbox_notice = sandbox_notice  # asked once the first view is drawn
        if (harness is None or conversation_id is None) and opener is None:
            raise ValueError("BastionApp needs a harness and conversation id, or an opener")
        self.harness = harness
        self.conversation_id = conversation_id or ""
        self.view: ConversationView | None = None
        self.settings: SessionSettings | None = None  # this process's model and mode
        self.jobs: dict[tuple[str, str], bool] = {}  # (conversation, job) -> running
        self.below: tuple[str, int, UsageTotals | None] = ("", 0, None)  # (tui.app_status)
        self._mode_lock = asyncio.Lock()
        self._first_prompt = first_prompt
        self._opener = opener
        self._model = model  # shown until the first view says which model the session uses
        self.left_stored: str | None = None  # the last stored conversation left by /new etc.
        self.pending_restore: Any = None  # the last /rewind's restore plan, for /restore
        self.front_end = "app"  # for the slash commands (tui.slash)
        self.catalog = catalog  # the user's model catalog (Config.model_info): ctx windows
        # A draft a command left in the prompt (/rewind's message, an unknown command to
        # fix): a command typed after it runs, and is not glued onto it and sent.
        self.kept_draft: str | None = None
        self.open_error: BastionError | None = None  # why the opener failed, if it did
        self.close_line: str | None = None  # a session that did not settle as it closed
        # The user's theme files (read now unless given); an unknown name is a ConfigError.
        self.theme_folder = theme_folder or theming.user_folder()
        check_theme_name(theme, "", self.theme_folder.themes, self.theme_folder.problems)
        self._quit_armed = False
        self._welcome_gone = False
        self.ready = asyncio.Event()  # set once the first view is on screen
        self._early_keys: list[events.Key] | None = []  # until the prompt has the focus
        self.typed_at = -MAX_HOLD  # time.monotonic() of the last key or paste (see `hold`)
        self.echoed_at = -MAX_HOLD  # ...and of the frame after the app handled it
        self.parts_ready = asyncio.Event()  # set once `_mount_rest` has mounted the rest
        self._opening = False  # the screen waits for a stored session's first view
        theming.install(self, theme, self.theme_folder)
        # Follows config.toml edits once the session is open; `pinned`: settings set by flags.
        self._watch_config = watch_config
        self._pinned = pinned
        self.live_config: LiveConfig | None = None
        # A stored session (resumed): its entries are drawn with the first frame, not after.
        self._stored = stored

    # --- layout -----------------------------------------------------------

    def compose(self) -> ComposeResult:
        """What the first frame shows; `_mount_rest` adds the rest above the prompt."""
        with Transcript(id="transcript"):
            yield Static(WELCOME, id="welcome")
        yield Static(NEW_OUTPUT, id="new-output")
        yield PromptInput(
            self._sent,
            has_queued=lambda: bool(self.view and self.view.queued_inbox),
            completing=lambda: self.parts_ready.is_set() and self.hints.shown,
            placeholder=PLACEHOLDER_IDLE,
            id="prompt",
        )
        yield StatusBar(self.catalog)

    async def _refreshed(self) -> None:
        """Once the next frame is drawn."""
        drawn = asyncio.Event()
        self.call_after_refresh(drawn.set)
        await drawn.wait()

    def _echoed(self) -> None:
        """The frame after a key was handled is drawn (and with it, the key's echo)."""
        self.echoed_at = time.monotonic()

    def get_driver_class(self) -> type[Driver]:
        from tui import textual_compat

        textual_compat.install()  # Alt+Enter (ESC CR) read as alt+enter: a follow-up, not a steer
        return textual_compat.noting_keys(
            super().get_driver_class()
        )  # typing holds output from its read

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.Paste)):
            self.typed_at = time.monotonic()
            self.call_after_refresh(self._echoed)
        # Keys typed while the app starts, before the prompt has the focus, are kept for it.
        if (
            isinstance(event, events.Key)
            and not event.is_forwarded
            and self._early_keys is not None
        ):
            self._early_keys.append(event)
            return
        await super().on_event(event)

    def on_app_blur(self, event: events.AppBlur) -> None:
        self.notifier.focused = False  # (the terminal went behind another window)

    def on_app_focus(self, event: events.AppFocus) -> None:
        self.notifier.focused = True

    def on_mount(self) -> None:
        self.query_one(PromptInput).focus()
        if self._model:
            self.query_one(StatusBar).show_model(self._model)
        # A new session opens once the first frame is drawn: the prompt takes keys at
        # once. A stored one's view is on its way already: the first frame waits for it
        # (a frame before would be drawn only to be drawn again), for half a second at most.
        if self._stored:
            self._opening = True
            begin_batch(self)  # (what `batch_update` does, across the awaits of `follow`)
            self.set_timer(FIRST_VIEW_WAIT, self._opened)
            self.follow()
        else:
            self.call_after_refresh(self.follow)

    def _opened(self) -> None:
        """The stored session's first view is shown (or it failed, or it took too long):
        the screen draws again."""
        if self._opening:
            self._opening = False
            end_batch(self)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, PromptInput):
            self._replay_early_keys()

    def _replay_early_keys(self) -> None:
        """Hand the keys typed ahead on, in order (once the prompt has the focus, or after
        the first frame whatever has it), and stop keeping them."""
        early, self._early_keys = self._early_keys or [], None
        for key in early:
            if key.key == "ctrl+j":  # Enter, turned into a line feed by the terminal
                key = events.Key("enter", "\r")  # before the app took it (ICRNL)
            self.post_message(events.Key(key.key, key.character))

    # The parts `_mount_rest` mounts; each raises NoMatches before then.

    @property
    def approval(self) -> ApprovalPrompt:
        from tui.widgets.approval import ApprovalPrompt

        return self.query_one(ApprovalPrompt)

    @property
    def command_output(self) -> CommandOutput:
        from tui.widgets.command_panel import CommandOutput

        return self.query_one(CommandOutput)

    @property
    def hints(self) -> CommandHints:
        from tui.widgets.command_panel import CommandHints

        return self.query_one(CommandHints)

    @property
    def completion(self) -> FileCompletion:
        from tui.widgets.completion import FileCompletion

        return self.query_one(FileCompletion)

    @property
    def inbox(self) -> InboxStrip:
        from tui.widgets.inbox import InboxStrip

        return self.query_one(InboxStrip)

    async def _mount_rest(self) -> None:
        """Mount the parts that start hidden (the inbox strip, approval line, command
        output, hints and @file list) above the prompt, after the first frame: their
        modules (and the runtime's records they read) load then, not before it."""
        from tui.widgets.approval import ApprovalPrompt
        from tui.widgets.command_panel import CommandHints, CommandOutput
        from tui.widgets.completion import FileCompletion
        from tui.widgets.inbox import InboxStrip
        from tui.widgets.todo import TodoList

        rest = [
            TodoList(id="todos"),
            InboxStrip(id="inbox"),
            ApprovalPrompt(),
            CommandOutput(),
            CommandHints(),
            FileCompletion(id="file-completion"),
        ]
        await self.mount_all(rest, before="#prompt")
        self.parts_ready.set()
        self._offer_commands(self.query_one(PromptInput).text)  # for what was typed meanwhile
        if self.view is not None:  # shown before the parts were there (a stored session's)
            self._show_parts(self.view)

    def _offer_commands(self, text: str) -> None:
        """The slash commands that complete `text` (none unless it starts with /)."""
        if not self.parts_ready.is_set():
            return  # `_mount_rest` offers them once the hints are mounted
        if text.startswith("/") or self.hints.shown:
            from tui import slash

            self.hints.offer(slash.completions(text))

    @property
    def resumable(self) -> str | None:
        """The conversation to name on leaving: this one if stored, else the last stored
        one this app left (after /new with nothing sent), else None."""
        if self.view is not None and self.view.version > 0:
            return self.conversation_id
        return self.left_stored

    async def on_unmount(self) -> None:
        if self.parking is not None:
            self.parking.stop()
        if self._opener is not None and self.harness is not None:
            report = await self.harness.close()  # (said once the terminal is back)
            self.close_line = report.line() if report is not None else None

    # --- events → view → widgets -----------------------------------------

    @work(exclusive=True, group="events")
    async def follow(self) -> None:
        """Fold the harness's events into the view and show it; runs for the app's life."""
        self._replay_early_keys()  # no-op unless the prompt never took the focus
        if not self.parts_ready.is_set() and not self._stored:
            await self._mount_rest()
        if self.harness is None and self._opener is not None:
            try:
                self.harness, self.conversation_id = await self._opener()
            except BastionError as exc:
                self._opened()
                await self._not_opened(exc)
                return
        harness, conv_id = self.harness, self.conversation_id
        assert harness is not None
        if self.parking is not None:
            self.parking.on_change = self.query_one(StatusBar).sleeping
            self.parking.start(harness, lambda: self.conversation_id)
        loop = asyncio.get_running_loop()
        channel = harness.subscribe(conv_id)
        try:
            await self._show_first(harness, conv_id)
            if self.view is not None and self.view.earlier:  # the session's end: once it is
                self.call_after_refresh(channel.resync)  # drawn, the whole view (a resync)
            shared = not harness.elsewhere  # on this loop (tests)
            mark = (loop.time(), time.thread_time())
            shown_at = time.monotonic()
            while (batch := await channel.get()) is not None:
                assert self.view is not None
                view = await self._fold(self.view, batch, harness, conv_id)
                view = await self._held(view, batch, shown_at, channel, harness, conv_id)
                started = loop.time()
                await self.show(view)
                shown_at = time.monotonic()
                # Let events gather (the channel joins them) rather than draw each one, and
                # keep this thread's CPU under 1 / (1 + REST) of the time: the harness (its
                # own process, or thread) needs the cores while it streams.
                now = (loop.time(), time.thread_time())
                await channel.rest(pause(now[0] - started, now, mark, shared=shared))
                mark = now
            if (failed := harness.failed) is not None:  # a storage error ended it
                self._session_failed(failed)
            elif (gone := harness.gone) is not None:  # its process ended
                self.open_error = gone
                self.exit(2, return_code=2)
        except NoMatches:
            pass  # the screen is being torn down: the app is closing
        finally:
            self._opened()
            channel.close()

    async def _show_first(self, harness: HarnessClient, conv_id: str) -> None:
        """The session's first view (asked for after the subscription, so nothing falls
        between), and the prompt from the command line submitted while it is drawn."""
        from runtime.model.views import OPENING_ENTRIES

        self.settings, view = await asyncio.gather(
            harness.session_settings(conv_id), harness.snapshot(conv_id, last=OPENING_ENTRIES)
        )
        sending = None
        if self._first_prompt:
            prompt, self._first_prompt = self._first_prompt, None
            sending = asyncio.ensure_future(self._submit(prompt, view))
        await self.show(view)
        self._opened()
        if not self.parts_ready.is_set():  # a stored session's: after its first frame
            await self._refreshed()
            await self._mount_rest()
        self.completion.attach(self.query_one("#prompt"), view.conversation.cwd)
        self.ready.set()
        self.call_after_refresh(self._after_first_view)
        if sending is not None:
            await sending

    def _after_first_view(self) -> None:
        """Once the first view is drawn, what could wait for it: following config and
        theme edits (watchfiles and anyio load then, ~80 ms) and settling; the command
        files become commands (tui.slash loads after the first frame)."""
        from tui.slash import install_files

        for note in install_files(self._command_files):
            self.notify(note, title="command files", severity="warning", timeout=12)
        self._start_live_config()
        self.run_worker(self._settle(), group="settle")
        self._watch_themes()
        if self._sandbox_notice is not None:
            self.run_worker(self._tell_sandbox(self._sandbox_notice), group="sandbox")
        self.query_one(StatusBar).notice(self._standing_notice())
        if self.harness is not None and not self.harness.guest:  # (attached: the driver's)
            self.run_worker(self._tell_mcp(), group="mcp", exit_on_error=False)

    async def _tell_sandbox(self, notice: Callable[[], str | None]) -> None:
        """Say once, when commands cannot be sandboxed here (the probe runs in a thread)."""
        line = await asyncio.to_thread(notice)
        if line:
            self.notify(line, title="no command sandbox", severity="warning", timeout=20)

    async def _tell_mcp(self) -> None:
        """Say once, per MCP server, when one did not start (the session goes on without
        it; /mcp lists them all)."""
        harness = self.harness
        if harness is None:
            return
        servers = await harness.mcp_servers(wait=True)
        for server in servers:
            if server.state == "failed":
                self.notify(server.line(), title="MCP server", severity="warning", timeout=20,
                            markup=False)  # fmt: skip
        if servers:  # their prompts and resources, for completion and /help
            from tui import slash_mcp

            slash_mcp.remember(await harness.mcp_prompts())
            resources = await harness.mcp_resources()
            self.completion.resources = tuple(r.mention for r in resources)

    async def _render_ahead(self, view: ConversationView) -> None:
        """Render the Markdown that showing `view` draws, a segment at a time, in the
        worker thread (`render_aside`); the frame that shows it then only lays it out."""
        from tui.widgets.markdown import render_aside

        transcript = self.query_one(Transcript)
        while (job := transcript.next_render(view)) is not None:
            await render_aside(self, *job)

    async def _held(
        self,
        view: ConversationView,
        batch: object,
        shown_at: float,
        channel: EventChannel,
        harness: HarnessClient,
        conv_id: str,
    ) -> ConversationView:
        """`view` once it may be shown, with what it draws rendered. While the user
        types it waits (see `hold`): what comes meanwhile is folded in and read ahead,
        and once due it is rendered and nothing more is taken in. A key typed while
        it is rendered is echoed first, and the output held again."""
        is_urgent = urgent(batch)
        while True:
            prepared = False
            while wait := hold(
                time.monotonic(), self.typed_at, shown_at, self.echoed_at, urgent=is_urgent
            ):
                if prepared:  # what was rendered is what is shown
                    await asyncio.sleep(min(wait, GAP))
                    continue
                if due(time.monotonic(), shown_at, urgent=is_urgent):
                    await self._render_ahead(view)
                    prepared = True
                    continue
                await channel.rest(min(wait, GAP))
                if (batch := channel.poll()) is None:
                    break
                view = await self._fold(view, batch, harness, conv_id)
                self.query_one(Transcript).read_ahead(view)
                is_urgent = is_urgent or urgent(batch)
            started = time.monotonic()
            await self._render_ahead(view)
            if self.typed_at < started:
                return view

    async def _settle(self) -> None:
        """Once the session is on screen: load the Markdown renderer and a code
        highlighter, on a thread (the first answer would otherwise stall its first
        frames for ~0.2 s), then keep everything loaded out of the collector's full
        passes, which otherwise stall a frame for tens of milliseconds, and turn the
        collector back on; and let a thread hold the interpreter lock for less while
        another waits (`pacing.SWITCH_INTERVAL`: a key's echo waits less for a render)."""
        from tui.pacing import SWITCH_INTERVAL
        from tui.widgets.markdown import warm

        await asyncio.to_thread(warm)
        gc.freeze()
        gc.enable()  # `bastion` starts with it off (tui.launch)
        sys.setswitchinterval(SWITCH_INTERVAL)

    async def _fold(
        self, view: ConversationView, batch: object, harness: HarnessClient, conv_id: str
    ) -> ConversationView:
        """`view` with `batch` (from `EventChannel.get`) applied: each event through the
        reducer, or a fresh snapshot after a resync. A client that switched the model or
        mode (this one, or another terminal on the session) changes the status line."""
        from runtime.model.events import JobUpdated, SettingsChanged
        from runtime.model.records import SessionSettings
        from runtime.model.views import reduce

        if isinstance(batch, list):
            for event in batch:
                if isinstance(event, SettingsChanged) and event.conversation_id == conv_id:
                    self.settings = SessionSettings(event.model, event.approval_mode)
                elif isinstance(event, JobUpdated) and event.conversation_id == conv_id:
                    self.jobs[(conv_id, event.job.id)] = event.job.running
                elif (
                    getattr(event, "phase", None) == "started" and event.conversation_id == conv_id
                ):
                    self._say_why_compacting(event)
                view = reduce(view, event)
        else:  # RESYNC: the channel overflowed and dropped what it held
            view = replace(view, resync_required=True)
        if view.resync_required:
            view = await harness.snapshot(conv_id)
        return view

    def _say_why_compacting(self, event: Any) -> None:
        """A compaction starts (a long session resumed, a long run): why, and that Esc
        declines it, once, where the user looks (issue 36)."""
        from tui.run_words import compacting_notice

        self.notify(compacting_notice(event), title="compacting", timeout=12)

    async def _not_opened(self, exc: BastionError) -> None:
        """The opener failed: the first-run screen when no model is configured, else end
        the app (the caller prints `exc` once the terminal is back)."""
        from runtime import NoModelConfigured

        self.open_error = exc
        if isinstance(exc, NoModelConfigured):  # first run: say how to choose a model
            from tui.widgets.firstrun import FirstRunScreen

            await self.push_screen(FirstRunScreen())
        else:
            self.exit(2, return_code=2)

    def _start_live_config(self) -> None:
        """Follow config.toml edits (once per app); `pinned`: settings set by flags."""
        if self._watch_config is None or self.live_config is not None:
            return
        from tui.live_config import LiveConfig

        self.live_config = LiveConfig(self, self._watch_config, self._pinned)
        self.run_worker(self.live_config.run(), group="config-watch")

    async def show(self, view: ConversationView) -> None:
        """Render `view`: each widget updates only what changed since the last one.

        `self.view` becomes `view` once everything shows it.
        """
        if view.settled and not self._welcome_gone:
            self._welcome_gone = True
            self.query("#welcome").remove()  # (not awaited: it goes with this frame)
        await self.query_one(Transcript).show(view)
        ended = self.view is not None and self.view.active_run and not view.active_run
        self._tell_budget_stop(view)
        self.view = view
        self.notifier.show(view)
        if ended and view.todos and self.settings and self.settings.approval_mode == "plan":
            self.say("the plan is ready: [b]/approve[/] carries it out (leaving plan mode), "
                     "or say what to change")  # fmt: skip
        self.query_one(StatusBar).show(
            view, self.settings, self._running_jobs(view), self._below(view)
        )
        prompt = self.query_one(PromptInput)
        prompt.placeholder = PLACEHOLDER_BUSY if view.active_run else PLACEHOLDER_IDLE
        self._show_parts(view)

    def _show_parts(self, view: ConversationView) -> None:
        """The todo list, inbox strip and approval line, once mounted (`_mount_rest`)."""
        if not self.parts_ready.is_set():
            return
        from tui.widgets.todo import TodoList

        self.query_one(TodoList).show(view)
        self.inbox.show(view)
        if self.approval.show(view):
            self.call_after_refresh(self._focus_approval)

    def _watch_themes(self) -> None:
        """Report user theme files that did not load, and reload them when they change."""
        theming.startup_problems(self, self.theme_folder)
        for note in self._notes:  # project settings ignored: said once, and kept a while
            if note.startswith("attached"):  # (bastion attach: where the session is driven)
                self.notify(note, title="attach", timeout=8)
            else:
                self.notify(note, title="project settings", severity="warning", timeout=12)
        self.run_worker(theming.watch(self, self.theme_folder), group="themes", exclusive=True)

    def on_transcript_new_output(self, event: Transcript.NewOutput) -> None:
        self.query_one("#new-output").set_class(event.below, "-shown")

    def action_page(self, direction: int) -> None:
        transcript = self.query_one(Transcript)
        if direction < 0:
            transcript.scroll_page_up(animate=False)
        else:
            transcript.scroll_page_down(animate=False)

    def action_send_held(self) -> None:
        """Ctrl+R: send what was held behind a failed run (issue 25, item 13), as /send."""
        from tui import slash

        command = slash.find("send")
        if command is not None and self.harness is not None:
            self.run_slash(command, "")

    def action_toggle_output(self) -> None:
        """All of the newest command's output, or its tail again (a click does it for any)."""
        from tui.widgets.entries import ToolCallLine

        rows = [row for row in self.query(ToolCallLine) if row.expandable]
        if rows:
            rows[-1].expanded = not rows[-1].expanded

    def _focus_approval(self) -> None:
        """Focus the approval line while it asks (so y/n reach it), else the prompt."""
        approval = self.approval
        (approval if approval.call is not None else self.query_one(PromptInput)).focus()

    # --- input --------------------------------------------------------------

    # --- commands -----------------------------------------------------------

    @work(group="command")
    async def run_slash(self, command: slash.SlashCommand, arg: str) -> None:
        with self.parking.holding() if self.parking is not None else contextlib.nullcontext():
            await command.run_in(self, arg)

    def say(self, markup: str, *, error: bool = False) -> None:
        """Show a command's output (markup) above the prompt (once it is mounted)."""
        if self.parts_ready.is_set():
            self.command_output.say(markup, error=error)
        else:
            self.run_worker(self._say_when_mounted(markup, error), group="input")

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast. Every toast goes through here (a widget's or screen's `notify` is
        the app's): its text quotes errors, a server's line, a subagent's label, so
        its control characters are shown, not obeyed (`runtime.visible`)."""
        from runtime import visible

        super().notify(
            visible(message),
            title=visible(title, lines=False),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    async def _say_when_mounted(self, markup: str, error: bool) -> None:
        await self.parts_ready.wait()
        self.command_output.say(markup, error=error)

    def use_settings(self, settings: SessionSettings) -> None:
        self.settings = settings
        if self.view is not None:
            self.query_one(StatusBar).show(
                self.view, settings, self._running_jobs(self.view), self._below(self.view)
            )

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
        self.kept_draft = text

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
        if self.view is not None and self.view.version > 0:  # stored: it has had a prompt
            self.left_stored = self.conversation_id
        self.workers.cancel_group(self, "events")  # stop following the old conversation
        self.conversation_id = conversation_id
        self.view = None
        await self.query_one(Transcript).remove()
        transcript = Transcript(id="transcript")  # a fresh one: the transcript shows one view
        await self.mount(transcript, before=0)
        await transcript.mount(Static(WELCOME, id="welcome"))
        self._welcome_gone = False
        self.command_output.close()
        self.follow()

    # --- actions ------------------------------------------------------------

    def action_completion(self, key: str) -> None:
        """Up/Down/Tab/Enter in the open @file list; otherwise they go on as usual."""
        if not self.parts_ready.is_set() or not self.completion.take_key(key):
            raise SkipAction()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc is the app's (interrupt) on the transcript and a subagent's screen; over
        any other screen pushed on top (the /resume picker, a dialog) it is that
        screen's: priority bindings are asked from the app down, so the app steps aside."""
        if action == "interrupt" and len(self.screen_stack) > 1:
            from tui.subagent import SubagentScreen

            return isinstance(self.screen, SubagentScreen)
        return True

    def _disarm_quit(self) -> None:
        self._quit_armed = False
        self.query_one(StatusBar).notice(self._standing_notice())
