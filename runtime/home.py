"""Where bastion keeps its store, artifacts and logs. Imports only the standard library,
so the read-only session queries (`runtime.readonly`) find the store without loading
the configuration."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STORE_NAME", "default_home"]

STORE_NAME = "bastion.sqlite"


def default_home() -> Path:
    """$BASTION_HOME, else $XDG_DATA_HOME/bastion (~/.local/share/bastion)."""
    home = os.environ.get("BASTION_HOME")
    if home:
        return Path(home)
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(data) / "bastion"
