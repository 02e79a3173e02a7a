"""SQL above the store is dialect-free: what SQLite and PostgreSQL do not share lives in
runtime.store.dialect and the adapters' own modules, nowhere else."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from runtime.store.dialect import POSTGRESQL, SQLITE, dialect_of

ROOT = Path(__file__).resolve().parents[2] / "runtime"

#: The SQLite adapter's own modules (its schema, file, full-text index, threads, faults,
#: the light read-only reader of the file) and the PostgreSQL adapter's.
ADAPTER_FILES = {
    "store/migrations.py",
    "store/storefile.py",
    "store/ftsquery.py",
    "store/fulltext.py",
    "store/readonly.py",
    "store/sqlite_engine.py",
    "store/threads.py",
    "store/failpoints.py",
    "store/dialect.py",
}
SQLITE_ONLY = re.compile(
    r"INSERT OR |json_extract|json_type|\binstr\(|\browid\b|PRAGMA|\bMATCH\b|import sqlite3|"
    r"BEGIN IMMEDIATE|\bGLOB\b|group_concat"
)


def test_no_sqlite_only_sql_outside_the_adapters():
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ADAPTER_FILES or rel.startswith("store/pg/"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SQLITE_ONLY.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_a_bare_sqlite_connection_is_sqlite():
    db = sqlite3.connect(":memory:")
    assert dialect_of(db) is SQLITE
    field = SQLITE.json_text("data", "item")
    assert db.execute(f"SELECT {field} FROM (SELECT ? AS data)", ('{"item": "x"}',)).fetchone() == (
        "x",
    )
    assert db.execute(f"SELECT {SQLITE.contains('?', '?')}", ("abc", "b")).fetchone() == (1,)


def test_json_fields_name_identifiers_only():
    with pytest.raises(ValueError):
        POSTGRESQL.json_text("data", "a'; DROP TABLE entries; --")
    with pytest.raises(ValueError):
        SQLITE.json_text("data); --", "item")
    assert POSTGRESQL.json_text("e.data", "item") == (
        "(replace(e.data, '\\u0000', '\\u2400')::json ->> 'item')"
    )
