"""Issue 40: a run's end and an approval, told when the terminal is behind other
windows: the bell and a desktop notification (OSC 9 and 777), per `notify`."""

from __future__ import annotations

from textual import events

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, run_settled, wait_for
from tui.widgets import ApprovalPrompt


def watch(app):
    said: list[str] = []
    app.notifier.write = said.append
    app.notifier.bell = lambda: said.append("BELL")
    return said


async def test_behind_other_windows_the_end_and_an_approval_are_told(harness_process):
    write = {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}
    proc = harness_process([{"tool_calls": [write]}, {"text": "Written."}])
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        said = watch(app)
        app.post_message(events.AppBlur())
        await pilot.pause()
        await app.send("write it")
        prompt = app.query_one(ApprovalPrompt)
        await wait_for(lambda: prompt.has_class("-shown") and app.focused is prompt, pilot)
        assert said == [
            "BELL",
            "\x1b]9;bastion: write_file needs your approval\x07"
            "\x1b]777;notify;bastion;write_file needs your approval\x07",
        ]
        app.post_message(events.AppFocus())  # back in front: nothing more is told
        await pilot.pause()
        await pilot.press("y")
        await wait_for(lambda: run_settled(app), pilot)
        assert len(said) == 2
    assert (proc.work / "a.txt").read_text() == "x"


async def test_a_run_ending_behind_other_windows_rings_and_says_how_it_ended(
    harness_process, tmp_path
):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="Hi.")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        said = watch(app)
        app.post_message(events.AppBlur())
        await pilot.pause()
        await app.send("hello")
        await wait_for(lambda: run_settled(app) and len(said) == 2, pilot)
        assert said[0] == "BELL" and "bastion: the run is done" in said[1]


def test_the_modes():
    from tui.notices import Notifier

    said: list[str] = []
    for mode, focused, expect in (("auto", True, []), ("auto", False, ["BELL", "osc"]),
                                  ("always", True, ["BELL", "osc"]), ("bell", False, ["BELL"]),
                                  ("off", False, [])):  # fmt: skip
        said.clear()
        notifier = Notifier(mode, lambda text: said.append("osc"), lambda: said.append("BELL"))
        notifier.focused = focused
        notifier._tell("the run is done")
        assert said == expect, (mode, focused)


def test_a_run_that_began_and_ended_between_two_views_is_told():
    """A quick answer: no view ever showed the run going. The runs already over when
    the session was first shown (a resumed one's) are not told; nor, after a switch,
    those of the session switched to."""
    from types import SimpleNamespace as NS

    from tui.notices import Notifier

    said: list[str] = []
    notifier = Notifier("always", said.append, lambda: None)

    def view(conv: str, *runs: str):
        done = [NS(id=r, terminal=True, state="completed") for r in runs]
        return NS(conversation=NS(id=conv), runs=done, tool_calls=[])

    notifier.show(view("c1", "old"))
    assert said == []
    notifier.show(view("c1", "old", "quick"))
    assert said == [
        "\x1b]9;bastion: the run is done\x07\x1b]777;notify;bastion;the run is done\x07"
    ]
    notifier.show(view("c2", "theirs"))
    notifier.show(view("c1", "old", "quick"))
    assert len(said) == 1
