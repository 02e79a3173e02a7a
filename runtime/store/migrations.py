"""Numbered, forward-only schema migrations, recorded in the `migrations` table.

Each migration is a function registered in order; `schema_version` in `meta`
is the number of the last one applied. A database whose version is newer than
the last migration this build knows is refused, never touched.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[tuple[int, str, Migration]] = []


def migration(number: int, name: str) -> Callable[[Migration], Migration]:
    def register(fn: Migration) -> Migration:
        expected = len(MIGRATIONS) + 1
        if number != expected:
            raise RuntimeError(f"migration {number} registered out of order (expected {expected})")
        MIGRATIONS.append((number, name, fn))
        return fn

    return register


def latest_version() -> int:
    return len(MIGRATIONS)


def schema_version() -> int:
    """The schema version this build writes (part of the public API: `runtime.schema_version`)."""
    return latest_version()


SCHEMA_1 = """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    cwd TEXT NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}',
    parent_id TEXT,
    fork_seq INTEGER,
    version INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_pid INTEGER,
    lease_host TEXT,
    lease_heartbeat REAL,
    lease_token INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX conversations_by_cwd ON conversations (cwd, updated_at);

CREATE TABLE entries (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    run_id TEXT,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    UNIQUE (conversation_id, position)
);

-- Every submission is an inbox item; (conversation, request_key) is the
-- admission key, so a retried submit finds the item it already made.
CREATE TABLE inbox (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    mode TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    request_key TEXT,
    run_id TEXT,
    entry_id TEXT,
    created_at REAL NOT NULL,
    UNIQUE (conversation_id, request_key)
);

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    inbox_id TEXT NOT NULL,
    state TEXT NOT NULL,
    revision INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    error TEXT,
    usage TEXT NOT NULL DEFAULT '{}',
    result_entry_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX runs_by_state ON runs (conversation_id, state);

CREATE TABLE tool_calls (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    "index" INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    replay_safe INTEGER NOT NULL,
    approval TEXT NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    result_entry_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX tool_calls_by_run ON tool_calls (run_id);

CREATE TABLE ledger (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;

CREATE TRIGGER ledger_append_only_update BEFORE UPDATE ON ledger
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;

-- Ledger rows go only with their conversation (`bastion sessions rm`).
CREATE TRIGGER ledger_append_only_delete BEFORE DELETE ON ledger
WHEN EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id)
BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
"""


@migration(1, "initial schema")
def _initial(db: sqlite3.Connection) -> None:
    _run_script(db, SCHEMA_1)


SCHEMA_2 = """
ALTER TABLE tool_calls RENAME TO tool_calls_v1;
DROP INDEX tool_calls_by_run;
CREATE TABLE tool_calls (
    id TEXT PRIMARY KEY,
    provider_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    "index" INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    replay_safe INTEGER NOT NULL,
    approval TEXT NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    result_entry_id TEXT,
    process TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
INSERT INTO tool_calls (id, provider_id, conversation_id, run_id, entry_id, "index",
    name, arguments, replay_safe, approval, state, result, result_entry_id,
    created_at, updated_at)
SELECT id, id, conversation_id, run_id, entry_id, "index", name, arguments,
    replay_safe, approval, state, result, result_entry_id, created_at, updated_at
FROM tool_calls_v1;
DROP TABLE tool_calls_v1;
CREATE INDEX tool_calls_by_run ON tool_calls (run_id, "index");
CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation_id, state);

ALTER TABLE runs ADD COLUMN interrupt_requested INTEGER NOT NULL DEFAULT 0;

CREATE TABLE chunks (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    start INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (owner_id, kind, start)
) WITHOUT ROWID;
CREATE INDEX chunks_by_conversation ON chunks (conversation_id);

CREATE TABLE admissions (
    request_key TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    inbox_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at REAL NOT NULL
);
INSERT OR IGNORE INTO admissions (request_key, conversation_id, inbox_id, digest, created_at)
SELECT request_key, conversation_id, id, '', created_at FROM inbox
WHERE request_key IS NOT NULL ORDER BY created_at;

CREATE TABLE deleted_conversations (
    id TEXT PRIMARY KEY,
    deleted_at REAL NOT NULL
);

CREATE INDEX entries_by_run ON entries (run_id);
CREATE INDEX inbox_by_state ON inbox (conversation_id, state);
"""


@migration(2, "own tool-call keys, streamed chunks, global admissions, tombstones")
def _keys_chunks_admissions(db: sqlite3.Connection) -> None:
    """Tool calls get a key of their own (the provider's id becomes data: providers
    repeat ids); streamed text, reasoning and command output are checkpointed as
    append-only chunks, joined when their entry closes; a request key is admitted
    once across all conversations; a deleted conversation's id is never reused."""
    _run_script(db, SCHEMA_2)


@migration(3, "index of streaming entries")
def _streaming_index(db: sqlite3.Connection) -> None:
    """Recovery at every driver start looks for streaming partials: with this it no longer
    scans a long conversation's entries (1.3 ms -> 0.004 ms at 5,000 entries)."""
    _run_script(
        db,
        """
        CREATE INDEX entries_streaming ON entries (conversation_id) WHERE status = 'streaming';
        """,
    )


@migration(4, "approval rules and call reviews")
def _approval_rules(db: sqlite3.Connection) -> None:
    """Session approval rules (answer `a`, scope session) live with their conversation;
    a tool call keeps its review: the diff shown when it asked, the rules that allowed
    it, the message a denial carried."""
    _run_script(
        db,
        """
        CREATE TABLE approval_rules (
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            pattern TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (conversation_id, kind, pattern)
        ) WITHOUT ROWID;
        ALTER TABLE tool_calls ADD COLUMN review TEXT;
        """,
    )


@migration(5, "full-text search of entries, and what side-effecting calls change")
def _entry_search_and_call_effects(db: sqlite3.Connection) -> None:
    """FTS5 over the closed text of entries (tool results left out: command output and
    file contents would outweigh the conversation), kept in step by triggers in the
    transactions that write entries, and filled from what is already stored. And
    `call_effects`: before a side-effecting call starts, what it will change (a
    file's previous bytes, a git snapshot of the work tree, or that its effects are
    untracked), committed with the call's start (runtime/run/effects.py)."""
    _run_script(
        db,
        """
        CREATE VIRTUAL TABLE entries_fts USING fts5 (
            text, content = 'entries', content_rowid = 'rowid',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries
        WHEN new.kind != 'tool_result' AND new.text != ''
        BEGIN INSERT INTO entries_fts (rowid, text) VALUES (new.rowid, new.text); END;

        CREATE TRIGGER entries_fts_update AFTER UPDATE OF text ON entries
        WHEN new.kind != 'tool_result' AND old.text IS NOT new.text
        BEGIN
            INSERT INTO entries_fts (entries_fts, rowid, text)
            SELECT 'delete', old.rowid, old.text WHERE old.text != '';
            INSERT INTO entries_fts (rowid, text) SELECT new.rowid, new.text WHERE new.text != '';
        END;

        CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries
        WHEN old.kind != 'tool_result' AND old.text != ''
        BEGIN
            INSERT INTO entries_fts (entries_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        END;

        INSERT INTO entries_fts (rowid, text)
        SELECT rowid, text FROM entries WHERE kind != 'tool_result' AND text != '';

        CREATE TABLE call_effects (
            tool_call_id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            path TEXT,
            content BLOB,
            detail TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL
        );
        CREATE INDEX call_effects_by_conversation ON call_effects (conversation_id);
        """,
    )


@migration(6, "full-text index without positions")
def _fulltext_without_positions(db: sqlite3.Connection) -> None:
    """The index keeps which entries hold a word, not where (FTS5 `detail=column`): about
    a quarter of its size, since positions were most of it (one or two bytes a word).
    Snippets and bm25 read the positions from the entry's text when they need them, and
    phrase and NEAR queries are answered by runtime.store.fulltext without them. Rebuilt from
    the entries; the triggers of migration 5 keep writing to it by name."""
    _run_script(
        db,
        """
        DROP TABLE entries_fts;
        CREATE VIRTUAL TABLE entries_fts USING fts5 (
            text, content = 'entries', content_rowid = 'rowid',
            tokenize = 'porter unicode61 remove_diacritics 2', detail = column
        );
        INSERT INTO entries_fts (rowid, text)
        SELECT rowid, text FROM entries WHERE kind != 'tool_result' AND text != '';
        """,
    )


@migration(7, "file bytes kept for edits shared by content hash")
def _shared_file_bytes(db: sqlite3.Connection) -> None:
    """A file's previous bytes, kept for /rewind (call_effects.content, up to 16 MB each),
    were stored once per call and copied again by every fork and rewind. They move to
    `file_blobs`, one row per sha256, which call_effects rows name
    (`content_sha256`); `sessions rm` and the size cap reclaim what no row names
    (runtime.store.blobs). Issue 25, item 11."""
    _run_script(
        db,
        """
        CREATE TABLE file_blobs (
            sha256 TEXT PRIMARY KEY,
            content BLOB NOT NULL,
            size INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        ALTER TABLE call_effects ADD COLUMN content_sha256 TEXT;
        CREATE INDEX call_effects_by_blob ON call_effects (content_sha256);
        """,
    )
    rows = db.execute(
        "SELECT tool_call_id, content, created_at FROM call_effects WHERE content IS NOT NULL"
    ).fetchall()
    import hashlib  # (only this old migration needs it)

    for call_id, content, created_at in rows:
        sha = hashlib.sha256(content).hexdigest()
        db.execute(
            "INSERT OR IGNORE INTO file_blobs (sha256, content, size, created_at) "
            "VALUES (?, ?, ?, ?)",
            (sha, content, len(content), created_at),
        )
        db.execute(
            "UPDATE call_effects SET content = NULL, content_sha256 = ? WHERE tool_call_id = ?",
            (sha, call_id),
        )


@migration(8, "subagent children linked to their parent and the call that started them")
def _subagent_children(db: sqlite3.Connection) -> None:
    # A child conversation (runtime.agents) names its parent and the parent's tool call;
    # one child per call, so a call run again after a crash finds the child it started.
    _run_script(
        db,
        """
        ALTER TABLE conversations ADD COLUMN task_parent_id TEXT;
        ALTER TABLE conversations ADD COLUMN task_call_id TEXT;
        CREATE UNIQUE INDEX conversations_by_task_call ON conversations (task_call_id)
            WHERE task_call_id IS NOT NULL;
        CREATE INDEX conversations_by_task_parent ON conversations (task_parent_id)
            WHERE task_parent_id IS NOT NULL;
        """,
    )


@migration(9, "the todo list a conversation keeps")
def _todos(db: sqlite3.Connection) -> None:
    """The model's checklist (runtime.plan): one row per conversation, the whole list as
    JSON, written with the result of the `todo` call that sent it."""
    _run_script(
        db,
        """
        CREATE TABLE todos (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
            items TEXT NOT NULL,
            tool_call_id TEXT,
            updated_at REAL NOT NULL
        );
        """,
    )


@migration(10, "checkpoints kept as marks on their chunks, sealed when the entry closes")
def _checkpoint_marks(db: sqlite3.Connection) -> None:
    """A checkpoint of streamed text or reasoning was a ledger row of ~160 bytes around
    ~40-80 characters of text: most of the store. Its event is now the `seq` and
    `time` of the chunk it wrote, and when the entry closes the marks of each stream
    are sealed into one append-only `ledger_marks` row of a few bytes a checkpoint
    (runtime.store.marks). And a finished run, a placed or withdrawn inbox item and
    an entry no longer streaming never change (every transition starts from an
    active state): triggers now refuse any change to them, so a ledger event whose
    record is in such a state names the row instead of copying it
    (runtime.store.ledger). Rows already in the ledger stay and read as before."""
    _run_script(
        db,
        """
        ALTER TABLE chunks ADD COLUMN seq INTEGER;
        ALTER TABLE chunks ADD COLUMN time REAL;
        CREATE TABLE ledger_marks (
            conversation_id TEXT NOT NULL,
            last_seq INTEGER NOT NULL,
            first_seq INTEGER NOT NULL,
            owner_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            time REAL NOT NULL,
            marks BLOB NOT NULL,
            PRIMARY KEY (conversation_id, last_seq)
        ) WITHOUT ROWID;

        CREATE TRIGGER ledger_marks_append_only_update BEFORE UPDATE ON ledger_marks
        BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;

        CREATE TRIGGER ledger_marks_append_only_delete BEFORE DELETE ON ledger_marks
        WHEN EXISTS (SELECT 1 FROM conversations WHERE id = OLD.conversation_id)
        BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;

        CREATE TRIGGER runs_settled BEFORE UPDATE ON runs
        WHEN OLD.state IN ('completed', 'interrupted', 'failed', 'cancelled')
        BEGIN SELECT RAISE(ABORT, 'a finished run does not change'); END;

        CREATE TRIGGER inbox_settled BEFORE UPDATE ON inbox
        WHEN OLD.state IN ('placed', 'withdrawn')
        BEGIN SELECT RAISE(ABORT, 'a placed or withdrawn inbox item does not change'); END;

        CREATE TRIGGER entries_settled BEFORE UPDATE ON entries
        WHEN OLD.status != 'streaming'
        BEGIN SELECT RAISE(ABORT, 'an entry that is no longer streaming does not change'); END;
        """,
    )


@migration(11, "background jobs, each from its start to its end")
def _jobs(db: sqlite3.Connection) -> None:
    """A background job (tools/jobs.py; runtime.run.jobs): its command, sandbox and
    supervisor record committed with the run_command call that started it, its end
    (state, exit code, last output) when it ends. A row, not only ledger events: a
    resume finds the jobs still marked running with one indexed query and settles
    each by compare-and-set (running -> lost), and an ended job never changes."""
    _run_script(
        db,
        """
        CREATE TABLE jobs (
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            number INTEGER NOT NULL,
            tool_call_id TEXT NOT NULL,
            command TEXT NOT NULL,
            cwd TEXT NOT NULL DEFAULT '.',
            sandbox TEXT NOT NULL DEFAULT '{}',
            process TEXT,
            output_id TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL,
            exit_code INTEGER,
            end_reason TEXT NOT NULL DEFAULT '',
            last_output TEXT NOT NULL DEFAULT '',
            notes TEXT NOT NULL DEFAULT '[]',
            started_at REAL NOT NULL,
            ended_at REAL,
            PRIMARY KEY (conversation_id, number)
        );
        CREATE INDEX jobs_running ON jobs (conversation_id) WHERE state = 'running';

        CREATE TRIGGER jobs_settled BEFORE UPDATE ON jobs
        WHEN OLD.state != 'running'
        BEGIN SELECT RAISE(ABORT, 'an ended job does not change'); END;
        """,
    )


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Run statements one by one: `executescript` would commit the open transaction."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            db.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete statement in migration: {pending.strip()[:60]}")


def ensure_meta(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )


def current_version(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def apply_pending(db: sqlite3.Connection) -> list[int]:
    """Apply what is missing, each migration in its own transaction. Returns the numbers applied.

    The caller has already refused a newer schema; the version is read again
    inside each transaction so two processes opening a new file at once agree.
    """
    applied: list[int] = []
    for number, name, fn in MIGRATIONS:
        db.execute("BEGIN IMMEDIATE")
        try:
            if current_version(db) >= number:
                db.execute("ROLLBACK")  # (nothing written: this one is applied)
                continue
            fn(db)
            db.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (number, name, time.time()),
            )
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(number),),
            )
            db.execute("COMMIT")
            applied.append(number)
        except BaseException:
            if db.in_transaction:  # (SQLite ends it by itself on some errors: a full disk)
                db.execute("ROLLBACK")
            raise
    return applied
