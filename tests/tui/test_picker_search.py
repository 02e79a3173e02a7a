"""The session picker searches the conversations' text (Harness.search) once a query
has 3 characters and typing pauses; shorter queries filter titles, ids and directories.
Every test runs the picker over a real store holding several answered sessions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from textual.content import Content

from runtime import Harness, SearchHit
from runtime.ipc.local import local_client
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.tui.conftest import wait_for
from tui.resume import PickerApp
from tui.widgets.picker import SessionPicker

SESSIONS = [  # title, prompt, answer
    ("fix the parser", "the parser chokes on tabs", "Replaced the tokenizer: the walrus operator parses."),
    ("release notes", "write notes for 0.4", "Drafted them, with a word on walruses and the cache."),
    ("walrus docs", "document the new operator", "Done."),
    ("tidy CI", "make CI faster", "Cached the pip downloads."),
]  # fmt: skip


async def stored(tmp_path: Path) -> tuple[Harness, dict[str, str]]:
    """A store with SESSIONS answered, oldest first; the harness and title -> id."""
    provider = ScriptedProvider([ScriptedTurn(text=answer) for _, _, answer in SESSIONS])
    harness = await open_harness(tmp_path, provider)
    ids: dict[str, str] = {}
    for title, prompt, _ in SESSIONS:
        conv = await harness.create_conversation(
            str(tmp_path / "here"), settings={"model": "scripted/x"}, title=title
        )
        await harness.drive(conv.id, interactive=False)
        item = await harness.submit(conv.id, prompt)
        await harness.wait(item.id, conv.id)
        await harness.release(conv.id)
        ids[title] = conv.id
    return harness, ids


def titles(screen: SessionPicker) -> list[str]:
    return [s.conversation.title for s in screen.shown]


def row(screen: SessionPicker, title: str) -> str:
    """The row of the session titled `title` as it reads on screen."""
    index = titles(screen).index(title)
    prompt = screen.query_one("#picker-list").get_option_at_index(index).prompt
    return Content.from_markup(str(prompt)).plain


def count_line(screen: SessionPicker) -> str:
    return str(screen.query_one("#picker-count").render())


async def test_three_characters_search_the_text_and_show_the_snippets(tmp_path: Path) -> None:
    harness, ids = await stored(tmp_path)
    try:
        picker = await SessionPicker.load(harness, str(tmp_path / "here"))
        app = PickerApp(picker.sessions, str(tmp_path / "here"), search=harness.search)
        async with app.run_test(size=(110, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, SessionPicker)
            await pilot.press("w", "a")  # two characters: the title filter only
            await pilot.pause(SessionPicker.DEBOUNCE * 2)
            assert titles(screen) == ["walrus docs"] and screen.searched is None
            await pilot.press("l")
            await wait_for(lambda: screen.searched == "wal", pilot)
            # the title match first, then the sessions whose text holds walrus/walruses
            assert titles(screen)[0] == "walrus docs"
            assert sorted(titles(screen)[1:]) == ["fix the parser", "release notes"]
            assert set(screen.hits) == {ids["fix the parser"], ids["release notes"]}
            assert "[walrus]" in screen.hits[ids["fix the parser"]].marked()
            assert "the walrus operator parses" in row(screen, "fix the parser")
            assert "walruses" in row(screen, "release notes")
            assert "walrus operator" not in row(screen, "walrus docs")  # no text hit
            assert count_line(screen).endswith("· 2 by their text")
            await pilot.press("backspace")  # below three again: back to the titles
            assert titles(screen) == ["walrus docs"] and screen.searched is None
            await pilot.press(*"rus operator")
            await wait_for(lambda: screen.searched == "warus operator", pilot)
            assert titles(screen) == []  # "warus": a typo; nothing anywhere
            assert "no session matches 'warus operator'" in count_line(screen)
            for _ in range(len("rus operator")):
                await pilot.press("backspace")
            await pilot.press(*"lrus operator")
            await wait_for(lambda: screen.searched == "walrus operator", pilot)
            assert titles(screen) == ["fix the parser"]  # operator: in its answer only
            await pilot.press("enter")
        assert app.return_value == ids["fix the parser"]
    finally:
        await harness.close()


async def test_typing_is_debounced_into_one_search(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(SessionPicker, "DEBOUNCE", 1.0)  # far longer than nine key presses
    harness, ids = await stored(tmp_path)
    asked: list[str] = []

    async def search(query: str) -> Sequence[SearchHit]:
        asked.append(query)
        return await harness.search(query)

    try:
        picker = await SessionPicker.load(harness, str(tmp_path / "here"))
        app = PickerApp(picker.sessions, str(tmp_path / "here"), search=search)
        async with app.run_test(size=(110, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, SessionPicker)
            await pilot.press(*"downloads")
            assert titles(screen) == [] and asked == []  # nothing in the titles, yet
            assert count_line(screen).endswith("· searching the text…")
            await wait_for(lambda: screen.searched == "downloads", pilot)
            assert asked == ["downloads"]
            assert titles(screen) == ["tidy CI"]
            assert "[downloads]" in screen.hits[ids["tidy CI"]].marked()
    finally:
        await harness.close()


async def test_a_session_found_by_its_text_need_not_be_listed(tmp_path: Path) -> None:
    harness, ids = await stored(tmp_path)
    try:
        listed = [
            s
            for s in await harness.session_summaries()
            if s.conversation.id != ids["release notes"]
        ]  # as if it were older than the newest sessions the picker lists
        app = PickerApp(listed, str(tmp_path / "here"), search=harness.search)
        async with app.run_test(size=(110, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, SessionPicker)
            await pilot.press(*"notes OR tokenizer")  # FTS5 syntax works too
            await wait_for(lambda: screen.searched == "notes OR tokenizer", pilot)
            assert sorted(titles(screen)) == ["fix the parser", "release notes"]
            assert "entries" not in row(screen, "release notes")  # its size is not known
            assert "2 entries" in row(screen, "fix the parser")
            await pilot.press(*["down"] * titles(screen).index("release notes"), "enter")
        assert app.return_value == ids["release notes"]
    finally:
        await harness.close()


async def test_a_failed_search_is_said_and_the_title_filter_goes_on(tmp_path: Path) -> None:
    harness, _ = await stored(tmp_path)
    sessions = await harness.session_summaries()
    await harness.close()  # the store is closed: every search fails
    app = PickerApp(sessions, str(tmp_path / "here"), search=harness.search)
    async with app.run_test(size=(110, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionPicker)
        await pilot.press(*"walrus")
        await wait_for(lambda: "search failed" in count_line(screen), pilot)
        assert "the store is closed" in count_line(screen)
        assert titles(screen) == ["walrus docs"] and screen.searched is None


async def test_loaded_from_a_client_it_searches_through_the_protocol(tmp_path: Path) -> None:
    inner, ids = await stored(tmp_path)
    harness = await local_client(inner)
    try:
        picker = await SessionPicker.load(harness, str(tmp_path / "here"))
        assert picker.search is not None
        hits: Any = await picker.search("tokenizer")
        assert [h.conversation.id for h in hits] == [ids["fix the parser"]]
    finally:
        await harness.close()


@pytest.mark.parametrize("query", ["", "wa", "walrus"])
async def test_without_a_search_the_picker_filters_titles_only(tmp_path: Path, query) -> None:
    harness, _ = await stored(tmp_path)
    try:
        app = PickerApp(await harness.session_summaries(), str(tmp_path / "here"))
        async with app.run_test(size=(110, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, SessionPicker)
            await pilot.press(*query)
            await pilot.pause(SessionPicker.DEBOUNCE * 2)
            assert screen.searched is None and screen.hits == {}
            expected = ["walrus docs"] if query else [t for t, _, _ in reversed(SESSIONS)]
            assert titles(screen) == expected
    finally:
        await harness.close()
