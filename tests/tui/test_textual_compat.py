"""Each Textual internal `tui.textual_compat` fences, checked: this fails when one stops working."""

from __future__ import annotations

import time

from textual._xterm_parser import XTermParser

from tui import textual_compat as compat


def keys(data: str) -> list[str]:
    parser = XTermParser()
    found = [e.key for e in parser.feed(data) if hasattr(e, "key")]
    # (the thing under test: past the escape delay, a lone ESC sequence is settled)
    time.sleep(0.15)
    return found + [e.key for e in parser.tick() if hasattr(e, "key")]


def test_esc_cr_is_alt_enter_and_the_rest_is_as_textual_reads_it():
    compat.install()
    compat.install()  # idempotent
    assert keys("\x1b\r") == ["alt+enter"]
    assert keys("\r") == ["enter"]
    assert keys("\x1ba") == ["alt+a"]
    assert keys("\x1b") == ["escape"]


def test_alt_enter_in_tmux_queues_a_follow_up(tmp_path):
    """tmux sends Alt+Enter as ESC CR: while a run streams, it queues a follow-up
    (shown as one in the inbox strip), not a steer."""
    import pytest

    from runtime.testing.process import LoopbackThread
    from tests.tui.test_tmux import TMUX, Tmux, bastion_bin, environment

    if TMUX is None:
        pytest.skip("tmux is not installed")
    slow = {"text": "word " * 400, "chunk_size": 5, "delay_ms": 20}
    term = Tmux(tmp_path)
    try:
        with LoopbackThread.start([slow, {"text": "later"}], tmp_path / "server") as server:
            cwd = tmp_path / "work"
            cwd.mkdir()
            term.start(
                [bastion_bin(), "--model", "openai/test"], environment(tmp_path, server), cwd
            )
            term.wait_for(lambda s: "type a request" in s, "the app to start")
            term.send("go", "Enter")
            term.wait_for(lambda s: "word word" in s, "the answer streaming")
            term.send("then this", literal=True)
            term.send("M-Enter")
            screen = term.wait_for(lambda s: "then this" in s and "queued" in s, "the queue")
            assert "» follow-up then this" in screen, screen
    finally:
        term.kill()


def test_editing_keys_in_one_burst_apply_in_order(tmp_path):
    """tmux sends `BSpace Q` in one write: the backspace deletes the c, then Q is typed
    (the backspace ran after Q, deleting it, when it was left to TextArea's bindings)."""
    import pytest

    from runtime.testing.process import LoopbackThread
    from tests.tui.test_tmux import TMUX, Tmux, bastion_bin, environment

    if TMUX is None:
        pytest.skip("tmux is not installed")
    term = Tmux(tmp_path)
    try:
        with LoopbackThread.start([{"text": "x"}], tmp_path / "server") as server:
            cwd = tmp_path / "work"
            cwd.mkdir()
            term.start(
                [bastion_bin(), "--model", "openai/test"], environment(tmp_path, server), cwd
            )
            term.wait_for(lambda s: "type a request" in s, "the app to start")
            term.send("abc", literal=True)
            term.wait_for(lambda s: "│ abc " in s, "abc typed")
            term.send("BSpace", "Q")
            term.wait_for(lambda s: "│ abQ " in s, "abQ")
            term.send("BSpace", "BSpace", "BSpace", "x", "y")
            term.wait_for(lambda s: "│ xy " in s, "xy")
            term.send("Left", "Left", "z", "End", "w")
            term.wait_for(lambda s: "│ zxyw " in s, "zxyw")
    finally:
        term.kill()


async def test_batch_holds_repaints_until_it_ends():
    """`begin_batch`/`end_batch` are Textual's batch counter: while held, the app
    does not repaint (opening a stored session draws once, with its view)."""
    from textual.app import App

    app = App()
    async with app.run_test():
        assert not app._batch_count
        compat.begin_batch(app)
        compat.begin_batch(app)
        assert app._batch_count == 2
        compat.end_batch(app)
        compat.end_batch(app)
        assert not app._batch_count


async def test_anchoring_in_a_layout_and_following_the_anchor():
    """`anchor_in_layout` makes the widget anchored (as `anchor()` does, without the
    scroll); scrolling up by the user releases it and `following_anchor` says so;
    scrolling to the end follows again."""
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.widgets import Static

    class Tall(App[None]):
        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield Static("\n".join(f"line {i}" for i in range(200)))

    app = Tall()
    async with app.run_test(size=(40, 10)) as pilot:
        scroll = app.query_one(VerticalScroll)
        compat.anchor_in_layout(scroll)
        assert scroll.is_anchored and compat.following_anchor(scroll)
        scroll.refresh(layout=True)
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y > 0  # the compositor took it to the end
        scroll.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        assert not compat.following_anchor(scroll)
        scroll.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert compat.following_anchor(scroll)


async def test_keys_first_sees_a_key_before_the_text_area():
    """`KeysFirst.take_key` gets each key first: True keeps it from the text area."""
    from textual.app import App, ComposeResult

    taken: list[str] = []

    class Prompt(compat.KeysFirst):
        async def take_key(self, event) -> bool:
            taken.append(event.key)
            return event.key == "x"

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield Prompt()

    app = One()
    async with app.run_test() as pilot:
        prompt = app.query_one(Prompt)
        prompt.focus()
        await pilot.press("a", "x", "b")
        await pilot.pause()
        assert taken == ["a", "x", "b"]
        assert prompt.text == "ab"  # x was taken; a and b reached the text area


def test_an_enter_typed_before_the_app_took_the_terminal_is_an_enter():
    """A terminal not yet raw turns Enter into a line feed (ICRNL) as it takes it: the
    bytes waiting when the app takes it were typed before, and a line feed among them
    is read as Enter; one typed after is Ctrl+J (a new line in the prompt) as ever.
    (Under load the app read such a line feed after its prompt had the focus, and
    the typed-ahead request stayed in the prompt: the CI run of 8ae5153.)"""
    import os
    import pty
    import select
    from types import SimpleNamespace

    from textual import events

    class Reading:  # the part of a Textual driver the wrapper sits on
        def __init__(self) -> None:
            self.got: list[events.Key] = []

        def start_application_mode(self) -> None:
            pass

        def process_message(self, message: events.Key) -> None:
            self.got.append(message)

    master, slave = pty.openpty()
    try:
        os.write(master, b"hi\r")  # typed while bastion starts: the slave holds "hi\n"
        # (the terminal's line discipline takes the bytes on its own thread: wait for it)
        assert select.select([slave], [], [], 10)[0] == [slave]
        assert compat.waiting_bytes(slave) == 3
        driver = compat.noting_keys(Reading)()  # type: ignore[arg-type]
        driver._app = SimpleNamespace(typed_at=0.0)
        driver.fileno = slave
        driver.start_application_mode()
        for key, char in (("h", "h"), ("i", "i"), ("ctrl+j", "\n"), ("ctrl+j", "\n")):
            driver.process_message(events.Key(key, char))
        assert [k.key for k in driver.got] == ["h", "i", "enter", "ctrl+j"]
        assert driver._app.typed_at > 0
    finally:
        os.close(master)
        os.close(slave)


async def _bar_passes(monkeypatch, scroll_class: type) -> list[tuple[bool, bool, bool]]:
    """A scrolling widget that grows a few lines at a time: for each screen pass while
    it does, (a layout, only the scrollbar repainted, the bar left to paint after it)."""
    from textual.app import App, ComposeResult
    from textual.screen import Screen
    from textual.widgets import Static

    passes: list[tuple[bool, bool, bool]] = []
    original = Screen._on_timer_update

    def recording(screen: Screen) -> None:
        layout, dirty = screen._layout_required, set(screen._dirty_widgets)
        original(screen)
        scrolls = list(screen.query(scroll_class))
        if scrolls:
            bar = scrolls[0].vertical_scrollbar
            passes.append((layout, dirty == {bar}, bool(bar._repaint_regions)))

    monkeypatch.setattr(Screen, "_on_timer_update", recording)

    class Text(Static, compat.LaidOutOnce):  # (as the transcript's Markdown is)
        pass

    class Growing(App[None]):
        def compose(self) -> ComposeResult:
            with scroll_class():
                yield Text("line")

    app = Growing()
    async with app.run_test(size=(40, 10)) as pilot:
        scroll = app.query_one(scroll_class)
        compat.anchor_in_layout(scroll)
        for lines in range(12, 60, 4):
            app.query_one(Text).update("\n".join(f"line {i}" for i in range(lines)))
            # (the bar's own pass, where there is one, comes a timer tick after the
            # layout's: time for both)
            await pilot.pause(0.1)
        assert scroll.scroll_y == scroll.max_scroll_y > 0
    return passes


async def test_bars_in_its_pass_repaints_the_scrollbar_in_the_layout_pass(monkeypatch):
    """`BarsInItsPass`: each layout pass of a growing, anchored scroll also paints its
    scrollbar as it now is, and no pass repaints the bar alone. (Without it, Textual
    leaves the bar to a pass of its own after each layout: checked too, so this fails
    if Textual stops doing that and the mixin has nothing left to do.)"""
    from textual.containers import VerticalScroll

    class Plain(VerticalScroll, compat.LaidOutOnce):  # (as the transcript is)
        pass

    class Bars(VerticalScroll, compat.LaidOutOnce, compat.BarsInItsPass):
        pass

    plain = await _bar_passes(monkeypatch, Plain)
    assert any(alone for _, alone, _ in plain)
    assert any(left for layout, _, left in plain if layout)
    bars = await _bar_passes(monkeypatch, Bars)
    assert sum(layout for layout, _, _ in bars) >= 5
    assert not any(alone for _, alone, _ in bars)
    assert not any(left for layout, _, left in bars if layout)
