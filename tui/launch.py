"""`bastion [PROMPT]`: the app in this process, the harness in a child (`tui.child`).

Kept light on purpose: the command line imports this, not `tui.app`. Only the
config is read before the harness process starts. For a resumed session it
starts then and opens the session (store, conversation, model) while this one
loads Textual with the theme; a new one's starts after the theme (it has no
view to send, and would only take cores from the first frame). It drives the
session (lease, recovery, tools) only once told to, after the theme is known
to exist: so a bad `--theme` changes nothing stored. Meanwhile the app draws
its first frame, with the prompt taking keys; what the user typed and sent
goes once the session is driven. A resumed one (`-r`, `-c`, `--session-id`) must be found
before the app starts, so a bad id is reported with the terminal untouched. A
session that cannot be opened or driven ends the app and is reported on
stderr, exit code 2.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tui.child import Child


#: Textual's frame rate cap (its default is 60). A frame is drawn only when something
#: changed, at the next tick of Textual's update timer; after a frame that overran a
#: tick (a stream's catch-up can take 20-40 ms) that timer skips to the tick after the
#: next one. So a key typed meanwhile waits up to two ticks for its echo: 33 ms at 60,
#: 17 ms at 120. The transcript keeps its own pace (BastionApp.FRAME).
FPS = 120


def set_frame_rate() -> None:
    """Textual's frame rate cap: FPS unless TEXTUAL_FPS says otherwise. Textual reads it
    once, as it loads, so this comes before anything imports it."""
    os.environ.setdefault("TEXTUAL_FPS", str(FPS))


def size_from_the_terminal() -> None:
    """Let the terminal say the app's size. Textual takes COLUMNS and LINES from the
    environment over the terminal's own size, and keeps them across resizes; a parent
    that loaded GNU readline (pdb, so pytest; a Python REPL) exported the size of *its*
    terminal, which would pin the app at that size in any other. On a terminal they
    are dropped before Textual starts (the commands the agent runs get the real size
    from the terminal too)."""
    import sys

    out = sys.__stdout__
    if out is not None and out.isatty():
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)


def resuming(opts: Any) -> bool:
    """Whether this invocation names a stored conversation (which must be found first)."""
    return bool(opts.resume or opts.session_id or getattr(opts, "continue_", False))


def model_hint(opts: Any, configured: str) -> str | None:
    """The model this invocation uses when that is known before the store is read: the
    flag, or the config's for a new conversation (a resumed one keeps its own)."""
    if opts.model:
        return str(opts.model)
    return None if resuming(opts) else (configured or None)


def run(opts: Any) -> int:
    """Run the app here and the session in the harness process; the exit code.

    0 (or the app's code), or 2 with one line on stderr when the session cannot be opened.
    """
    from runtime import load_config
    from runtime.model.errors import BastionError
    from tui.exits import EXIT_OK, EXIT_USAGE, error_line

    set_frame_rate()
    size_from_the_terminal()
    try:
        ask_trust(opts)
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    opening = _Opening(opts)
    if resuming(opts):  # its first view is drawn at once: find it while the rest loads
        opening.open()  # (a new session's would only take cores from the first frame)
    chosen = None
    try:
        config = load_config(os.getcwd())
        if getattr(opts, "resume", None) == "":  # `-r` without an id: the picker first
            chosen = chosen_theme(opts, config)  # (a bad theme is reported before it opens)
            if not _pick(opts, config):
                return EXIT_OK  # nothing was picked
    except BastionError as exc:
        opening.close_unclaimed()  # it was not told to drive: nothing was written
        error_line(str(exc))
        return EXIT_USAGE
    # Start-up allocates much and frees little: the collector's passes over it (a full
    # one took 40 ms) only delay the first frames. The app turns it back on, frozen,
    # once the session is on screen (BastionApp._settle).
    gc.disable()
    try:
        theme, folder = chosen or chosen_theme(opts, config)
    except BastionError as exc:
        opening.close_unclaimed()  # it was not told to drive: nothing was written
        error_line(str(exc))
        return EXIT_USAGE
    if not terminal_here():
        opening.close_unclaimed()  # it was not told to drive: nothing was written
        return EXIT_USAGE
    opening.open().drive()
    hint = model_hint(opts, config.model)
    if resuming(opts) or hint is None:  # found first: a bad id or model is reported
        code = opening.open_before_app(config)
        if code is not None:
            return code
    return _run_app(opts, opening, config, theme, folder, hint)


def terminal_here() -> bool:
    """True when stdin and stdout are a terminal; else one line saying what to run
    instead (a script, CI or an editor that spawned `bastion PROMPT` would otherwise
    get a full-screen app drawing into a pipe, waiting for keys that never come)."""
    from tui.exits import error_line

    terminal = [stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout)]
    if all(terminal):
        return True
    error_line(
        "the app needs a terminal (stdin and stdout are not both one): for a script "
        'run `bastion -p "PROMPT"`; for a line mode `bastion --plain`'
    )
    return False


def ask_trust(opts: Any) -> None:
    """Ask once whether to trust this folder, when it has project files (.bastion/) and
    no decision is recorded; only on a terminal, and not with --trust. The answer is
    recorded in the user's config dir (or, for "this run only", kept in `opts`)."""
    import sys

    from runtime import TrustState, project_files, trust_of

    cwd = os.getcwd()
    if getattr(opts, "trust", False) or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return
    folder = trust_of(cwd)
    if folder.state is not TrustState.UNKNOWN or not project_files(cwd):
        return
    from runtime import project_preview, set_trust, trust_once
    from tui.widgets.trust import TrustApp

    answer = TrustApp(folder.folder, project_preview(cwd)).run()
    if answer in ("trusted", "untrusted"):
        set_trust(cwd, TrustState(answer))
    elif answer == "once":
        trust_once(cwd)
        opts.trust = True  # the harness process trusts it for this run too


def _pick(opts: Any, config: Any) -> bool:
    """`-r` without an id: the picker, then go on as `-r ID`; false if nothing was chosen."""
    from tui.resume import choose_in_app

    chosen = choose_in_app(config.theme)
    if chosen is None:
        return False
    opts.resume = chosen
    return True


class _Opening:
    """The session, opened and then driven in the harness process (`tui.child.Child`),
    for the app to take once its first frame is drawn."""

    def __init__(self, opts: Any) -> None:
        self.opts = opts
        self.child: Child | None = None

    def open(self) -> Child:
        """Start the harness process (once): it opens the session, then drives it."""
        if self.child is None:
            from tui.child import Child

            # a resumed one's model is checked when it is driven
            self.child = Child.start(self.opts, check_model=not resuming(self.opts))
        return self.child

    async def opener(self) -> tuple[Any, str]:
        """(the harness client, the conversation's id): what `BastionApp(opener=...)` awaits."""
        return await self.open().harness()

    def open_before_app(self, config: Any) -> int | None:
        """Open it now (it opens while Textual loads): None, or the exit code when it
        cannot be (the first-run screen shown, or the error printed)."""
        from runtime import NoModelConfigured
        from runtime.model.errors import BastionError
        from tui.exits import EXIT_USAGE, error_line

        child = self.open()
        from tui.app import preload

        preload()  # the app and what its first view draws load while the session is found

        try:
            child.opened.result()
        except NoModelConfigured:  # first run: the screen says how to choose a model
            child.close()
            gc.enable()
            from tui.widgets.firstrun import FirstRunApp

            FirstRunApp(theme=config.theme).run()
            return EXIT_USAGE
        except BastionError as exc:
            child.close()
            error_line(str(exc))
            return EXIT_USAGE
        return None

    def close_unclaimed(self) -> BaseException | None:
        """End the harness process the app quit before taking (its session closed, the
        lease released), or return the error its opening failed with, to be reported."""
        return self.child.close() if self.child is not None else None


def _run_app(
    opts: Any, opening: _Opening, config: Any, theme: str, folder: Any, hint: str | None
) -> int:
    """The app over `opening`'s session; its exit code (2 with the error printed)."""
    from runtime import NoModelConfigured
    from tui.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, error_line

    app = build_app(opts, opening, config, theme, folder, hint)
    error = None
    try:
        app.run()
        if app.close_line is not None:  # a session that did not settle as it closed
            error_line(app.close_line)
        if app.failed_line is not None:  # a storage error ended it (the line says how to
            error_line(app.failed_line)  # resume)
        elif app.resumable is not None:
            print(resume_hint(app.resumable))
    finally:
        if app.harness is None:  # quit while the session was opening
            error = opening.close_unclaimed()
    error = app.open_error or error
    if error is not None and not isinstance(error, NoModelConfigured):  # (its screen said it)
        error_line(str(error))
        return EXIT_USAGE
    if app.failed_line is not None:
        return EXIT_FAILED
    return app.return_code or EXIT_OK


def build_app(
    opts: Any, opening: _Opening, config: Any, theme: str, folder: Any, hint: str | None
) -> Any:
    """The `BastionApp` `bastion` runs over `opening`'s harness process (the app's tests
    open theirs with this too, so they drive what ships)."""
    from tui.app import BastionApp
    from tui.parking import Parking

    cwd = os.getcwd()

    def watch_config() -> Any:  # made once the session is open: watchfiles loads then
        from runtime import ConfigWatcher

        return ConfigWatcher(cwd, initial=config)

    app = BastionApp(
        opener=opening.opener,
        first_prompt=opts.prompt,
        theme=theme,
        theme_folder=folder,
        model=hint,
        watch_config=watch_config,
        pinned=[name for name in ("model", "approval_mode") if getattr(opts, name, None)],
        stored=resuming(opts),
        notes=config.notes,
        sandbox_notice=lambda: sandbox_notice_for(opts, config),
        catalog=config.model_info,
        notify=config.notify,
        commands=config.commands,
        parking=Parking(opts, config.idle_park),
    )
    return app


def sandbox_notice_for(opts: Any, config: Any) -> str | None:
    """The one line to tell the user if this session's commands cannot be sandboxed."""
    from runtime import choose_sandbox, sandbox_notice

    approval = getattr(opts, "approval_mode", None) or config.approval_mode.value
    policy = choose_sandbox(
        config, approval, getattr(opts, "sandbox", None), getattr(opts, "network", None)
    )
    return sandbox_notice(policy)


def chosen_theme(opts: Any, config: Any) -> tuple[str, Any]:
    """The theme `--theme` or the config chose, and the user's theme folder, loaded.

    A ConfigError naming what chose it (`--theme` or the config file) and the known
    themes when there is no theme of that name.
    """
    from themes import check_theme_name
    from tui.theming import user_folder

    flag = getattr(opts, "theme", None)
    name = flag or config.theme
    source = "--theme" if flag else config.theme_source
    folder = user_folder()
    check_theme_name(name, source, folder.themes, folder.problems)
    return name, folder


def resume_hint(conversation_id: str) -> str:
    """The line printed on leaving the app or the line mode, once the conversation exists."""
    return f"resume with: bastion -r {conversation_id}"
