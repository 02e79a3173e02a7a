"""User themes: `$XDG_CONFIG_HOME/bastion/themes/*.toml`, one Textual `Theme` a file.

    name = "dusk"              # optional: the file's name without .toml
    dark = true                # optional, default true
    primary = "#88C0D0"        # required; the rest are optional
    secondary = "#B48EAD"
    accent = "#EBCB8B"
    warning = "#EBCB8B"
    error = "#BF616A"
    success = "#A3BE8C"
    foreground = "#D8DEE9"
    background = "#2E3440"
    surface = "#3B4252"
    panel = "#434C5E"
    boost = "#4C566A"
    luminosity_spread = 0.15   # optional numbers, as in textual.theme.Theme
    text_alpha = 0.95

    [variables]                # optional: any Textual CSS variable, e.g.
    foreground-muted = "#A0A8B8"
    input-selection-background = "#88C0D0 35%"

Colours are what Textual's `Color.parse` reads (#RGB, #RRGGBB, rgb(...), hsl(...),
names); a variable may add an alpha percentage (`"#88C0D0 35%"`).

`ThemeFolder.load()` reads the folder again and says what changed. A file that
does not load (bad TOML, an unknown key, a bad colour, a name a shipped theme
or another file already has) is a problem naming the file and what is wrong;
the theme it defined last time it loaded stays, so a half-saved edit never
takes a theme away.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from textual.color import Color, ColorParseError
from textual.theme import Theme

__all__ = ["Reload", "ThemeFolder", "parse_theme", "user_themes_dir"]

COLOURS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
NUMBERS = ("luminosity_spread", "text_alpha")
KEYS = {"name", "dark", "variables", *COLOURS, *NUMBERS}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
VARIABLE = re.compile(r"[a-z][a-z0-9-]*")
ALPHA = re.compile(r"(.+?)\s+(\d{1,3})%")
STYLE_WORDS = {"bold", "italic", "underline", "reverse", "strike", "dim", "none", "not"}


def user_themes_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/bastion/themes` (XDG_CONFIG_HOME defaults to ~/.config)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "bastion" / "themes"


class ThemeFileError(ValueError):
    """What is wrong with one theme file (the message says what to fix)."""


def _colour(key: str, value: Any, *, alpha: bool = False) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f'{key} must be a colour string such as "#88C0D0", not {value!r}')
    text = value.strip()
    cut = ALPHA.fullmatch(text) if alpha else None
    if cut is not None:
        text = cut.group(1)
        if int(cut.group(2)) > 100:
            raise ThemeFileError(f"{key}: alpha {cut.group(2)}% is more than 100%")
    if alpha and text in ("transparent", "auto"):
        return value
    try:
        Color.parse(text)
    except ColorParseError:
        raise ThemeFileError(
            f"{key} = {value!r} is not a colour (use #RRGGBB, rgb(...), hsl(...) or a name)"
        ) from None
    return value


def _variables(table: Any) -> dict[str, str]:
    if not isinstance(table, dict):
        raise ThemeFileError("variables must be a table of strings, written as [variables]")
    found: dict[str, str] = {}
    for key, value in table.items():
        if not VARIABLE.fullmatch(key):
            raise ThemeFileError(f"variables.{key} is not a CSS variable name (a-z, 0-9 and -)")
        if key.endswith("text-style"):
            if not isinstance(value, str) or not set(value.split()) <= STYLE_WORDS:
                raise ThemeFileError(f'variables.{key} must be text styles such as "bold"')
            found[key] = value
        else:
            found[key] = _colour(f"variables.{key}", value, alpha=True)
    return found


def parse_theme(text: str, default_name: str) -> Theme:
    """The Theme a file's TOML text defines; ThemeFileError says what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(f"invalid TOML ({exc})") from None
    except RecursionError:
        raise ThemeFileError("it nests arrays or tables too deeply to be a theme") from None
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ThemeFileError(f"unknown key {unknown[0]!r}; a theme takes {', '.join(sorted(KEYS))}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ThemeFileError(f"name must be letters, digits, '-', '_' or '.', not {name!r}")
    if "primary" not in data:
        raise ThemeFileError('primary is required, for example primary = "#88C0D0"')
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"dark must be true or false, not {dark!r}")
    colours = {key: _colour(key, data[key]) for key in COLOURS if key in data}
    numbers: dict[str, float] = {}
    for key in NUMBERS:
        if key in data:
            value = data[key]
            if type(value) not in (int, float) or not 0 <= value <= 1:
                raise ThemeFileError(f"{key} must be a number from 0 to 1, not {value!r}")
            numbers[key] = float(value)
    variables = _variables(data.get("variables", {}))
    theme = Theme(name=name, dark=dark, variables=variables, **colours, **numbers)  # type: ignore[arg-type]
    try:
        theme.to_color_system().generate()
    except Exception as exc:  # Textual's own check of the colours together
        raise ThemeFileError(f"Textual cannot build a theme from it: {exc}") from None
    return theme


class Reload(msgspec.Struct):
    """What one `ThemeFolder.load()` found changed."""

    # New or edited themes, to register.
    changed: list[Theme] = msgspec.field(default_factory=list)
    removed: list[str] = msgspec.field(default_factory=list)  # names whose file is gone
    # "FILE: what is wrong", new ones only.
    problems: list[str] = msgspec.field(default_factory=list)


class ThemeFolder:
    """The user's theme files and the last good theme each defined."""

    def __init__(self, folder: Path, reserved: frozenset[str] = frozenset()) -> None:
        self.folder = folder
        self.reserved = reserved  # names a file may not take (the shipped themes)
        self.by_file: dict[Path, Theme] = {}  # the last good theme of each file
        self.problems: dict[Path, str] = {}  # each file's current problem

    @property
    def themes(self) -> dict[str, Theme]:
        return {theme.name: theme for theme in self.by_file.values()}

    def load(self) -> Reload:
        """Read every `*.toml` in the folder again; what changed since the last load."""
        files = sorted(self.folder.glob("*.toml")) if self.folder.is_dir() else []
        reload = Reload()
        owners: dict[str, Path] = {}
        for path in files:
            try:
                theme = self._read(path, owners)
            except ThemeFileError as exc:
                if self.problems.get(path) != str(exc):
                    reload.problems.append(f"{path}: {exc}")
                self.problems[path] = str(exc)
                if path in self.by_file:
                    owners[self.by_file[path].name] = path
                continue
            self.problems.pop(path, None)
            owners[theme.name] = path
            old = self.by_file.get(path)
            if old != theme:
                if old is not None and old.name != theme.name:
                    reload.removed.append(old.name)
                self.by_file[path] = theme
                reload.changed.append(theme)
        for path in [p for p in self.by_file if p not in files]:
            reload.removed.append(self.by_file.pop(path).name)
        for path in [p for p in self.problems if p not in files]:
            del self.problems[path]
        live = {t.name for t in self.by_file.values()}
        reload.removed = [name for name in reload.removed if name not in live]
        return reload

    def _read(self, path: Path, owners: dict[str, Path]) -> Theme:
        from runtime import read_user_file
        from runtime.model.errors import ConfigError

        try:  # a symlink the user made is followed; a FIFO or device is refused at once
            read = read_user_file(path)
        except ConfigError as exc:
            raise ThemeFileError(exc.message.rpartition(": ")[2]) from None
        if read is None:
            raise ThemeFileError("it was removed while being read")
        if read.cut:
            raise ThemeFileError(f"it is {read.size:,} bytes; a theme file is at most 256 KiB")
        raw = read.data
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ThemeFileError("it is not UTF-8 text; save it as UTF-8") from None
        theme = parse_theme(text, path.stem)
        if theme.name in self.reserved:
            raise ThemeFileError(f"{theme.name!r} is a shipped theme's name; choose another")
        if theme.name in owners:
            raise ThemeFileError(f"{owners[theme.name]} already defines {theme.name!r}")
        return theme
