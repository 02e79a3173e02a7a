"""The session picker: ordering, filtering, Enter and Esc; `-r` without an id."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from textual.widgets import OptionList

from runtime import Harness, SessionSummary
from runtime.model.records import Conversation
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.tui.conftest import wait_for
from tui import cli
from tui.resume import PickerApp
from tui.sessionlist import age, choose_numbered, filter_sessions, order_sessions
from tui.widgets.picker import SessionPicker


def summary(cid: str, title: str, cwd: str, updated: float, entries: int = 2) -> SessionSummary:
    return SessionSummary(Conversation(cid, title, cwd, {}, 0.0, updated), entries)


SESSIONS = [
    summary("0192aaaa-0000-7000-8000-000000000001", "fix the parser", "/w/here", 100.0),
    summary("0192bbbb-0000-7000-8000-000000000002", "write release notes", "/w/other", 300.0),
    summary("0192cccc-0000-7000-8000-000000000003", "Parser benchmarks", "/w/here", 200.0),
    summary("0192dddd-0000-7000-8000-000000000004", "tidy CI", "/w/other", 50.0),
]


def titles(sessions: list[SessionSummary]) -> list[str]:
    return [s.conversation.title for s in sessions]


def test_this_directory_first_then_the_others_newest_first() -> None:
    assert titles(order_sessions(SESSIONS, "/w/here")) == [
        "Parser benchmarks",
        "fix the parser",
        "write release notes",
        "tidy CI",
    ]


def test_filter_by_words_then_by_letters_in_order() -> None:
    ordered = order_sessions(SESSIONS, "/w/here")
    assert titles(filter_sessions(ordered, "PARSER")) == ["Parser benchmarks", "fix the parser"]
    assert titles(filter_sessions(ordered, "parser fix")) == ["fix the parser"]
    assert titles(filter_sessions(ordered, "0192dddd")) == ["tidy CI"]  # the id
    assert titles(filter_sessions(ordered, "other")) == ["write release notes", "tidy CI"]
    assert titles(filter_sessions(ordered, "wrn")) == ["write release notes"]  # letters
    assert filter_sessions(ordered, "zzz") == []
    assert filter_sessions(ordered, "  ") == ordered


def test_age() -> None:
    assert age(1000.0, 1030.0) == "just now"
    assert age(1000.0, 1000.0 + 5 * 60) == "5m ago"
    assert age(1000.0, 1000.0 + 3 * 3600) == "3h ago"
    assert age(1000.0, 1000.0 + 2 * 86400) == "2d ago"


async def seed(harness: Harness, cwd: str, title: str, answered: bool = False) -> str:
    """A stored conversation with one prompt: admitted only, or answered (two entries)."""
    conv = await harness.create_conversation(cwd, settings={"model": "scripted/x"}, title=title)
    if answered:
        await harness.drive(conv.id, interactive=False)
    item = await harness.submit(conv.id, f"about {title}")
    if answered:
        await harness.wait(item.id, conv.id)
        await harness.release(conv.id)
    return conv.id


async def test_picker_filters_and_enter_returns_the_highlighted_id(tmp_path: Path) -> None:
    harness = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="done")]))
    try:
        here, there = str(tmp_path / "here"), str(tmp_path / "there")
        old = await seed(harness, here, "refactor the loader")
        other = await seed(harness, there, "loader docs", answered=True)
        new = await seed(harness, here, "add a cache")
        await harness.create_conversation(here, title="never used")  # no entries: not listed
        picker = await SessionPicker.load(harness, here)
    finally:
        await harness.close()
    assert [s.conversation.id for s in picker.sessions] == [new, old, other]
    assert [s.entries for s in picker.sessions] == [1, 1, 2]
    app = PickerApp(picker.sessions, here)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionPicker)
        assert titles(screen.shown) == ["add a cache", "refactor the loader", "loader docs"]
        await pilot.press(*"loader")
        assert titles(screen.shown) == ["refactor the loader", "loader docs"]
        await pilot.press("down", "enter")
    assert app.return_value == other


async def test_escape_cancels(tmp_path: Path) -> None:
    app = PickerApp(SESSIONS, "/w/here")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*"tidy", "escape")
    assert app.return_value is None


async def test_a_filter_matching_nothing_says_so_and_enter_does_nothing(tmp_path: Path) -> None:
    app = PickerApp(SESSIONS, "/w/here")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*"zzz", "enter")
        await pilot.pause(0.05)
        assert app.is_running
        assert "no session matches 'zzz'" in str(app.screen.query_one("#picker-count").render())
        await pilot.press("escape")
    assert app.return_value is None


async def test_pushed_from_a_worker_it_returns_the_choice(tmp_path: Path) -> None:
    """The entry point other screens use: `await app.push_screen_wait(SessionPicker(...))`."""
    from textual.app import App

    chosen: list[str | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.run_worker(self.pick())

        async def pick(self) -> None:
            chosen.append(await self.push_screen_wait(SessionPicker(SESSIONS, "/w/here")))

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: isinstance(app.screen, SessionPicker), pilot)
        await pilot.press(*"notes", "enter")
        await wait_for(lambda: bool(chosen), pilot)
    assert chosen == ["0192bbbb-0000-7000-8000-000000000002"]


async def test_plain_mode_numbered_list(tmp_path: Path, monkeypatch) -> None:
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    monkeypatch.chdir(tmp_path)
    try:
        first = await seed(harness, str(tmp_path), "first task")
        second = await seed(harness, str(tmp_path / "elsewhere"), "second task")
        lines: list[str] = []
        answers = iter(["9", "x", "2"])

        async def ask(prompt: str) -> str:
            lines.append(prompt)
            return next(answers)

        assert await choose_numbered(harness, ask, lines.append) == second
        assert lines[0].startswith("  1. first task  · just now · 1 entries")
        assert lines[1].startswith("  2. second task") and lines[1].endswith("elsewhere)")
        assert lines.count("type a number from 1 to 2, or press Enter to cancel") == 2

        async def enter(prompt: str) -> str:
            return ""

        assert await choose_numbered(harness, enter, lines.append) is None
        assert first
    finally:
        await harness.close()


def test_resume_without_an_id_parses_and_print_mode_refuses_it(capsys) -> None:
    opts = cli.main_parser().parse_args(["-r"])
    assert opts.resume == ""
    assert cli.main_parser().parse_args(["-r", "abc"]).resume == "abc"
    assert cli.main(["-p", "-r"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "cannot show the session picker" in err and "-r ID" in err


@pytest.mark.parametrize("plain", [False, True])
def test_resume_without_an_id_and_no_sessions_says_so(plain, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    from tui import launch
    from tui import plain as plain_mode

    opts = argparse.Namespace(
        prompt=None,
        model="openai/test",
        approval_mode=None,
        session_id=None,
        continue_=False,
        resume="",
        plain=plain,
        request_key=None,
    )
    assert (plain_mode if plain else launch).run(opts) == 0
    assert "no sessions to resume yet" in capsys.readouterr().out


@pytest.mark.parametrize("plain", [False, True])
def test_resume_with_an_unknown_id_is_one_clear_line(plain, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    from tui import launch
    from tui import plain as plain_mode

    monkeypatch.setattr(launch, "terminal_here", lambda: True)  # (as from a terminal)

    unknown = "0192f7a4-6c1e-7d2a-9b3e-000000000000"
    opts = argparse.Namespace(
        prompt=None,
        model="openai/test",
        approval_mode=None,
        session_id=None,
        continue_=False,
        resume=unknown,
        plain=plain,
        request_key=None,
    )
    assert (plain_mode if plain else launch).run(opts) == 2
    err = capsys.readouterr().err
    assert err == f"bastion: no conversation {unknown} — list them with `bastion sessions --all`\n"


async def test_rows_show_id_prefixes_unique_among_every_stored_session(tmp_path: Path) -> None:
    """Sessions made in the same minute share their first 8 hex digits: each row shows
    as much of its id as makes it unique, among every stored session (a session with
    no entries is not listed, yet its id still counts)."""
    a, b = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e", "0192f7a4-6c1e-7f00-8b3e-5f6a7b8c9d0e"
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    try:
        for conv_id, title in ((a, "alpha"), (b, "bravo")):
            conv = await harness.create_conversation(
                str(tmp_path),
                settings={"model": "scripted/x"},
                title=title,
                conversation_id=conv_id,
            )
            await harness.submit(conv.id, f"about {title}")
        await harness.create_conversation(
            str(tmp_path), conversation_id="0192f7a4-6c1e-7d2a-0000-000000000000"
        )
        picker = await SessionPicker.load(harness, str(tmp_path))
    finally:
        await harness.close()
    app = PickerApp(picker.sessions, str(tmp_path), short=picker.short)
    async with app.run_test(size=(100, 30)):
        options = app.screen.query_one(OptionList)
        rows = [str(options.get_option_at_index(n).prompt) for n in range(2)]
    assert "0192f7a4-6c1e-7f" in rows[0] and "0192f7a4-6c1e-7f0" not in rows[0]
    assert "0192f7a4-6c1e-7d2a-9" in rows[1]
