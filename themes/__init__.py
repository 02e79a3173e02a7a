"""Bastion's Textual themes, loaded by name.

    from themes import register
    register(app)              # makes the shipped themes available
    app.theme = "bastion-dark"

Shipped: bastion-dark (the default), bastion-light and bastion-high-contrast.
Users add their own as TOML files (see `themes.user`). Colours live here and
only here: widgets refer to the theme's `$variables` ($primary, $accent,
$success, $warning, $error, $foreground-muted, $surface, ...), so switching
theme live recolours everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App
from textual.theme import BUILTIN_THEMES, Theme

from runtime.model.errors import ConfigError

__all__ = [
    "BASTION_DARK",
    "BASTION_HIGH_CONTRAST",
    "BASTION_LIGHT",
    "DEFAULT_THEME",
    "THEMES",
    "check_theme_name",
    "register",
]

BASTION_DARK = Theme(
    name="bastion-dark",
    primary="#7AA2F7",
    secondary="#BB9AF7",
    accent="#E0AF68",
    warning="#E0AF68",
    error="#F7768E",
    success="#9ECE6A",
    foreground="#C8D0E8",
    background="#11141C",
    surface="#161A24",
    panel="#1E2330",
    dark=True,
    variables={
        "input-cursor-background": "#C8D0E8",
        "input-selection-background": "#7AA2F7 35%",
        "footer-key-foreground": "#7AA2F7",
    },
)

BASTION_LIGHT = Theme(
    name="bastion-light",
    primary="#2F5FB3",
    secondary="#7A4FBF",
    accent="#A85F12",
    warning="#A86B00",
    error="#C62838",
    success="#2E7D32",
    foreground="#1F2328",
    background="#FAFAF7",
    surface="#F1F1EC",
    panel="#E5E6DF",
    dark=False,
    variables={
        "input-cursor-background": "#1F2328",
        "input-selection-background": "#2F5FB3 25%",
        "footer-key-foreground": "#2F5FB3",
    },
)

# Pure white on black, saturated accents, and muted text that is still bright
# (WCAG AAA, 7:1 or more, for every colour on the background).
BASTION_HIGH_CONTRAST = Theme(
    name="bastion-high-contrast",
    primary="#5FD7FF",
    secondary="#FF87FF",
    accent="#FFFF5F",
    warning="#FFD75F",
    error="#FF8787",
    success="#87FF87",
    foreground="#FFFFFF",
    background="#000000",
    surface="#1C1C1C",
    panel="#303030",
    dark=True,
    variables={
        "foreground-muted": "#D7D7D7",
        "text-muted": "#D7D7D7",
        "input-cursor-background": "#FFFFFF",
        "input-selection-background": "#5FD7FF 45%",
        "footer-key-foreground": "#5FD7FF",
        "block-cursor-background": "#5FD7FF",
        "block-cursor-foreground": "#000000",
    },
)

THEMES: dict[str, Theme] = {
    theme.name: theme for theme in (BASTION_DARK, BASTION_LIGHT, BASTION_HIGH_CONTRAST)
}
DEFAULT_THEME = BASTION_DARK.name


def register(app: App[Any]) -> None:
    """Register every Bastion theme with `app` (it can then switch to them by name)."""
    for theme in THEMES.values():
        app.register_theme(theme)


def check_theme_name(
    name: str, source: str, user: dict[str, Theme], problems: dict[Path, str] | None = None
) -> None:
    """ConfigError unless `name` is a shipped, user or Textual theme.

    `source` says what chose the name: a config file's path or `--theme`; the
    error names it and every known theme, and a user theme file that failed to
    load under that name is named with its problem.
    """
    if name in THEMES or name in user or name in BUILTIN_THEMES:
        return
    known = [*THEMES, *sorted(user)]
    hint = f"known themes: {', '.join(known)}; Textual's: {', '.join(sorted(BUILTIN_THEMES))}"
    for path, problem in (problems or {}).items():
        if path.stem == name:
            hint = f"{path} did not load: {problem}; {hint}"
    where = f"{source}: " if source else ""
    raise ConfigError(f"{where}unknown theme {name!r}", hint=hint)
