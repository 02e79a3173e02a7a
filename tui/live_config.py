"""The app following config.toml edits (runtime.setup.watch.ConfigWatcher).

A change to `theme` recolours the app at once. `approval_mode` and `model`
become this session's from its next run, unless a flag set them for this
invocation (a flag wins over the config, as at start), and `model` only
while the conversation has no entries yet (a stored conversation keeps its
model, as at start). A broken edit changes nothing and says which file and
key are wrong; fixing it says the config applies again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from runtime.model.errors import BastionError

if TYPE_CHECKING:  # the app imports this before the harness's modules load
    from runtime import ConfigChange, ConfigWatcher, ConversationView, HarnessClient


class ConfigHost(Protocol):
    """What following the config uses of the app (tui.app.BastionApp)."""

    harness: HarnessClient | None
    conversation_id: str
    view: ConversationView | None
    theme: str

    @property
    def available_themes(self) -> Mapping[str, Any]: ...

    def run_worker(self, work: Any, *, group: str = ...) -> Any: ...

    def notify(
        self, message: str, *, title: str = ..., severity: Any = ..., timeout: float | None = ...
    ) -> None: ...

    def query_one(self, selector: Any) -> Any: ...

    async def show(self, view: ConversationView) -> None: ...


__all__ = ["LiveConfig"]


class LiveConfig:
    """Applies each `ConfigChange` of the watcher `make_watcher()` returns to `app`; `pinned`
    names the settings given by flags ("model", "approval_mode"), which the config does not
    override. The watcher is made when `run` starts (after the first frame: watchfiles is
    imported then, not before the app is drawn)."""

    def __init__(
        self, app: ConfigHost, make_watcher: Callable[[], ConfigWatcher], pinned: Collection[str]
    ) -> None:
        self.app = app
        self.make_watcher = make_watcher
        self.watcher: ConfigWatcher | None = None
        self.pinned = frozenset(pinned)
        self.applied: list[ConfigChange] = []  # what was applied, in order (for tests)

    async def run(self) -> None:
        """Watch until the app's worker is cancelled."""
        self.watcher = watcher = self.make_watcher()
        unsubscribe = watcher.subscribe(self._changed)
        try:
            async with watcher:
                await asyncio.Event().wait()  # until the worker is cancelled (the app exits)
        finally:
            unsubscribe()

    def _changed(self, change: ConfigChange) -> None:
        self.app.run_worker(self.apply(change), group="config")

    async def apply(self, change: ConfigChange) -> None:
        app = self.app
        if change.error is not None:
            app.notify(
                str(change.error),
                title="config not applied: keeping the last good one",
                severity="error",
                timeout=10,
            )
            self.applied.append(change)
            return
        config = change.config
        notes: list[str] = []
        from tui.widgets import StatusBar

        status = app.query_one(StatusBar)
        status.catalog = config.model_info  # context windows from the [models] tables
        if "theme" in change.changed:
            if config.theme in app.available_themes:  # shipped, Textual's or the user's
                app.theme = config.theme
                notes.append(f"theme {config.theme}")
            else:
                known = ", ".join(sorted(app.available_themes))
                app.notify(f"unknown theme {config.theme!r}; known: {known}", severity="warning")
        defaults: dict[str, Any] = {}
        if "approval_mode" in change.changed and "approval_mode" not in self.pinned:
            defaults["approval_mode"] = config.approval_mode.value
        new_conversation = app.view is None or not app.view.settled
        if "model" in change.changed and "model" not in self.pinned and new_conversation:
            defaults["model"] = config.model
        if defaults and app.harness is not None:
            try:
                await app.harness.set_defaults(app.conversation_id, **defaults)
            except BastionError as exc:
                app.notify(str(exc), title="config not applied", severity="error")
                self.applied.append(change)
                return
            notes.extend(f"{key.replace('_', ' ')} {value}" for key, value in defaults.items())
            if "model" in defaults:  # the status line names the conversation's model
                await app.show(await app.harness.snapshot(app.conversation_id))
        if notes or change.recovered:
            app.notify(", ".join(notes) or "the config is valid again", title="config reloaded")
        self.applied.append(change)
