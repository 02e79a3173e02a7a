"""Themes: the shipped ones, user TOML files (good, broken, reloaded live), unknown names,
and no literal colour anywhere in the app's CSS or markup."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest
from textual._color_constants import COLOR_NAME_TO_RGB
from textual.color import Color

from runtime.model.errors import ConfigError
from runtime.setup.load import load_config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, run_settled, wait_for
from themes import THEMES, check_theme_name
from themes.user import ThemeFolder, parse_theme, user_themes_dir
from tui.app import BastionApp
from tui.cli import main
from tui.launch import chosen_theme
from tui.widgets import StatusBar
from tui.widgets.markdown import MarkdownText

ROOT = Path(__file__).resolve().parent.parent.parent

DUSK = """
name = "dusk"
dark = true
primary = "#88C0D0"
accent = "#EBCB8B"
foreground = "#D8DEE9"
background = "#2E3440"
surface = "#3B4252"
panel = "#434C5E"

[variables]
foreground-muted = "#A0A8B8"
input-selection-background = "#88C0D0 35%"
"""


def write_theme(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # one change event with the whole file, as an editor saves
    return path


# --- the TOML format ---------------------------------------------------------


def test_a_theme_file_defines_a_textual_theme():
    theme = parse_theme(DUSK, "ignored")
    assert theme.name == "dusk" and theme.dark is True
    assert theme.primary == "#88C0D0" and theme.background == "#2E3440"
    assert theme.variables["input-selection-background"] == "#88C0D0 35%"
    assert parse_theme('primary = "teal"', "from-file-name").name == "from-file-name"


@pytest.mark.parametrize(
    "text,problem",
    [
        ("primary = ", "invalid TOML"),
        ('primry = "#fff"', "unknown key 'primry'"),
        ('accent = "#fff"', "primary is required"),
        ('primary = "#12345"', "primary = '#12345' is not a colour"),
        ('primary = "#fff"\ndark = "yes"', "dark must be true or false"),
        ('primary = "#fff"\ntext_alpha = 2', "text_alpha must be a number from 0 to 1"),
        ('primary = "#fff"\n[variables]\nfoo = "nope"', "variables.foo = 'nope' is not a colour"),
        ('name = "a b"\nprimary = "#fff"', "name must be letters"),
    ],
)
def test_a_broken_theme_file_says_what_is_wrong(tmp_path, text, problem):
    folder = ThemeFolder(tmp_path, reserved=frozenset(THEMES))
    path = write_theme(tmp_path, "broken", text)
    reload = folder.load()
    assert folder.themes == {}
    assert len(reload.problems) == 1
    assert reload.problems[0].startswith(f"{path}: ") and problem in reload.problems[0]


def test_a_broken_edit_keeps_the_last_good_theme_and_is_reported_once(tmp_path):
    folder = ThemeFolder(tmp_path, reserved=frozenset(THEMES))
    path = write_theme(tmp_path, "dusk", DUSK)
    assert [t.name for t in folder.load().changed] == ["dusk"]
    write_theme(tmp_path, "dusk", "bogus = 1\n" + DUSK)
    first = folder.load()
    assert first.changed == [] and first.removed == []
    assert len(first.problems) == 1
    assert first.problems[0].startswith(
        f"{path}: unknown key 'bogus'; a theme takes accent, background,"
    )
    assert folder.themes["dusk"].primary == "#88C0D0"  # the last good one stays
    assert folder.load().problems == []  # the same problem is not reported again
    write_theme(tmp_path, "dusk", DUSK.replace("#88C0D0", "#FF0000"))
    fixed = folder.load()
    assert [t.primary for t in fixed.changed] == ["#FF0000"] and not folder.problems
    path.unlink()
    assert folder.load().removed == ["dusk"] and folder.themes == {}


def test_a_user_theme_may_not_take_a_shipped_or_taken_name(tmp_path):
    folder = ThemeFolder(tmp_path, reserved=frozenset(THEMES))
    write_theme(tmp_path, "a", 'name = "bastion-dark"\nprimary = "#fff"')
    first = write_theme(tmp_path, "b", 'name = "mine"\nprimary = "#fff"')
    write_theme(tmp_path, "c", 'name = "mine"\nprimary = "#000"')
    problems = folder.load().problems
    assert list(folder.themes) == ["mine"] and folder.themes["mine"].primary == "#fff"
    assert any("'bastion-dark' is a shipped theme's name" in p for p in problems)
    assert any(
        p.startswith(f"{tmp_path / 'c.toml'}: {first} already defines 'mine'") for p in problems
    )


# --- unknown names -----------------------------------------------------------


def test_an_unknown_theme_in_the_config_names_the_file_and_the_known_themes(tmp_path, trusted):
    trusted(tmp_path / "project")
    config_file = tmp_path / "project" / ".bastion" / "config.toml"
    config_file.parent.mkdir(parents=True)
    config_file.write_text('theme = "nope"\n')
    write_theme(user_themes_dir(), "dusk", DUSK)
    config = load_config(str(tmp_path / "project"))
    assert config.theme_source == str(config_file)
    with pytest.raises(ConfigError) as caught:
        chosen_theme(type("Opts", (), {"theme": None})(), config)
    text = str(caught.value)
    assert text.startswith(f"{config_file}: unknown theme 'nope' — known themes: ")
    for name in ("bastion-dark", "bastion-light", "bastion-high-contrast", "dusk", "nord"):
        assert name in text


def test_a_theme_file_that_did_not_load_is_named_when_its_theme_is_asked_for(tmp_path):
    folder = ThemeFolder(tmp_path, reserved=frozenset(THEMES))
    path = write_theme(tmp_path, "dusk", 'primary = "#12"')
    folder.load()
    with pytest.raises(ConfigError) as caught:
        check_theme_name("dusk", "--theme", folder.themes, folder.problems)
    assert caught.value.message == "--theme: unknown theme 'dusk'"
    assert caught.value.hint is not None and caught.value.hint.startswith(f"{path} did not load: ")


def test_bastion_theme_flag_with_an_unknown_name_exits_2_before_the_app(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BASTION_MODEL", "ollama/llama3.2")
    code = main(["--theme", "nope"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("bastion: --theme: unknown theme 'nope' — known themes: bastion-dark")
    assert not (tmp_path / "home" / "bastion.sqlite").exists() or "conversations" not in err


def test_the_app_refuses_an_unknown_theme(tmp_path):
    with pytest.raises(ConfigError, match="unknown theme 'no-such-theme'"):
        BastionApp(opener=_never, theme="no-such-theme")


async def _never():  # pragma: no cover - the app is never run
    raise AssertionError


# --- the app -------------------------------------------------------------------


async def test_the_shipped_themes_are_registered_and_chosen_by_name(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app(theme="bastion-high-contrast")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        assert app.theme == "bastion-high-contrast"
        assert set(THEMES) <= set(app.available_themes)


def _colours(svg: str) -> set[str]:
    return set(re.findall(r"#[0-9a-f]{6}", svg.lower()))


async def _screen_colours(harness_process: Any, start: str, switch_to: str | None) -> set[str]:
    proc = harness_process([{"text": "# Plan\n\n```python\nx = 1\n```\n\nDone **now**."}])
    app = proc.app(theme=start, first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        if switch_to is not None:
            app.theme = switch_to
        await pilot.pause(0.1)
        return _colours(app.export_screenshot())


@pytest.mark.parametrize("target", ["bastion-light", "bastion-high-contrast"])
async def test_switching_theme_live_repaints_everything(harness_process, target):
    """A screen switched from dark to `target` has exactly the colours of one started in it."""
    switched = await _screen_colours(harness_process, "bastion-dark", target)
    fresh = await _screen_colours(harness_process, target, None)
    dark = await _screen_colours(harness_process, "bastion-dark", None)
    assert switched == fresh
    assert THEMES["bastion-dark"].background.lower() in dark  # type: ignore[union-attr]
    assert THEMES["bastion-dark"].background.lower() not in switched  # type: ignore[union-attr]


async def test_markdown_headings_are_left_aligned(harness_process, tmp_path):
    turns = [ScriptedTurn(text="# Plan\n\nDone.")]
    proc = harness_process(ScriptedProvider(turns))
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        answer = app.query_one(MarkdownText)
        row = next(
            strip.text for strip in app.screen._compositor.render_strips() if "Plan" in strip.text
        )
        # at the answer's left margin (its padding), not in the middle of the row
        assert row.index("Plan") == answer.region.x + 1


def _toasts(app: BastionApp) -> list[str]:
    return [str(toast.render()) for toast in app.screen.query("Toast")]


async def test_user_themes_reload_when_their_file_changes(harness_process, tmp_path):
    folder = user_themes_dir()
    path = write_theme(folder, "dusk", DUSK)
    proc = harness_process(ScriptedProvider([]))
    app = proc.app(theme="dusk")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(app.ready.is_set, pilot)
        bar = app.query_one(StatusBar)
        assert app.current_theme.primary == "#88C0D0"
        before = bar.styles.background
        await pilot.pause(0.3)  # the watcher is running
        write_theme(folder, "dusk", DUSK.replace('panel = "#434C5E"', 'panel = "#804020"'))
        await wait_for(lambda: app.current_theme.panel == "#804020", pilot)
        await wait_for(lambda: bar.styles.background != before, pilot)
        shown, wanted = bar.styles.background.rgb, Color.parse("#804020").rgb
        assert all(abs(a - b) <= 1 for a, b in zip(shown, wanted, strict=True))
        # A broken save keeps the last good theme and says which file and why, once.
        write_theme(folder, "dusk", "primary_colour = 1\n" + DUSK)
        await wait_for(lambda: any("primary_colour" in t for t in _toasts(app)), pilot, timeout=10)
        assert app.current_theme.panel == "#804020"
        shown = [t for t in _toasts(app) if "primary_colour" in t]
        assert len(shown) == 1 and str(path) in shown[0].replace("\n", "")
        # A new file is a new theme, there to switch to.
        write_theme(folder, "dawn", 'primary = "#AA5500"\ndark = false')
        await wait_for(lambda: "dawn" in app.available_themes, pilot)


async def test_a_broken_theme_file_at_start_is_reported_once(harness_process, tmp_path):
    path = write_theme(user_themes_dir(), "broken", 'primary = "nope"')
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(lambda: bool(_toasts(app)), pilot)
        await pilot.pause(0.2)
        toasts = _toasts(app)
        assert len(toasts) == 1 and "is not a colour" in toasts[0]
        assert str(path) in toasts[0].replace("\n", "")
        assert app.theme == "bastion-dark"


# --- no literal colours ---------------------------------------------------------

COLOUR_NAMES = set(COLOR_NAME_TO_RGB) - {"transparent"}
HEX = re.compile(r"#[0-9a-fA-F]{3,8}\b")
DECLARATION = re.compile(r"[a-z-]+\s*:\s*([^;{}]+);")
MARKUP_TAG = re.compile(r"\[([^\[\]/\\][^\[\]]*)\]")


def _literal_colours(words: list[str]) -> list[str]:
    return [
        w for w in words if HEX.fullmatch(w) or w in COLOUR_NAMES or w.startswith(("rgb(", "hsl("))
    ]


def _code_and_css() -> list[tuple[str, str]]:
    """Every string literal of the app's modules and every .tcss file, with where it is."""
    found: list[tuple[str, str]] = []
    modules = [ROOT / "tui" / "app.py", ROOT / "tui" / "theming.py"]
    modules += sorted((ROOT / "tui" / "widgets").glob("*.py"))
    for module in modules:
        tokens = tokenize.generate_tokens(io.StringIO(module.read_text()).readline)
        for token in tokens:
            if token.type == tokenize.STRING:
                found.append((f"{module.name}:{token.start[0]}", token.string))
    for sheet in [*ROOT.joinpath("tui").glob("*.tcss"), *ROOT.joinpath("themes").glob("*.tcss")]:
        found.append((sheet.name, re.sub(r"/\*.*?\*/", "", sheet.read_text(), flags=re.S)))
    return found


def test_the_apps_css_and_markup_use_only_theme_variables():
    offending = []
    for where, text in _code_and_css():
        for value in DECLARATION.findall(text):
            offending += [(where, w) for w in _literal_colours(value.split())]
        for tag in MARKUP_TAG.findall(text):
            offending += [(where, w) for w in _literal_colours(tag.split())]
    assert offending == []


def test_the_colour_check_catches_literals():
    """The check above is not vacuous: it finds each kind of literal colour."""
    samples = ["color: #ff0000;", "background: red 20%;", "[b green]x[/]", "[rgb(1,2,3)]y[/]"]
    for sample in samples:
        words = [w for v in DECLARATION.findall(sample) for w in v.split()]
        words += [w for tag in MARKUP_TAG.findall(sample) for w in tag.split()]
        assert _literal_colours(words), sample
    assert len(_code_and_css()) > 50  # it reads the app's sources


async def test_a_themes_folder_made_while_the_app_runs_is_watched(harness_process, tmp_path):
    """With only $XDG_CONFIG_HOME/bastion there at start, a themes/ folder made later
    and a theme saved in it are picked up."""
    folder = user_themes_dir()
    folder.parent.mkdir(parents=True)
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.pause(0.3)  # the watcher is running
        write_theme(folder, "dawn", 'primary = "#AA5500"\ndark = false')
        await wait_for(lambda: "dawn" in app.available_themes, pilot)
        app.theme = "dawn"
        await pilot.pause()
        assert app.current_theme.primary == "#AA5500"
