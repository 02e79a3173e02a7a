"""`bastion [PROMPT]`: open the session on the harness thread while the app loads.

Kept light on purpose: the command line imports this, not `tui.app`, so the
harness thread starts opening the store (and importing the model loop) while
this thread imports Textual and builds the screen. A session that cannot be
opened is reported before the app takes the terminal.
"""

from __future__ import annotations

import os
import sys
from typing import Any

SWITCH_INTERVAL = 0.001  # seconds a thread may hold the GIL while another waits (default 5 ms)


def run(opts: Any) -> int:
    """Open the session on a `HarnessThread`, run the app on this one; the exit code.

    0 (or the app's code), or 2 with one line on stderr when the session cannot be opened.
    """
    from runtime.errors import BastionError
    from runtime.firstrun import NoModelConfigured
    from runtime.threaded import HarnessThread, ThreadedHarness
    from tui.cli import EXIT_OK, EXIT_USAGE, error_line
    from tui.session import start_session

    if getattr(opts, "resume", None) == "":  # `-r` without an id: pick, then go on as `-r ID`
        from runtime.config import load_config
        from tui.resume import choose_in_app

        try:
            chosen = choose_in_app(load_config(os.getcwd()).theme)
        except BastionError as exc:
            error_line(str(exc))
            return EXIT_USAGE
        if chosen is None:
            return EXIT_OK
        opts.resume = chosen
    sys.setswitchinterval(SWITCH_INTERVAL)  # the harness thread waits less for the interpreter
    thread = HarnessThread()
    opening = thread.submit(start_session(opts, interactive=True))
    from tui.app import BastionApp  # Textual loads while the session opens

    try:
        session = opening.result()
    except NoModelConfigured:
        thread.stop()
        from tui.widgets.firstrun import FirstRunApp

        FirstRunApp().run()
        return EXIT_USAGE
    except BastionError as exc:
        thread.stop()
        error_line(str(exc))
        return EXIT_USAGE
    harness = ThreadedHarness(session.harness, thread)
    try:
        app = BastionApp(
            harness, session.conversation.id, first_prompt=opts.prompt, theme=session.config.theme
        )
        app.run()
        return app.return_code or EXIT_OK
    finally:
        harness.close_blocking()
