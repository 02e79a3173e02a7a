"""`bastion [PROMPT]`: draw the app first, then open the session on the harness thread.

Kept light on purpose: the command line imports this, not `tui.app`. Only the
config is read before the app starts (it names the theme, and a broken config
is reported before the app takes the terminal). For a new conversation the
first frame, with the prompt taking keys, is drawn before the harness's
modules are imported and the store is opened: those run on the harness thread
afterwards, and what the user typed and sent meanwhile goes once the session
is open. A resumed one (`-r`, `-c`, `--session-id`) is found in the store
while Textual loads and before the app starts, so a bad id is reported with
the terminal untouched; its model is resolved (importing the providers and
httpx) and it is driven (lease, recovery, tools) after the first frame. A
session that cannot be opened or driven ends the app and is reported on
stderr, exit code 2.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
from typing import Any

SWITCH_INTERVAL = 0.001  # seconds a thread may hold the GIL while another waits (default 5 ms)


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
    """Run the app on this thread and open the session on a `HarnessThread`; the exit code.

    0 (or the app's code), or 2 with one line on stderr when the session cannot be opened.
    """
    from runtime.config import load_config
    from runtime.errors import BastionError
    from runtime.firstrun import NoModelConfigured
    from runtime.harness_thread import HarnessThread
    from tui.cli import EXIT_OK, EXIT_USAGE, error_line

    try:
        config = load_config(os.getcwd())
        theme, folder = chosen_theme(opts, config)
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    if getattr(opts, "resume", None) == "":  # `-r` without an id: pick, then go on as `-r ID`
        from tui.resume import choose_in_app

        try:
            chosen = choose_in_app(config.theme)
        except BastionError as exc:
            error_line(str(exc))
            return EXIT_USAGE
        if chosen is None:
            return EXIT_OK
        opts.resume = chosen
    sys.setswitchinterval(SWITCH_INTERVAL)  # the harness thread waits less for the interpreter
    thread = HarnessThread()
    openings: list[concurrent.futures.Future[Any]] = []  # opening, then driving

    def open_session() -> concurrent.futures.Future[Any]:
        from tui.session import open_session

        if not openings:  # a resumed one's model is checked when it is driven
            openings.append(thread.submit(open_session(opts, check_model=not resuming(opts))))
        return openings[0]

    async def opener() -> tuple[Any, str]:  # (a ThreadedHarness, the conversation's id)
        from runtime.threaded import ThreadedHarness
        from tui.session import drive_session

        session = await asyncio.wrap_future(open_session())
        openings.append(thread.submit(drive_session(session, interactive=True)))
        session = await asyncio.wrap_future(openings[-1])
        return ThreadedHarness(session.harness, thread), session.conversation.id

    hint = model_hint(opts, config.model)
    early = resuming(opts) or hint is None  # found first: a bad id or model is reported
    if early:  # before the app, and the session opens while Textual loads
        open_session()
    from tui.app import BastionApp

    if early:
        try:
            openings[0].result()
        except NoModelConfigured:  # first run: the screen says how to choose a model
            thread.stop()
            from tui.widgets.firstrun import FirstRunApp

            FirstRunApp(theme=config.theme).run()
            return EXIT_USAGE
        except BastionError as exc:
            thread.stop()
            error_line(str(exc))
            return EXIT_USAGE

    cwd = os.getcwd()

    def watch_config() -> Any:  # made once the session is open: watchfiles loads then
        from runtime import ConfigWatcher

        return ConfigWatcher(cwd, initial=config)

    app = BastionApp(
        opener=opener,
        first_prompt=opts.prompt,
        theme=theme,
        theme_folder=folder,
        model=hint,
        watch_config=watch_config,
        pinned=[name for name in ("model", "approval_mode") if getattr(opts, name, None)],
    )
    error = None
    try:
        app.run()
        if app.resumable is not None:
            print(resume_hint(app.resumable))
    finally:
        if app.harness is None and openings:  # quit while the session was still opening
            error = _close_opened(thread, openings)
        thread.stop()
    error = app.open_error or error
    if error is not None and not isinstance(error, NoModelConfigured):  # (its screen said it)
        error_line(str(error))
        return EXIT_USAGE
    return app.return_code or EXIT_OK


def _close_opened(thread: Any, openings: list[concurrent.futures.Future[Any]]) -> Exception | None:
    """Close the session the app quit before taking (releasing its lease), or return the
    BastionError it failed with, to be reported. `openings`: opening, then driving."""
    from runtime.errors import BastionError

    session = None
    for future in openings:
        try:
            session = future.result(timeout=30)
        except BastionError as exc:
            return exc  # whichever step failed closed the harness
    if session is not None:
        thread.run(session.harness.close())
    return None


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
