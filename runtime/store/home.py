"""Where bastion keeps its store, artifacts and logs. Imports only the standard library,
so the read-only session queries (`runtime.store.readonly`) find the store without loading
the configuration."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (typing costs the session commands ~5 ms to import)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["STORE_NAME", "default_home", "home_dir", "private_folder", "store_elsewhere"]

STORE_NAME = "bastion.sqlite"


def home_dir() -> str:
    """$BASTION_HOME, else $XDG_DATA_HOME/bastion (~/.local/share/bastion), as a string
    (for the read-only queries, which do not load pathlib)."""
    home = os.environ.get("BASTION_HOME")
    if home:
        return home
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(data, "bastion")


def store_elsewhere() -> bool:
    """Does the user keep sessions in a PostgreSQL store (BASTION_STORE, or `store` in
    their config file: runtime.setup.storechoice)? Then the SQLite file in the home is
    not where sessions are, and the read-only queries leave them to the harness. A
    cheap look, no TOML parsed: a line `store = ...` is enough (the harness reads the
    file properly, and says what is wrong with it)."""
    if os.environ.get("BASTION_STORE", "").strip():
        return True
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    try:
        with open(os.path.join(base, "bastion", "config.toml"), "rb") as file:
            text = file.read(256 * 1024).decode("utf-8", "replace")
    except OSError:
        return False
    for line in text.splitlines():
        words = line.strip()
        if words.startswith("store") and words[5:].lstrip().startswith("="):
            return True
    return False


def default_home() -> Path:
    """`home_dir()` as a Path."""
    from pathlib import Path

    return Path(home_dir())


def private_folder(path: str, unsafe: Callable[[str], Exception]) -> None:
    """Make `path` (and missing parents) a folder only this user can enter: created
    0700, or an existing one checked (a folder, not a link, ours) and tightened to
    0700. `unsafe(message)` is the error raised when it is not ours."""
    import stat

    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise unsafe(f"{path} is not a folder of this user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
