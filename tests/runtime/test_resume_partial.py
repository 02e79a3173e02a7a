"""Issue 25, item 5 (resume): after a crash mid-answer the kept partial shows as
interrupted, the model is told it was cut off and continues it, and no text is
shown twice (it used to be left out of the request, so the model began again
and the transcript showed the answer twice: the partial, then all of it again).
"""

from __future__ import annotations

import asyncio

import pytest

from runtime.context.compaction import CUT_OFF
from runtime.context.messages import CONTINUE
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.usefixtures("store_kind")

ANSWER = "".join(f"{i:03d} " for i in range(200))


async def crashed_mid_answer(tmp_path) -> tuple[str, str]:
    """Harness A streams a slow answer and stops mid-stream (its run left running and
    its entry streaming, as a killed process leaves them): (conversation id, item id)."""
    provider = ScriptedProvider([ScriptedTurn(text=ANSWER, chunk_size=8, delay=0.01)])
    a = await open_harness(tmp_path, provider)
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    item = await a.submit(conv.id, "count")
    for _ in range(500):
        snap = await a.store.snapshot(conv.id)
        kept = [e.text for e in snap.entries if e.kind == "assistant"]
        if kept and len(kept[0]) > 40:
            break
        await asyncio.sleep(0.01)  # (poll interval)
    else:
        raise AssertionError("no partial was checkpointed")
    await a.close()
    return conv.id, item.id


async def test_resume_partial_is_sent_cut_off_and_continued_not_repeated(tmp_path) -> None:
    conv_id, item_id = await crashed_mid_answer(tmp_path)
    provider = ScriptedProvider([ScriptedTurn(text="and the rest.")])
    b = await open_harness(tmp_path, provider)
    before = await b.store.snapshot(conv_id)
    partial = next(e for e in before.entries if e.kind == "assistant")
    assert partial.status == "streaming" and partial.text and ANSWER.startswith(partial.text)
    await b.drive(conv_id)
    run = await b.wait(item_id, conv_id)
    assert run.state == "completed"

    sent = provider.requests[0].messages
    assert [m.role for m in sent[-3:]] == ["user", "assistant", "user"]
    assert sent[-2].content == partial.text + "\n\n" + CUT_OFF
    assert sent[-1].content == CONTINUE

    snap = await b.store.snapshot(conv_id)
    answers = [e for e in snap.entries if e.kind == "assistant"]
    assert [(e.status, e.text) for e in answers] == [
        ("interrupted", partial.text),
        ("complete", "and the rest."),
    ]
    view = await b.snapshot(conv_id)
    shown = [e for e in view.entries if e.kind == "assistant"]
    assert [e.status for e in shown] == ["interrupted", "complete"]
    assert sum(e.text.count(partial.text) for e in shown) == 1  # the partial once, not twice
    await b.close()


async def test_resume_partial_stays_cut_off_in_later_requests(
    tmp_path,
) -> None:
    """Once the resumed run has ended, a later request still reads the partial as cut
    off, the note and the continuation after it, in the order the user saw them."""
    conv_id, item_id = await crashed_mid_answer(tmp_path)
    provider = ScriptedProvider([ScriptedTurn(text="done"), ScriptedTurn(text="next")])
    b = await open_harness(tmp_path, provider)
    await b.drive(conv_id)
    await b.wait(item_id, conv_id)
    follow = await b.submit(conv_id, "something else")
    await b.wait(follow.id, conv_id)
    sent = provider.requests[1].messages
    assert [m.role for m in sent[-4:]] == ["assistant", "user", "assistant", "user"]
    assert sent[-4].content.endswith(CUT_OFF) and sent[-3].content == CONTINUE
    assert sent[-2].content == "done" and sent[-1].content == "something else"
    await b.close()
