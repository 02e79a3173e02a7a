"""Bastion's Textual themes, loaded by name.

    from themes import register
    register(app)              # makes "bastion-dark" and "bastion-light" available
    app.theme = "bastion-dark"

Colours live here and only here: widgets refer to the theme's `$variables`
($primary, $accent, $success, $warning, $error, $text-muted, $surface, ...),
so switching theme live recolours everything.
"""

from __future__ import annotations

from textual.app import App
from textual.theme import Theme

__all__ = ["BASTION_DARK", "BASTION_LIGHT", "DEFAULT_THEME", "THEMES", "register"]

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

THEMES: dict[str, Theme] = {theme.name: theme for theme in (BASTION_DARK, BASTION_LIGHT)}
DEFAULT_THEME = BASTION_DARK.name


def register(app: App[object]) -> None:
    """Register every Bastion theme with `app` (it can then switch to them by name)."""
    for theme in THEMES.values():
        app.register_theme(theme)
