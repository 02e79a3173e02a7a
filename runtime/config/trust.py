"""Workspace trust: whether a folder's project files apply.

A repository bastion is opened in may be a stranger's clone, so its project
files (`.bastion/config.toml`, `.bastion/settings.toml`) are data until the
user trusts the folder. The decision is the user's and lives in the user's own
config dir, never in the repository:

    $XDG_CONFIG_HOME/bastion/trusted.toml
    [folders]
    "/home/me/src/app" = "trusted"       # bastion trust ~/src/app
    "/home/me/src/stranger" = "untrusted" # answered "no" in the app: not asked again

A decision covers the folder and every folder beneath it; the nearest recorded
folder decides. Paths are kept resolved (realpath), so a symlinked checkout and
its target are one folder. `--trust` trusts the working folder for one
invocation only (`trust_once`), recording nothing.

What a hostile repository could do here: nothing. It cannot write the user's
config dir (the tools refuse paths outside the workspace, and commands are
sandboxed to it), and naming its own folder "trusted" in a file of its own is
not read by anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

import msgspec

from runtime.config.safe_read import parse_toml, read_user_file
from runtime.model.errors import ConfigError

__all__ = [
    "PROJECT_FILES",
    "Trust",
    "TrustState",
    "project_files",
    "recorded_trust",
    "set_trust",
    "trust_of",
    "trust_once",
    "trust_path",
]

#: The project files that apply only in a trusted folder (relative to the workspace).
PROJECT_FILES = (".bastion/config.toml", ".bastion/settings.toml", ".bastion/commands")

_ONCE: set[str] = set()


class TrustState(StrEnum):
    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"  # the user said no: not asked again
    UNKNOWN = "unknown"  # never decided: the app asks


class Trust(msgspec.Struct, frozen=True):
    """A folder's trust: its state, the recorded folder that decided it ("" when none
    did) and whether it comes from `--trust` for this invocation only."""

    folder: str
    state: TrustState
    decided_by: str = ""
    once: bool = False

    @property
    def trusted(self) -> bool:
        return self.state is TrustState.TRUSTED


def trust_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "bastion" / "trusted.toml"


def _key(folder: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(folder)))


def trust_once(folder: str | os.PathLike[str]) -> None:
    """`--trust`: `folder` (and what is beneath it) is trusted by this process only."""
    _ONCE.add(_key(folder))


def _within(folder: str, parent: str) -> bool:
    return folder == parent or folder.startswith(parent.rstrip("/") + "/")


def recorded_trust(env: Mapping[str, str] | None = None) -> dict[str, TrustState]:
    """Every recorded decision, folder → state; ConfigError naming the file if it is bad."""
    path = trust_path(env)
    read = read_user_file(path)
    if read is None:
        return {}
    data = parse_toml(read.data, path)
    table = data.get("folders", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [folders] must be a table", hint="fix or remove that file")
    out: dict[str, TrustState] = {}
    for folder, value in table.items():
        if not isinstance(value, str) or value not in ("trusted", "untrusted"):
            raise ConfigError(
                f'{path}: folders.{folder!r} must be "trusted" or "untrusted"',
                hint="fix it, or run `bastion trust` again",
            )
        out[folder] = TrustState(value)
    return out


def trust_of(folder: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Trust:
    """The trust of `folder`: `--trust`, else the nearest recorded decision, else unknown.
    A trust file that cannot be read counts as no decision (and is reported by doctor)."""
    key = _key(folder)
    if any(_within(key, once) for once in _ONCE):
        return Trust(key, TrustState.TRUSTED, key, once=True)
    try:
        decisions = recorded_trust(env)
    except ConfigError:
        decisions = {}
    matches = [f for f in decisions if _within(key, f)]
    if not matches:
        return Trust(key, TrustState.UNKNOWN)
    nearest = max(matches, key=len)
    return Trust(key, decisions[nearest], nearest)


def set_trust(
    folder: str | os.PathLike[str], state: TrustState, env: Mapping[str, str] | None = None
) -> str:
    """Record `state` for `folder` (atomically, under a lock; other folders kept); the
    resolved folder. UNKNOWN forgets the decision. ConfigError if it cannot be written."""
    from runtime.config.settings import dump_toml, locked, replace_file

    key = _key(folder)
    path = trust_path(env)
    from runtime.store.surrogates import escaped, utf8

    if not utf8(key):  # (the trust file is TOML: text)
        raise ConfigError(
            f"{escaped(key)}: cannot record a decision for a folder whose path is not UTF-8",
            hint="rename the folder with the \\x bytes to a UTF-8 name",
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with locked(path.parent / "trusted.lock"):
            decisions = {f: s.value for f, s in recorded_trust(env).items()}
            if state is TrustState.UNKNOWN:
                decisions.pop(key, None)
            else:
                decisions[key] = state.value
            text = (
                "# Folders whose project files (.bastion/) bastion applies, written by\n"
                "# `bastion trust`. A decision covers the folder and those beneath it.\n"
                + dump_toml({"folders": dict(sorted(decisions.items()))})
            )
            replace_file(path, text)
    except OSError as exc:
        raise ConfigError(
            f"cannot write {path}: {exc.strerror or exc}", hint="check the folder's permissions"
        ) from None
    return key


def project_files(folder: str | os.PathLike[str]) -> tuple[str, ...]:
    """The project files present in `folder` (looked at, never read or followed)."""
    return tuple(rel for rel in PROJECT_FILES if os.path.lexists(os.path.join(folder, rel)))
