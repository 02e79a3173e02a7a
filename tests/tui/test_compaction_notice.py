"""Issue 36: a compaction does not start by surprise: the app says why (the conversation
no longer fits the model's window with room for an answer) and that Esc declines it."""

from __future__ import annotations

from tests.runtime.test_compaction_progress import PROMPT
from tests.tui.conftest import SIZE, notices, run_settled, wait_for


async def test_the_app_says_why_it_compacts_and_that_esc_declines(harness_process):
    """The model's window is small (the user's config says so) and each prompt is long:
    the harness process compacts, and the app says why and that Esc declines."""
    # (the answers and the summaries come from the one loopback server, in turn)
    proc = harness_process([{"text": f"answer {i} " + "THE SUMMARY TEXT " * 10} for i in range(16)])
    config = proc.tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'compact_model = "openai/small"\n'
        '[models."openai/test"]\ncontext_window = 4000\nmax_output_tokens = 500\n'
    )
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        for i in range(6):
            await app.send(f"prompt {i} {PROMPT}")
            await wait_for(lambda i=i: run_settled(app) and len(app.view.runs) == i + 1, pilot)
            if "no longer fits" in notices(app):
                break
        said = notices(app)
        assert "compacting" in said and "context window" in said and "Esc declines" in said
    assert any(r.body["model"] == "small" for r in proc.requests)  # a summary was asked for
