"""Where sessions are kept: BASTION_STORE, else `store` in the user's own config file,
else the SQLite file in BASTION_HOME. A project file never chooses it (a trusted
project's `.bastion/config.toml` naming a store is refused: runtime.setup.load).

The value is a `postgresql://` URL; it may hold a password, so it is never shown:
errors name it as `runtime.store.location.redacted` writes it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from runtime.model.errors import ConfigError
from runtime.store.location import is_url

if TYPE_CHECKING:
    from runtime.setup.load import Config

__all__ = ["configured_store"]


def configured_store(
    env: Mapping[str, str] | None = None, config: Config | None = None
) -> str | None:
    """The PostgreSQL URL the user chose, or None for the default SQLite file. `config`
    (load_config's, when the caller has it) spares reading the user's file again."""
    from runtime.setup.load import read_config_file, user_config_path

    env = os.environ if env is None else env
    value, source = env.get("BASTION_STORE", "").strip(), "BASTION_STORE"
    if not value:
        path = user_config_path(env)
        found = config.store if config is not None else read_config_file(path).get("store", "")
        value, source = str(found).strip(), str(path)
    if not value:
        return None
    if not is_url(value):
        raise ConfigError(
            f"{source}: store is not a postgresql:// URL",
            hint='store = "postgresql://user@host/dbname" keeps sessions in PostgreSQL; '
            "without it they are kept in SQLite in BASTION_HOME",
        )
    return value
