"""Issue 40: copy text out of the app. `/copy` puts the last answer on the clipboard
(OSC 52, so it works over SSH and in tmux), `/copy N` its Nth code block."""

from __future__ import annotations

import io

from rich.console import Console

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, client_of, open_driven, run_settled, wait_for
from tests.tui.test_slash import run_command, said

ANSWER = "Run this:\n\n```sh\nmake test\n```\n\nthen:\n\n~~~python\nprint('ok')\n~~~\n"


async def test_copy_the_answer_or_one_of_its_code_blocks(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text=ANSWER)]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/copy")
        await wait_for(lambda: "nothing to copy yet" in said(app), pilot)
        await app.send("how do I test?")
        await wait_for(lambda: run_settled(app), pilot)
        await run_command(app, pilot, "/copy")
        await wait_for(lambda: "copied the last answer" in said(app), pilot)
        assert app.clipboard == ANSWER
        await run_command(app, pilot, "/copy 2")
        await wait_for(lambda: "copied code block 2" in said(app), pilot)
        assert app.clipboard == "print('ok')\n"
        await run_command(app, pilot, "/copy 3")
        await wait_for(lambda: "/copy 1 to /copy 2" in said(app), pilot)
        assert app.clipboard == "print('ok')\n"


async def test_the_line_mode_copies_with_osc_52(tmp_path):
    from tests.tui.test_plain import Keyboard
    from tui.plain import LineMode

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    con = Console(file=out, width=100, force_terminal=False, color_system=None)
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([ScriptedTurn(text=ANSWER)]))
    try:
        mode = LineMode(await client_of(harness), conv_id, con, Keyboard("test?", "/copy 1"))
        await mode.loop()
    finally:
        await harness.close()
    assert "\x1b]52;c;bWFrZSB0ZXN0Cg==\x07" in out.getvalue()  # base64 of "make test\n"
    assert "copied code block 1 of the last answer (10 characters)" in out.getvalue()
