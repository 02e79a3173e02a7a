"""The Textual app's behaviour: keys become harness calls, and the screen follows the store."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from runtime.model.llm import ProviderError, ToolCall
from runtime.model.records import (
    Approval,
    EntryKind,
    EntryStatus,
    InboxMode,
    RunState,
    ToolCallState,
)
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, HangingProvider, run_settled, wait_for
from tui.app import BastionApp
from tui.widgets import (
    ApprovalPrompt,
    AssistantEntry,
    InboxStrip,
    PromptInput,
    ToolCallLine,
    UserEntry,
)
from tui.widgets.markdown import MarkdownText

ANSWER = "Here is the plan:\n\n1. read the file\n2. change **one** line\n\nDone."


def assistant_widgets(app: BastionApp) -> list[AssistantEntry]:
    return list(app.query(AssistantEntry))


def label_text(app: BastionApp, selector: str) -> str:
    return str(app.query_one(selector).render())


async def test_enter_sends_the_prompt_and_the_answer_streams_in(harness_process, monkeypatch):
    # (~1.2 s of stream: frames come 5 a second)
    proc = harness_process([{"text": ANSWER, "chunk_size": 3, "delay_ms": 50}])
    app = proc.app()
    partial_seen: list[str] = []
    show_text = AssistantEntry._show_text

    async def recording(self, entry):
        await show_text(self, entry)
        partial_seen.append(self.text_shown)

    monkeypatch.setattr(AssistantEntry, "_show_text", recording)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"fix the bug", "enter")
        assert app.query_one(PromptInput).value == ""
        await wait_for(lambda: app.typed_at < 0, pilot)  # sent: no longer typing
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        [widget] = assistant_widgets(app)
        assert widget.text_shown == ANSWER
        assert widget.query_one(MarkdownText).source == ANSWER
        assert [str(w.render()) for w in app.query(UserEntry)] == ["fix the bug"]

    snap = await proc.snapshot()
    kinds = [(e.kind, e.status, e.text) for e in snap.entries]
    assert kinds == [
        (EntryKind.USER, EntryStatus.COMPLETE, "fix the bug"),
        (EntryKind.ASSISTANT, EntryStatus.COMPLETE, ANSWER),
    ]
    assert [r.state for r in snap.runs] == [RunState.COMPLETED]
    partial = [p for p in partial_seen if 0 < len(p) < len(ANSWER)]
    assert len(partial) > 3, "the answer should appear piece by piece while it streams"
    assert all(ANSWER.startswith(p) for p in partial_seen)
    assert partial_seen == sorted(partial_seen, key=len)  # only ever appended to
    assert proc.requests[0].body["messages"][-1]["content"] == "fix the bug"


async def test_the_prompt_from_the_command_line_is_sent_first(harness_process):
    proc = harness_process([{"text": "Hi!"}])
    app = proc.app(first_prompt="say hi")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        assert "done" in label_text(app, "#status-left")
    snap = await proc.snapshot()
    assert [(e.kind, e.text) for e in snap.entries] == [
        (EntryKind.USER, "say hi"),
        (EntryKind.ASSISTANT, "Hi!"),
    ]


async def test_escape_interrupts_the_run_and_marks_the_partial_answer(harness_process, tmp_path):
    provider = HangingProvider("I will start by reading")
    proc = harness_process(provider)
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(
            lambda: (
                bool(assistant_widgets(app))
                and assistant_widgets(app)[0].text_shown == provider.text
            ),
            pilot,
        )
        assert "writing" in label_text(app, "#status-left")
        await pilot.press("escape")
        await wait_for(lambda: run_settled(app), pilot)
        marker = assistant_widgets(app)[0].query_one(".marker")
        assert marker.has_class("-shown")
        assert "interrupted" in str(marker.render())
    snap = await proc.snapshot()
    assert snap.runs[-1].state == RunState.INTERRUPTED
    entry = snap.entries[-1]
    assert (entry.kind, entry.status, entry.text) == (
        EntryKind.ASSISTANT,
        EntryStatus.INTERRUPTED,
        provider.text,
    )


async def test_enter_while_a_run_is_going_queues_a_steer(harness_process, tmp_path):
    provider = HangingProvider("Working")
    proc = harness_process(provider)
    app = proc.app(first_prompt="start")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await wait_for(lambda: app.view is not None and app.view.active_run is not None, pilot)
        await pilot.press(*"use tabs", "enter")
        await wait_for(lambda: bool(app.view and app.view.queued_inbox), pilot)
        strip = app.query_one(InboxStrip)
        assert strip.has_class("-shown")
        assert "steer" in str(strip.render()) and "use tabs" in str(strip.render())
        assert "1 queued" in label_text(app, "#status-left")
        # Esc interrupts and gives the queued steer back to the prompt, to edit or send.
        await pilot.press("escape")
        await wait_for(lambda: run_settled(app), pilot)
        await wait_for(lambda: app.query_one(PromptInput).value == "use tabs", pilot)
        assert not app.view.queued_inbox
    snap = await proc.snapshot()
    [steer] = [i for i in snap.inbox if i.text == "use tabs"]
    assert (steer.mode, steer.state) == (InboxMode.STEER, "withdrawn")
    assert [r.state for r in snap.runs] == [RunState.INTERRUPTED]


def _write_turns() -> list[ScriptedTurn]:
    args = json.dumps({"path": "notes.txt", "content": "hello\n"})
    return [
        ScriptedTurn(text="", tool_calls=(ToolCall("call_1", "write_file", args),)),
        ScriptedTurn(text="Wrote notes.txt."),
    ]


async def _approve(harness_process, key: str):
    args = {"path": "notes.txt", "content": "hello\n"}
    turns = [
        {"tool_calls": [{"id": "call_1", "name": "write_file", "arguments": args}]},
        {"text": "Wrote notes.txt."},
    ]
    proc = harness_process(turns)
    app = proc.app(first_prompt="write notes")
    async with app.run_test(size=SIZE) as pilot:
        await app.parts_ready.wait()  # mounted after the first frame
        prompt = app.query_one(ApprovalPrompt)
        await wait_for(lambda: prompt.has_class("-shown") and app.focused is prompt, pilot)
        text = prompt.question
        assert "Allow write_file notes.txt?" in text and "[y] once" in text and "[n] deny" in text
        await wait_for(lambda: "awaiting approval" in label_text(app, "#status-left"), pilot)
        await pilot.press(key)
        await wait_for(lambda: run_settled(app), pilot)
        assert not prompt.has_class("-shown")
        assert app.focused is app.query_one("#prompt")
        line = str(app.query_one(ToolCallLine).render())
    return await proc.snapshot(), line, proc.work / "notes.txt"


async def test_y_approves_a_pending_write(harness_process):
    snap, line, written = await _approve(harness_process, "y")
    [call] = snap.tool_calls
    assert (call.approval, call.state) == (Approval.APPROVED, ToolCallState.DONE)
    assert written.read_text() == "hello\n"  # the real tool wrote it, once approved
    # the row says what the tool did, with its diff
    assert line.startswith("● Created notes.txt  (6 B)  +1") and "+hello" in line
    assert snap.entries[-1].text == "Wrote notes.txt."


async def test_n_denies_a_pending_write(harness_process):
    snap, line, written = await _approve(harness_process, "n")
    [call] = snap.tool_calls
    assert (call.approval, call.state) == (Approval.DENIED, ToolCallState.DENIED)
    assert not written.exists()
    assert "denied" in line


async def test_a_failed_run_is_marked_with_its_reason(harness_process, tmp_path):
    error = ProviderError("model overloaded", provider="scripted", code="bad_request")
    turn = ScriptedTurn(text="Partial answer here", chunk_size=4, error=error, error_after_chunks=3)
    proc = harness_process(ScriptedProvider([turn]))
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        marker = assistant_widgets(app)[0].query_one(".marker")
        assert "failed: openai reported an error mid-stream: model overloaded" in str(
            marker.render()
        )
        assert "failed" in label_text(app, "#status-left")
    snap = await proc.snapshot()
    assert snap.entries[-1].status == EntryStatus.FAILED


async def test_ctrl_c_twice_quits_and_once_only_warns(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press("ctrl+c")
        assert "press Ctrl+C again to quit" in label_text(app, "#status-right")
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0


async def test_the_quit_warning_expires(harness_process, tmp_path, monkeypatch):
    monkeypatch.setattr("tui.app_keys.QUIT_WINDOW", 0.05)
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press("ctrl+c")
        await wait_for(lambda: "again" not in label_text(app, "#status-right"), pilot)
        await pilot.press("ctrl+c")
        assert app.is_running


async def test_a_resumed_conversation_shows_its_history(harness_process):
    usage = {"prompt_tokens": 10, "completion_tokens": 3}
    proc = harness_process([{"text": "First answer.", "usage": usage}])
    first = proc.app(first_prompt="first question")
    async with first.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(first), pilot)
    app = proc.app(resume=first.conversation_id)  # `bastion -r ID`: a second harness process
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.pause(0.05)
        assert [str(w.render()) for w in app.query(UserEntry)] == ["first question"]
        assert [w.text_shown for w in assistant_widgets(app)] == ["First answer."]
        assert not app.query("#welcome")
        status = label_text(app, "#status-left")
        assert "openai/test" in status and "done" in status and "13 tok" in status


async def test_the_view_resyncs_from_the_store_after_a_gap(harness_process, monkeypatch):
    """A lost event makes the reducer ask for a resync; the app reloads and keeps going."""
    from runtime.ipc.channel import EventChannel
    from runtime.model.events import TextDelta

    # (paced, so the deltas come apart rather than joined in one)
    proc = harness_process([{"text": "one two three", "chunk_size": 4, "delay_ms": 40}])
    app = proc.app()
    deltas: list[object] = []
    dropped: list[object] = []
    put_many = EventChannel.put_many

    def lossy(self, events):  # the second delta from the harness process never arrives
        kept = []
        for event in events:
            if isinstance(event, TextDelta):
                deltas.append(event)
                if len(deltas) == 2:
                    dropped.append(event)
                    continue
            kept.append(event)
        put_many(self, kept)

    monkeypatch.setattr(EventChannel, "put_many", lossy)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        client = app.harness
        snapshot, reloads = client.snapshot, []

        async def reloading(conversation_id):  # the resync: a whole view asked for
            reloads.append(conversation_id)
            return await snapshot(conversation_id)

        client.snapshot = reloading
        await pilot.press(*"count", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await wait_for(lambda: text_shown(app) == ["one two three"], pilot)
        assert dropped and reloads == [app.conversation_id]
        assert text_shown(app) == ["one two three"]


def text_shown(app: BastionApp) -> list[str]:
    return [w.text_shown for w in assistant_widgets(app)]


async def test_a_delta_updates_only_the_entry_it_changes(harness_process, tmp_path, monkeypatch):
    """Streaming the second answer never touches the widgets of the first exchange."""
    turns = [
        ScriptedTurn(text="First."),
        ScriptedTurn(text="Second answer, streamed.", chunk_size=2),
    ]
    proc = harness_process(ScriptedProvider(turns))
    app = proc.app(first_prompt="one")
    shown: list[str] = []
    for cls in (UserEntry, AssistantEntry):
        original = cls.show

        async def counting(self, entry, view, original=original):
            shown.append(entry.text)
            await original(self, entry, view)

        monkeypatch.setattr(cls, "show", counting)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        shown.clear()
        await pilot.press(*"two", "enter")
        await wait_for(lambda: run_settled(app) and len(app.view.runs) == 2, pilot)
        await pilot.pause(0.05)
    assert "one" not in shown and "First." not in shown
    assert shown.count("two") == 1
    assert shown[-1] == "Second answer, streamed."


async def test_up_and_down_walk_through_what_was_sent(harness_process, tmp_path):
    turns = [ScriptedTurn(text="A."), ScriptedTurn(text="B.")]
    proc = harness_process(ScriptedProvider(turns))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        for text in ("first", "second"):
            await pilot.press(*text, "enter")
            await wait_for(lambda: run_settled(app) and not app.query_one("#prompt").value, pilot)
        await wait_for(lambda: len(app.view.runs) == 2 and run_settled(app), pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"dra", "up")
        assert prompt.value == "second"
        await pilot.press("up", "up")
        assert prompt.value == "first"
        await pilot.press("down")
        assert prompt.value == "second"
        await pilot.press("down")
        assert prompt.value == "dra"


async def test_thinking_shows_until_the_first_token(harness_process):
    gate = threading.Event()  # the model answers once it is set
    proc = harness_process([{"text": "Now.", "holds": {0: gate}}])
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        # The row's children are composed a moment after it is mounted.
        await wait_for(
            lambda: bool(assistant_widgets(app) and assistant_widgets(app)[0].query(".marker")),
            pilot,
        )
        marker = assistant_widgets(app)[0].query_one(".marker")
        await wait_for(lambda: marker.has_class("-shown"), pilot)
        await wait_for(lambda: len(proc.requests) == 1, pilot)  # asked, nothing answered
        assert marker.has_class("-shown") and "thinking…" in str(marker.render())
        gate.set()
        await wait_for(lambda: run_settled(app), pilot)
        assert not marker.has_class("-shown")


async def test_quitting_during_a_run_ends_it_as_interrupted(harness_process, tmp_path):
    provider = HangingProvider("Halfway")
    proc = harness_process(provider)
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await pilot.press("ctrl+c", "ctrl+c")
        await pilot.pause()
    assert app.return_code == 0
    snap = await proc.snapshot()
    assert snap.runs[-1].state == RunState.INTERRUPTED
    assert snap.entries[-1].status == EntryStatus.INTERRUPTED


async def test_a_running_command_shows_its_newest_output_lines(harness_process):
    """A real command prints six lines and then waits for a file the test writes."""
    command = (
        "for i in 1 2 3 4 5 6; do echo compiling unit $i; done; "
        "while [ ! -e built.flag ]; do sleep 0.02; done; echo linked"
    )
    turns = [
        {
            "tool_calls": [
                {"id": "call_1", "name": "run_command", "arguments": {"command": command}}
            ]
        },
        {"text": "Built."},
    ]
    proc = harness_process(turns)
    app = proc.app(first_prompt="build", approval_mode="full-auto")

    def line() -> str:
        found = list(app.query(ToolCallLine))
        return str(found[0].render()) if found else ""

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: "unit 6" in line(), pilot)
        shown = line()
        assert "compiling unit 3" in shown and "compiling unit 2" not in shown  # the last four
        assert "exit" not in shown
        (proc.work / "built.flag").write_text("")
        await wait_for(lambda: run_settled(app), pilot)
        done = line()
        assert "exit 0" in done and "linked" in done  # the result's row, not the live tail


async def test_the_prompt_takes_keys_before_the_session_opens(harness_process):
    """A new session's first frame comes before its harness process has opened it: what
    the user types and sends meanwhile is kept, and sent once the session is open."""
    release = asyncio.Event()
    proc = harness_process([{"text": "Opened and answered."}])
    app = proc.app()
    opener = app._opener

    async def late():  # the harness process is slow to hand over its session
        await release.wait()
        return await opener()

    app._opener = late
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "openai/test" in label_text(app, "#status-left")
        await pilot.press(*"early bird", "enter")
        await pilot.pause(0.05)
        assert not app.ready.is_set() and proc.requests == []
        release.set()
        await wait_for(lambda: run_settled(app), pilot)
        assert [str(w.render()) for w in app.query(UserEntry)] == ["early bird"]
    assert proc.requests[0].body["messages"][-1]["content"] == "early bird"


async def test_a_session_that_cannot_open_ends_the_app_with_its_error(tmp_path):
    from runtime.model.errors import UnknownConversation

    async def opener():
        raise UnknownConversation("no conversation 0192", hint="list them")

    app = BastionApp(opener=opener)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
    assert app.return_code == 2
    assert isinstance(app.open_error, UnknownConversation)


def test_frame_pacing_keeps_the_ui_thread_to_its_share():
    from tui.pacing import FRAME, REST, pause

    # An idle cycle: the next frame after FRAME at most.
    assert pause(0.001, (10.0, 5.0), (9.9, 4.999)) == pytest.approx(FRAME - 0.001)
    # This thread used 0.1 s of CPU over 0.1 s: it waits until it has had a quarter.
    assert pause(0.01, (10.0, 5.1), (9.9, 5.0)) == pytest.approx((1 + REST) * 0.1 - 0.1)
    # The harness on this thread (tests): its CPU is not the screen's; REST x the frame.
    assert pause(0.05, (10.0, 5.1), (9.9, 5.0), shared=True) == pytest.approx(REST * 0.05)


def test_new_output_waits_for_a_pause_in_typing_then_for_the_gap_after_an_echo():
    from tui.pacing import ECHO_POLL, GAP, KEY_QUIET, MAX_HOLD, hold

    never = -MAX_HOLD
    assert hold(10.0, never, shown_at=9.99, echoed_at=never) == 0.0  # nobody typing: show now
    # A key 20 ms ago (echoed): wait until KEY_QUIET after it.
    assert hold(10.0, 9.98, shown_at=9.9, echoed_at=9.99) == pytest.approx(KEY_QUIET - 0.02)
    # ...but not past MAX_HOLD after the last frame.
    assert hold(10.0, 9.99, shown_at=10.0 - MAX_HOLD + 0.01, echoed_at=9.995) == pytest.approx(0.01)
    # Held that long while keys keep coming: shown in the gap after a key's echo is drawn,
    # and not before it is (however long that takes, up to KEY_QUIET).
    late = 10.0 - MAX_HOLD - 0.5
    assert hold(10.0, 9.99, shown_at=late, echoed_at=9.9) == pytest.approx(ECHO_POLL)
    assert hold(10.0, 9.94, shown_at=late, echoed_at=9.9) == pytest.approx(ECHO_POLL)
    assert hold(10.0, 9.99, shown_at=late, echoed_at=9.995) == 0.0
    # Urgent output (a run ended) skips the MAX_HOLD wait, not the echo or the gap.
    assert hold(10.0, 9.99, shown_at=9.99, echoed_at=9.9, urgent=True) == pytest.approx(ECHO_POLL)
    assert hold(10.0, 9.99, shown_at=9.99, echoed_at=9.995, urgent=True) == 0.0
    # Past that gap: look again soon (the next key's gap, or the pause).
    assert hold(10.0, 9.95, shown_at=late, echoed_at=10.0 - 2 * GAP) == pytest.approx(GAP)
    assert hold(10.0, 10.0 - KEY_QUIET - 0.001, shown_at=late, echoed_at=never) == 0.0


async def test_a_key_s_echo_is_noted_once_drawn(harness_process):
    """`echoed_at` follows the frame after the app handled a key (what `hold` waits for
    before showing held output)."""
    import time

    async with gated_app(harness_process) as gated:
        app, pilot = gated.app, gated.pilot
        before = time.monotonic()
        await pilot.press("a")
        await wait_for(lambda: app.echoed_at >= app.typed_at >= before, pilot)
        assert app.query_one(PromptInput).value == "a"


async def _first_shown(app: BastionApp, pilot) -> None:
    """Until the gated answer's first piece is on screen."""
    await wait_for(
        lambda: bool(assistant_widgets(app)) and assistant_widgets(app)[0].text_shown == "first",
        pilot,
    )


@dataclass
class Gated:
    """An app streaming a gated answer (`first`; once `more` is set, the rest; once `end`
    is set, its end) from the harness process, its first piece on screen."""

    app: BastionApp
    pilot: Any
    more: threading.Event
    end: threading.Event
    answer: AssistantEntry


@asynccontextmanager
async def gated_app(harness_process, rest: str = " second") -> AsyncIterator[Gated]:
    """The app over a harness process whose model answers "first", then (held until
    `more`) `rest` in 5-character chunks, then (held until `end`) ends; the first piece
    shown."""
    more, end = threading.Event(), threading.Event()
    text = "first" + rest
    chunks = -(-len(text) // 5)
    proc = harness_process([{"text": text, "chunk_size": 5, "holds": {1: more, chunks: end}}])
    app = proc.app(first_prompt="go")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await _first_shown(app, pilot)
            [answer] = assistant_widgets(app)
            yield Gated(app, pilot, more, end, answer)
    finally:
        more.set()
        end.set()


async def _type_until(app: BastionApp, pilot, done, keys: int = 50) -> None:
    """Type a key at a time (output held back shows in the gap after one's echo) until
    `done()`; a loaded machine may let a gap pass, so the next key gives another."""
    for _ in range(keys):
        await pilot.press("b")
        await pilot.pause(0.1)
        if done():
            return
    raise AssertionError(f"not done after {keys} keys")


async def _until_streamed(app: BastionApp, text: str) -> None:
    """Until the harness process has `text` as the answer (asked over the protocol)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        view = await app.harness.snapshot(app.conversation_id)
        if str(view.text_of(view.entries[-1])) == text:
            return
        assert loop.time() < deadline, "the answer never streamed"
        await asyncio.sleep(0.02)  # (poll interval)


async def _until_ended(app: BastionApp) -> None:
    """Until the harness process has ended the run (asked over the protocol)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while (await app.harness.snapshot(app.conversation_id)).active_run is not None:
        assert loop.time() < deadline, "the run never ended"
        await asyncio.sleep(0.02)  # (poll interval)


def _hold_output(app: BastionApp, monkeypatch) -> None:
    """As if the user kept typing for the rest of the test."""
    import time

    import tui.pacing

    monkeypatch.setattr(tui.pacing, "KEY_QUIET", 60.0)
    monkeypatch.setattr(tui.pacing, "MAX_HOLD", 120.0)
    app.typed_at = time.monotonic()


async def test_a_key_holds_output_from_the_moment_the_driver_reads_it(harness_process):
    """The terminal driver (Textual's, as `get_driver_class` picks it) notes each key as
    its thread reads it: a frame of held output that would start before the app got
    to the key sees it was typed. The key then reaches the prompt as before."""
    import threading
    import time

    from textual import events
    from textual.app import App
    from textual.drivers.headless_driver import HeadlessDriver

    from tui.textual_compat import noting_keys

    async with gated_app(harness_process) as gated:
        app, pilot = gated.app, gated.pilot
        textuals = App.get_driver_class(app)
        assert issubclass(app.driver_class, textuals) and app.driver_class is not textuals
        driver = noting_keys(HeadlessDriver)(app, debug=False, mouse=False, size=SIZE)
        before = time.monotonic()
        reader = threading.Thread(target=driver.process_message, args=(events.Key("z", "z"),))
        reader.start()
        reader.join()
        assert app.typed_at >= before  # noted on the reading thread, not yet handled
        assert app.query_one(PromptInput).value == ""
        await wait_for(lambda: app.query_one(PromptInput).value == "z", pilot)


async def test_typing_holds_output_and_a_run_ending_shows_after_the_next_key(
    harness_process, monkeypatch
):
    import time

    import tui.pacing

    async with gated_app(harness_process) as gated:
        app, pilot = gated.app, gated.pilot
        await pilot.press("a")  # a real key counts as typing
        assert time.monotonic() - app.typed_at < 5.0
        assert app.query_one(PromptInput).value == "a"
        # The user keeps typing (a pause longer than the test): new text waits.
        _hold_output(app, monkeypatch)
        gated.more.set()
        await _until_streamed(app, "first second")  # the harness process has it all
        await pilot.pause(0.3)
        assert gated.answer.text_shown == "first"
        # The run ends (urgent): held until the gap after the next key's echo...
        gated.end.set()
        await _until_ended(app)
        await pilot.pause(0.3)
        assert gated.answer.text_shown == "first"
        # ...then shown with everything held, though the user "types" on.
        await _type_until(app, pilot, lambda: run_settled(app))
        assert gated.answer.text_shown == "first second"
        assert time.monotonic() - app.typed_at < tui.pacing.KEY_QUIET


async def test_text_read_ahead_while_held_is_drawn_as_it_would_have_been(
    harness_process, monkeypatch
):
    rest = "".join(f"\n\n## Part {i}\n\nParagraph {i}.\n\n```\ncode {i}\n```" for i in range(300))
    async with gated_app(harness_process, rest) as gated:
        app, pilot, answer = gated.app, gated.pilot, gated.answer
        _hold_output(app, monkeypatch)
        gated.more.set()
        # Held off the screen, the new text is still read: its cuts are found now.
        await wait_for(lambda: len(answer._splitter.cuts) > 10, pilot, timeout=30)
        assert answer.text_shown == "first"
        gated.end.set()
        await _type_until(app, pilot, lambda: run_settled(app))
        await pilot.pause(0.05)
        assert answer.text_shown == "first" + rest
        segments = [s.source for s in answer.query(MarkdownText)]
        assert ("first" + rest).endswith("".join(segments))
        assert segments[-1].endswith("code 299\n```")
        assert answer.hidden_segments > 0


async def test_a_notification_never_covers_the_prompt(harness_process, tmp_path):
    """Toasts (config reloaded, not sent, …) show at the top right, over the transcript,
    not over the prompt box at the bottom (Textual's default place)."""
    from textual.widgets._toast import Toast

    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_for(app.ready.is_set, pilot)
        app.notify("the config is valid again", title="config reloaded", timeout=30)
        await wait_for(lambda: bool(app.screen.query(Toast)), pilot)
        await pilot.pause(0.1)
        toast = app.screen.query_one(Toast).region
        prompt = app.query_one("#prompt").region
        assert toast.height and not toast.overlaps(prompt), (toast, prompt)
        assert toast.y < prompt.y


async def test_a_prompt_the_harness_refuses_comes_back_to_the_prompt(harness_process):
    """The prompt empties as Enter sends it; when the harness refuses it, the toast says
    why and the text comes back to the prompt (before anything typed since), so
    nothing typed is lost."""
    from runtime.model.errors import ConversationBusy

    proc = harness_process([{"text": "unused"}])
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        assert app.harness is not None

        async def refuse(*args: Any, **kwargs: Any) -> Any:
            raise ConversationBusy("another process drives this session", pid=4242)

        app.harness.submit = refuse  # type: ignore[method-assign]
        await pilot.press(*"fix the bug", "enter")
        await wait_for(lambda: app.query_one(PromptInput).text == "fix the bug", pilot)
        assert any("another process drives" in str(n.message) for n in app._notifications)
        assert not app.query(UserEntry)
