"""The app's themes: the shipped ones, the user's TOML files, and reloading those live.

    folder = ThemeFolder(user_themes_dir(), reserved=frozenset(THEMES)); folder.load()
    check_theme_name(name, source, folder.themes, folder.problems)   # before the app runs
    install(app, name, folder)       # in the app's __init__
    app.run_worker(watch(app, folder))   # once the first screen is drawn

`watch` reloads the folder whenever something under it changes: new and
edited themes are registered (the current one is applied again, so the screen
repaints), a broken file keeps its last good theme and shows one message naming
the file and the problem (once per problem, not once per save).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App

from themes import THEMES, register
from themes.user import Reload, ThemeFolder, user_themes_dir

if TYPE_CHECKING:
    from watchfiles import Change

__all__ = ["apply_reload", "install", "startup_problems", "user_folder", "watch"]

DEBOUNCE_MS = 300  # changes are gathered this long at most before the folder is read again
STEP_MS = 50  # a burst of changes ends after this long without one


def user_folder() -> ThemeFolder:
    """The user's theme folder, loaded (problems are in `.problems`)."""
    folder = ThemeFolder(user_themes_dir(), reserved=frozenset(THEMES))
    folder.load()
    return folder


def install(app: App[Any], name: str, folder: ThemeFolder) -> None:
    """Register the shipped and the user's themes with `app` and switch to `name`."""
    register(app)
    for theme in folder.themes.values():
        app.register_theme(theme)
    app.theme = name


def startup_problems(app: App[Any], folder: ThemeFolder) -> None:
    """One message for each user theme file that did not load."""
    for path, problem in folder.problems.items():
        notify_problem(app, f"{path}: {problem}")


def notify_problem(app: App[object], message: str) -> None:
    app.notify(message, title="theme not loaded", severity="error", timeout=12)


def apply_reload(app: App[object], reload: Reload) -> None:
    """Register what a reload found; repaint when the current theme is among it."""
    for theme in reload.changed:
        app.register_theme(theme)
    for name in reload.removed:
        if name != app.theme:  # the one on screen stays until another is chosen
            app.unregister_theme(name)
    for problem in reload.problems:
        notify_problem(app, problem)
    if any(theme.name == app.theme for theme in reload.changed):
        app.mutate_reactive(App.theme)  # same name, new colours: apply it again


def _watched(folder: Path) -> tuple[Path, bool] | None:
    """What to watch for `folder`: itself, or its parent (recursively) until it exists."""
    if folder.is_dir():
        return folder, False
    if folder.parent.is_dir():
        return folder.parent, True
    return None


async def watch(app: App[Any], folder: ThemeFolder) -> None:
    """Reload `folder` on every change of a `*.toml` in it, for the app's life."""
    from watchfiles import awatch  # loaded with the watch, after the first frame

    target = _watched(folder.folder)
    if target is None:
        return  # no bastion config folder yet: nothing to watch
    path, recursive = target

    def wanted(change: Change, changed: str) -> bool:
        where = Path(changed)
        return where == folder.folder or (where.parent == folder.folder and where.suffix == ".toml")

    async for _ in awatch(
        path,
        watch_filter=wanted,
        recursive=recursive,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
    ):
        apply_reload(app, folder.load())
