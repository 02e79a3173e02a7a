"""Issue 25, item 5 (resume) in the app: a session resumed after a crash mid-answer
shows the kept partial marked interrupted, and the continuation as its own entry
under it; the partial's text appears once."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Static

from runtime.testing.scripted import ScriptedTurn
from tests.runtime.test_resume_partial import ANSWER
from tests.tui.conftest import SIZE, run_settled, wait_for
from tests.tui.test_app import assistant_widgets


async def test_resume_partial_app_shows_it_interrupted_and_the_rest_under_it(
    harness_process,
) -> None:
    """A harness process streaming a slow answer is killed (SIGKILL) once part of it is
    kept; `bastion -r ID` then shows the partial marked interrupted and the rest under
    it, answered by a new harness process."""
    proc = harness_process([ScriptedTurn(text=ANSWER, chunk_size=8, delay=0.01)])
    conv_id = await crashed_mid_answer(proc)
    proc.add_turns({"text": "and the rest."})
    partial = next(e for e in (await stored(proc, conv_id)).entries if e.kind == "assistant")
    assert partial.text and ANSWER.startswith(partial.text) and partial.text != ANSWER
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await wait_for(lambda: run_settled(app), pilot)
        await wait_for(lambda: len(assistant_widgets(app)) == 2, pilot)
        await pilot.pause(0.05)
        first, second = assistant_widgets(app)
        assert first.text_shown == partial.text and second.text_shown == "and the rest."
        marker = str(first.query_one(".marker", Static).render())
        assert "interrupted" in marker and first.query_one(".marker").has_class("-shown")
        assert not second.query_one(".marker").has_class("-shown")


async def stored(proc: Any, conv_id: str) -> Any:
    """The conversation as the store in BASTION_HOME holds it now."""
    from runtime.store.database import Store

    store = await Store.open(proc.home / "bastion.sqlite")
    try:
        return await store.snapshot(conv_id)
    finally:
        await store.close()


async def crashed_mid_answer(proc: Any) -> str:
    """A harness process (started as `bastion` starts one) streams the slow answer and
    is killed once more than 40 characters of it are kept in the store: its run left
    running and its entry streaming. The conversation's id."""
    from tui.child import Child
    from tui.parsers import main_parser

    child = Child.start(main_parser().parse_args(proc.argv()), check_model=True)
    proc.seeders.append(child)
    child.drive()
    client, conv_id = await child.harness()
    try:
        await client.submit(conv_id, "count")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            kept = [e.text for e in (await stored(proc, conv_id)).entries if e.kind == "assistant"]
            if kept and len(kept[0]) > 40:
                break
            assert loop.time() < deadline, "no partial was checkpointed"
            await asyncio.sleep(0.01)  # (poll interval)
        child.process.kill()
        child.process.wait(30)
    finally:
        await client.close()
    return conv_id
