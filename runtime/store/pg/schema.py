"""PostgreSQL's schema and its numbered migrations, recorded as SQLite's are.

The schema is SQLite's at the same version (runtime.store.migrations), in
PostgreSQL's types: REAL is DOUBLE PRECISION, INTEGER is BIGINT, BLOB is BYTEA;
the guards SQLite keeps in triggers (the ledger append-only, a settled run,
inbox item, entry or job unchanged) are PL/pgSQL triggers; full text is a
generated `tsvector` column with a GIN index where SQLite has FTS5, of an entry's
first 100,000 characters (a tsvector holds at most 1 MB: a longer message would
otherwise be refused).

Migrations are numbered as SQLite's. PostgreSQL support begins at BASELINE: its
first migration creates the schema as it stands at that number and records it;
a later schema change registers its PostgreSQL form here under the same number
as its SQLite one. A database at a version this build does not know is refused,
never touched; so is one older than BASELINE (no bastion wrote one).
Each migration is one transaction holding an advisory lock, so two processes
opening a new database at once agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

from runtime.model.errors import SchemaTooNew, StoreError
from runtime.store import migrations as sqlite_migrations

__all__ = ["BASELINE", "PG_MIGRATIONS", "current_version", "prepare"]

BASELINE = 11  # SQLite's version when PostgreSQL support began (the jobs table)
_LOCK = 0x62617374  # the advisory lock migrations hold ("bast")

_TABLES = """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    cwd TEXT NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}',
    parent_id TEXT,
    fork_seq BIGINT,
    version BIGINT NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    lease_owner TEXT,
    lease_pid BIGINT,
    lease_host TEXT,
    lease_heartbeat DOUBLE PRECISION,
    lease_token BIGINT NOT NULL DEFAULT 0,
    task_parent_id TEXT,
    task_call_id TEXT
);
CREATE INDEX conversations_by_cwd ON conversations (cwd, updated_at);
CREATE UNIQUE INDEX conversations_by_task_call ON conversations (task_call_id)
    WHERE task_call_id IS NOT NULL;
CREATE INDEX conversations_by_task_parent ON conversations (task_parent_id)
    WHERE task_parent_id IS NOT NULL;

CREATE TABLE entries (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    run_id TEXT,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL DEFAULT '{}',
    created_at DOUBLE PRECISION NOT NULL,
    search tsvector GENERATED ALWAYS AS (
        CASE WHEN kind != 'tool_result' AND text != ''
        THEN to_tsvector('english', left(text, 100000)) END
    ) STORED,
    UNIQUE (conversation_id, position)
);
CREATE INDEX entries_by_run ON entries (run_id);
CREATE INDEX entries_streaming ON entries (conversation_id) WHERE status = 'streaming';
CREATE INDEX entries_search ON entries USING GIN (search);

CREATE TABLE inbox (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    mode TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    request_key TEXT,
    run_id TEXT,
    entry_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    UNIQUE (conversation_id, request_key)
);
CREATE INDEX inbox_by_state ON inbox (conversation_id, state);

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    inbox_id TEXT NOT NULL,
    state TEXT NOT NULL,
    revision BIGINT NOT NULL DEFAULT 0,
    reason TEXT,
    error TEXT,
    usage TEXT NOT NULL DEFAULT '{}',
    result_entry_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    interrupt_requested BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_state ON runs (conversation_id, state);

CREATE TABLE ledger (
    conversation_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE tool_calls (
    id TEXT PRIMARY KEY,
    provider_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    "index" BIGINT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    replay_safe BIGINT NOT NULL,
    approval TEXT NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    result_entry_id TEXT,
    process TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    review TEXT
);
CREATE INDEX tool_calls_by_run ON tool_calls (run_id, "index");
CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation_id, state);

CREATE TABLE chunks (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    start BIGINT NOT NULL,
    text TEXT NOT NULL,
    seq BIGINT,
    time DOUBLE PRECISION,
    PRIMARY KEY (owner_id, kind, start)
);
CREATE INDEX chunks_by_conversation ON chunks (conversation_id);

CREATE TABLE admissions (
    request_key TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    inbox_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE deleted_conversations (
    id TEXT PRIMARY KEY,
    deleted_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE approval_rules (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    pattern TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (conversation_id, kind, pattern)
);

CREATE TABLE file_blobs (
    sha256 TEXT PRIMARY KEY,
    content BYTEA NOT NULL,
    size BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE call_effects (
    tool_call_id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    path TEXT,
    content BYTEA,
    detail TEXT NOT NULL DEFAULT '{}',
    created_at DOUBLE PRECISION NOT NULL,
    content_sha256 TEXT
);
CREATE INDEX call_effects_by_conversation ON call_effects (conversation_id);
CREATE INDEX call_effects_by_blob ON call_effects (content_sha256);

CREATE TABLE todos (
    conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    items TEXT NOT NULL,
    tool_call_id TEXT,
    updated_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE ledger_marks (
    conversation_id TEXT NOT NULL,
    last_seq BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    owner_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    marks BYTEA NOT NULL,
    PRIMARY KEY (conversation_id, last_seq)
);

CREATE TABLE jobs (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    number BIGINT NOT NULL,
    tool_call_id TEXT NOT NULL,
    command TEXT NOT NULL,
    cwd TEXT NOT NULL DEFAULT '.',
    sandbox TEXT NOT NULL DEFAULT '{}',
    process TEXT,
    output_id TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    exit_code BIGINT,
    end_reason TEXT NOT NULL DEFAULT '',
    last_output TEXT NOT NULL DEFAULT '',
    notes TEXT NOT NULL DEFAULT '[]',
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    PRIMARY KEY (conversation_id, number)
);
CREATE INDEX jobs_running ON jobs (conversation_id) WHERE state = 'running';
"""

# (table, trigger, operation, condition on OLD, message): SQLite's guards.
_GUARDS = (
    ("ledger", "ledger_append_only_update", "UPDATE", "TRUE", "the ledger is append-only"),
    (
        "ledger",
        "ledger_append_only_delete",
        "DELETE",
        "EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id)",
        "the ledger is append-only",
    ),
    (
        "ledger_marks",
        "ledger_marks_append_only_update",
        "UPDATE",
        "TRUE",
        "the ledger is append-only",
    ),
    (
        "ledger_marks",
        "ledger_marks_append_only_delete",
        "DELETE",
        "EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id)",
        "the ledger is append-only",
    ),
    (
        "runs",
        "runs_settled",
        "UPDATE",
        "OLD.state IN ('completed', 'interrupted', 'failed', 'cancelled')",
        "a finished run does not change",
    ),
    (
        "inbox",
        "inbox_settled",
        "UPDATE",
        "OLD.state IN ('placed', 'withdrawn')",
        "a placed or withdrawn inbox item does not change",
    ),
    (
        "entries",
        "entries_settled",
        "UPDATE",
        "OLD.status != 'streaming'",
        "an entry that is no longer streaming does not change",
    ),
    ("jobs", "jobs_settled", "UPDATE", "OLD.state != 'running'", "an ended job does not change"),
)


def _guard(
    db: psycopg.Connection[Any], table: str, name: str, op: str, when: str, why: str
) -> None:
    db.execute(
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF {when} THEN RAISE EXCEPTION '{why}'; END IF; "
        f"RETURN {'OLD' if op == 'DELETE' else 'NEW'}; END $$"
    )
    db.execute(
        f"CREATE TRIGGER {name} BEFORE {op} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()"
    )


def _baseline(db: psycopg.Connection[Any]) -> None:
    db.execute(_TABLES)
    for guard in _GUARDS:
        _guard(db, *guard)


Migration = Callable[["psycopg.Connection[Any]"], None]
#: (number, name, migration): numbered as SQLite's; the first is BASELINE.
PG_MIGRATIONS: list[tuple[int, str, Migration]] = [
    (BASELINE, "the schema at version 11 (PostgreSQL support begins)", _baseline),
]


def latest_version() -> int:
    return PG_MIGRATIONS[-1][0]


def current_version(db: psycopg.Connection[Any]) -> int:
    """The recorded schema version (0: a new database)."""
    found = db.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return 0
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _refuse(where: str, version: int) -> None:
    latest = latest_version()
    if version > latest:
        raise SchemaTooNew(
            f"the store {where} has schema version {version}, newer than this bastion "
            f"knows ({latest})",
            hint="upgrade bastion (pip install -U bastion); the database was not changed",
        )
    if 0 < version < BASELINE:
        raise StoreError(
            f"the store {where} has schema version {version}, older than any PostgreSQL "
            f"store bastion writes ({BASELINE})",
            hint="point `store` at an empty database; this one was not changed",
        )


def prepare(db: psycopg.Connection[Any], where: str) -> list[int]:
    """Refuse a schema this build cannot use, then apply what is missing, each migration
    in its own transaction under the advisory lock. Returns the numbers applied.
    `db` is in autocommit mode."""
    _refuse(where, current_version(db))
    if current_version(db) == latest_version():
        return []
    applied: list[int] = []
    for number, name, fn in PG_MIGRATIONS:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            db.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations (version BIGINT PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            version = current_version(db)
            _refuse(where, version)
            if version >= number:
                continue
            fn(db)
            db.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (number, name, time.time()),
            )
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(number),),
            )
            applied.append(number)
    return applied


def sqlite_latest() -> int:
    """SQLite's latest migration: a test holds it equal to PostgreSQL's (a schema change
    written for one engine only fails the suite)."""
    return sqlite_migrations.latest_version()
