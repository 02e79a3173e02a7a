"""Issue 37, items 6 and 10: the seeds' promises about supersede, interrupt-next and
reset, one test each (the successor of test_seed_promises.py for these items; each
fails on the code before them: there was no supersede, no interrupt-next mode, and no
reset but /new and /compact).

- seed 000: "`supersede` | ends | discarded from the prompt, kept in the record";
- seed 000: interrupt-next "ends; this input runs before ordinary queued work … B
  keeps its durable identity and eventually runs. Urgent inputs remain FIFO";
- seed 004: "`reset()` starts a new context. The model no longer sees older entries,
  but they stay in storage … start from a handoff note".
"""

from __future__ import annotations

import asyncio

import pytest

from runtime.model.records import SUPERSEDED, EntryKind, InboxMode
from runtime.run.urgent import URGENT_REASON
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.runtime.test_redirect import COMMAND, start, until
from tests.runtime.test_urgent import FirstHangs

pytestmark = pytest.mark.usefixtures("store_kind")


def sent(request) -> str:
    return "\n".join(str(m.content) for m in request.messages)


async def test_seed_supersede_discards_from_the_prompt_and_keeps_in_the_record(tmp_path):
    provider = FirstHangs([ScriptedTurn(text="Answer to B.")])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    a = await harness.submit(conv.id, "question A")
    await asyncio.wait_for(provider.streamed.wait(), 30)
    await until(lambda v: any(v.text_of(e) for e in v.entries if e.kind == "assistant"),
                harness, conv.id, "the partial kept")  # fmt: skip
    done = await harness.supersede(conv.id, "question B")
    assert (await harness.wait(a.id, conv.id)).reason == SUPERSEDED  # ends
    assert done.item is not None
    await harness.wait(done.item.id, conv.id)
    assert "Thinking about it" not in sent(provider.requests[-1])  # discarded from the prompt
    view = await harness.snapshot(conv.id)
    kept = [e for e in view.entries if e.kind == EntryKind.ASSISTANT and e.run_id == a.run_id]
    assert kept and view.text_of(kept[0]) == "Thinking about it"  # kept in the record
    await harness.close()


async def test_seed_interrupt_next_runs_before_queued_work_which_keeps_its_identity(tmp_path):
    turns = [ScriptedTurn(tool_calls=(COMMAND,)), ScriptedTurn(text="C1."),
             ScriptedTurn(text="C2."), ScriptedTurn(text="B.")]  # fmt: skip
    harness, conv_id, provider, toolbox = await start(tmp_path, turns)
    a = await harness.submit(conv_id, "A")
    await until(lambda v: any(c.state == "running" for c in v.tool_calls), harness, conv_id,
                "A's command")  # fmt: skip
    b = await harness.submit(conv_id, "B", mode=InboxMode.FOLLOW_UP)
    c1 = await harness.submit(conv_id, "C1", mode=InboxMode.INTERRUPT_NEXT)
    c2 = await harness.submit(conv_id, "C2", mode=InboxMode.INTERRUPT_NEXT)
    assert toolbox.gate is not None
    toolbox.gate.set()
    assert (await harness.wait(a.id, conv_id)).reason == URGENT_REASON  # A ends
    runs = [await harness.wait(i.id, conv_id) for i in (c1, c2, b)]
    assert [r.inbox_id for r in runs] == [c1.id, c2.id, b.id]  # identity kept, B runs too
    assert runs[0].created_at < runs[1].created_at < runs[2].created_at  # C1, C2, then B
    assert [str(r.messages[-1].content) for r in provider.requests[1:]] == ["C1", "C2", "B"]
    await harness.close()


async def test_seed_reset_starts_a_new_context_from_a_handoff_note(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="Old answer."),
                                 ScriptedTurn(text="HANDOFF: do Y next."),
                                 ScriptedTurn(text="Doing Y.")])  # fmt: skip
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    first = await harness.submit(conv.id, "old question")
    await harness.wait(first.id, conv.id)
    await harness.reset(conv.id)
    item = await harness.submit(conv.id, "go on")
    await harness.wait(item.id, conv.id)
    request = sent(provider.requests[-1])
    assert "HANDOFF: do Y next." in request  # from the note the model wrote
    assert "old question" not in request and "Old answer." not in request  # no older entries
    texts = [e.text for e in (await harness.snapshot(conv.id)).entries]
    assert "old question" in texts and "Old answer." in texts  # but they stay in storage
    await harness.close()
