"""Live configuration: the config files are watched and re-read when they change.

    watcher = ConfigWatcher(cwd)                      # reads the files once, now
    unsubscribe = watcher.subscribe(on_change)        # on_change(ConfigChange)
    async with watcher:                               # watching until the block ends
        ...

The files are those `load_config` reads: `$XDG_CONFIG_HOME/bastion/config.toml`
and `<cwd>/.bastion/config.toml`. Their folders are watched with watchfiles
(not the files, which editors replace rather than rewrite; nor the whole tree:
only the folder of each file, or the nearest one that exists while it does not,
so creating `.bastion/` and then its config.toml is seen too).

On a change the files are read again, and the model they name must be
PROVIDER/NAME with a known provider (a missing key is left to when the model
is used: a flag may pick another).
A config that loads is the new `current` one and subscribers get a
`ConfigChange` with it and the names of the settings that changed. A broken
edit changes nothing: `current` stays the last good config and subscribers get
a `ConfigChange` whose `error` is the ConfigError, naming the file and the key
(or the TOML line) and what it should hold. When the files are fixed, the next
change reports the good config again (with `recovered` set).

Subscribers are called on the event loop the watcher runs on; a subscriber
that raises is logged and does not stop the others or the watching.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec
import watchfiles

from runtime.model.errors import ConfigError
from runtime.setup.load import Config, load_config, user_config_path

__all__ = ["ConfigChange", "ConfigWatcher"]

log = logging.getLogger(__name__)


class ConfigChange(msgspec.Struct, frozen=True):
    """What a re-read of the config files found.

    `config` is the config in force afterwards (the new one, or the last good one
    when `error` is set); `changed` names the settings whose value changed
    ("model", "approval_mode", "theme", ...); `recovered` is true for the first
    good read after an error.
    """

    config: Config
    changed: frozenset[str] = msgspec.field(default_factory=frozenset)
    error: ConfigError | None = None
    recovered: bool = False


Subscriber = Callable[[ConfigChange], None]


class ConfigWatcher:
    """Watches the config files of `cwd`; see the module docstring."""

    def __init__(
        self,
        cwd: str,
        env: Mapping[str, str] | None = None,
        *,
        initial: Config | None = None,
        step_ms: int = 50,
    ) -> None:
        self.cwd = cwd
        self._env = dict(os.environ if env is None else env)
        self.current = initial if initial is not None else load_config(cwd, self._env)
        self.error: ConfigError | None = None
        self._subscribers: list[Subscriber] = []
        self._step_ms = step_ms
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self.watching = asyncio.Event()  # set while the folders are watched

    @property
    def paths(self) -> tuple[Path, Path]:
        """The config files, user first (later wins)."""
        return user_config_path(self._env), Path(self.cwd) / ".bastion" / "config.toml"

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(change)` after each re-read; returns the unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    # --- reading ------------------------------------------------------------

    async def reload(self) -> ConfigChange | None:
        """Read the files now; tell subscribers and return the change, or None if none."""
        try:
            config = load_config(self.cwd, self._env)
            self._check_model(config)
        except ConfigError as exc:
            if self.error is not None and self.error.message == exc.message:
                return None  # the same problem, reported already
            self.error = exc
            change = ConfigChange(self.current, error=exc)
        else:
            recovered = self.error is not None
            changed = _changed(self.current, config)
            if not changed and not recovered:
                return None
            self.current, self.error = config, None
            change = ConfigChange(config, changed, recovered=recovered)
        self._publish(change)
        return change

    def _check_model(self, config: Config) -> None:
        """The configured model must name a known provider (keys are checked when it is
        used: a flag may pick another model), or the file that set it is named."""
        from runtime.providers import BUILTIN_PREFIXES  # (not the registry: it loads httpx)

        prefix, slash, name = config.model.strip().partition("/")
        if slash and prefix and name and (prefix in BUILTIN_PREFIXES or prefix in config.providers):
            return
        known = ", ".join(f"{p}/" for p in (*BUILTIN_PREFIXES, *sorted(config.providers)))
        raise ConfigError(
            f"{self._model_source(config)}: model {config.model!r} is not PROVIDER/NAME with "
            "a known provider",
            hint=f'for example model = "openai/gpt-4.1"; providers: {known}',
        )

    def _model_source(self, config: Config) -> str:
        if self._env.get("BASTION_MODEL"):
            return "BASTION_MODEL"
        return config.model_source or "the default model"

    def _publish(self, change: ConfigChange) -> None:
        for callback in list(self._subscribers):
            try:
                callback(change)
            except Exception:
                log.exception("a config subscriber failed")

    # --- watching -------------------------------------------------------------

    def _folders(self) -> list[Path]:
        """For each file, its folder, or the nearest existing folder above it."""
        folders: list[Path] = []
        for path in self.paths:
            folder = path.parent
            while not folder.is_dir() and folder != folder.parent:
                folder = folder.parent
            if folder not in folders:
                folders.append(folder)
        return folders

    def _relevant(self, _change: watchfiles.Change, path: str) -> bool:
        """A config file, or a folder on the way to one (created or removed)."""
        changed = Path(path)
        return any(changed == p or changed in p.parents for p in self.paths)

    async def _watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            folders = self._folders()
            restart = False
            async for changes in watchfiles.awatch(
                *folders,
                watch_filter=self._relevant,
                step=self._step_ms,
                debounce=1000,
                stop_event=stop,
                recursive=False,
                rust_timeout=500,
                yield_on_timeout=True,
            ):
                if not self.watching.is_set() or changes:
                    # The first yield (a timeout) says the watch is in place: read once
                    # more, for whatever was written while it was being set up.
                    self.watching.set()
                    await self.reload()
                if self._folders() != folders:  # a folder appeared or went: watch anew
                    restart = True
                    break
            if restart:
                await self.reload()  # what was written before the new watch began

    async def start(self) -> None:
        """Start watching (on the running loop); a second call does nothing."""
        if self._task is not None:
            return
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._watch(self._stop), name="config-watcher")

    async def stop(self) -> None:
        task, stop = self._task, self._stop
        self._task = None
        if task is None or stop is None:
            return
        stop.set()
        try:
            await task
        finally:
            self.watching.clear()

    async def __aenter__(self) -> ConfigWatcher:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def _changed(old: Config, new: Config) -> frozenset[str]:
    derived = (
        "sources",
        "theme_source",
        "model_source",
        "model_set",
        "trust",
        "notes",
    )  # where a value came from, not a setting
    names = [n for n in Config.__struct_fields__ if n not in derived]
    before: dict[str, Any] = {n: getattr(old, n) for n in names}
    return frozenset(n for n in names if getattr(new, n) != before[n])
