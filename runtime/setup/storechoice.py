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


def store_report(url: str) -> tuple[bool, str]:
    """`bastion doctor`'s line for a PostgreSQL store: reached, and at which schema
    version (never its password). False when it cannot be reached or used."""
    from runtime.model.errors import StoreError
    from runtime.store.location import redacted

    where = redacted(url)
    try:
        from runtime.store.pg import engine, schema
    except ConfigError as exc:  # (psycopg is not installed)
        return False, f"{where}: {exc}"
    try:
        with engine.connect(url) as conn:
            version, latest = schema.current_version(conn), schema.latest_version()
    except engine.DriverError as exc:
        return False, str(engine.explain(url, exc))
    if version > latest:
        return (
            False,
            f"{where} (PostgreSQL) has schema {version}, newer than this bastion's {latest}",
        )
    if 0 < version < schema.BASELINE:
        return False, str(
            StoreError(f"{where} (PostgreSQL) has schema {version}, which no bastion writes")
        )
    state = {0: "empty: the first session creates the schema", latest: "current"}.get(
        version, f"migrates to {latest} when opened"
    )
    return True, f"{where} (PostgreSQL, schema version {version}, {state})"
