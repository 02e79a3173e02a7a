"""Once the session is on screen the app settles: the Markdown renderer loaded, the
collector on, and the interpreter lock handed on sooner (`pacing.SWITCH_INTERVAL`),
so a key's echo waits less behind a render on the worker thread."""

from __future__ import annotations

import gc
import sys

from tests.tui.conftest import SIZE, wait_for
from tui.pacing import SWITCH_INTERVAL


async def test_a_settled_app_hands_the_interpreter_lock_on_sooner(harness_process):
    default = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # Python's default, whatever an earlier test left
    try:
        app = harness_process([]).app()
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(app.ready.is_set, pilot)
            await wait_for(lambda: sys.getswitchinterval() == SWITCH_INTERVAL, pilot)
            assert gc.isenabled()
    finally:
        sys.setswitchinterval(default)
