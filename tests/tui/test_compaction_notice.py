"""Issue 36: a compaction does not start by surprise: the app says why (the conversation
no longer fits the model's window with room for an answer) and that Esc declines it."""

from __future__ import annotations

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.test_compaction import open_with
from tests.runtime.test_compaction_progress import PROMPT, TINY
from tests.tui.conftest import SIZE, app_over, notices, run_settled, wait_for


async def test_the_app_says_why_it_compacts_and_that_esc_declines(tmp_path):
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(12)])
    summary = ScriptedTurn(text="THE SUMMARY TEXT " * 10)
    harness = await open_with(tmp_path, main, TINY, ScriptedProvider([summary] * 4))
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/tiny"})
        await harness.drive(conv.id, interactive=True)
        app = app_over(harness, conv.id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(app.ready.is_set, pilot)
            for i in range(6):
                await app.send(f"prompt {i} {PROMPT}")
                await wait_for(lambda i=i: run_settled(app) and len(app.view.runs) == i + 1, pilot)
                if "no longer fits" in notices(app):
                    break
            said = notices(app)
            assert "compacting" in said and "context window" in said and "Esc declines" in said
    finally:
        await harness.close()
