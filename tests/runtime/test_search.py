"""Full-text search: ranked hits with snippets, bad syntax, the index kept in step, and
the migration that builds it for a store written before it existed."""

from __future__ import annotations

import sqlite3
import time

import pytest

from runtime.harness import new_conversation
from runtime.model.ids import uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.store import ftsquery, migrations
from runtime.store.database import Store
from runtime.store.fulltext import SearchQueryError


def entry(conv_id: str, kind: str, text: str, status: str = EntryStatus.COMPLETE) -> Entry:
    return Entry(uuid7(), conv_id, 0, kind, status, text, time.time())


async def conversation(store: Store, title: str, *texts: str, cwd: str = "/w") -> str:
    conv = new_conversation(cwd, title=title)

    def fill(tx):
        for i, text in enumerate(texts):
            tx.add_entry(entry(conv.id, EntryKind.USER if i % 2 == 0 else "assistant", text))

    await store.create_conversation(conv, fill)
    return conv.id


def check_index(path) -> None:
    db = sqlite3.connect(path)
    db.execute("INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")
    db.close()


async def test_hits_are_ranked_and_carry_a_marked_snippet(tmp_path):
    store = await Store.open(tmp_path / "s.sqlite")
    once = await conversation(
        store, "long", "tell me about gardens", "a long answer " * 40 + "with durable once"
    )
    many = await conversation(store, "short", "durable durable durable?", "yes, durable")
    await conversation(store, "other", "nothing to see", "indeed")
    hits = await store.search("durable")
    assert [h.conversation.id for h in hits] == [many, once]
    assert hits[0].conversation.title == "short" and hits[0].conversation.cwd == "/w"
    assert hits[0].marked() == "[durable] [durable] [durable]?"
    assert ("durable", True) in hits[1].spans and "[durable]" in hits[1].marked()
    assert hits[1].marked().startswith("…")  # cut from a long answer
    assert await store.search("gardens") and not await store.search("zebra")
    await store.close()


async def test_prefix_and_phrase_syntax_work_and_bad_syntax_is_searched_as_words(tmp_path):
    store = await Store.open(tmp_path / "s.sqlite")
    conv = await conversation(store, "t", 'run "make test" please', "the key: value pair")
    assert [h.conversation.id for h in await store.search("dura* OR mak*")] == [conv]
    assert [h.conversation.id for h in await store.search('"make test"')] == [conv]
    for bad in ('"unbalanced make', "key:value", "AND", "(", "NEAR(", "a * b", '"'):
        await store.search(bad)  # never a crash: an answer, maybe empty
    assert [h.conversation.id for h in await store.search('"unbalanced make')] == []
    assert [h.conversation.id for h in await store.search('make" test')] == [conv]
    assert [h.conversation.id for h in await store.search("key:value")] == [conv]
    with pytest.raises(SearchQueryError):
        await store.search("   ")
    await store.close()


async def test_the_index_follows_closed_entries_and_deleted_conversations(tmp_path):
    store = await Store.open(tmp_path / "s.sqlite")
    conv = await conversation(store, "t", "first words")
    streaming = entry(conv, EntryKind.ASSISTANT, "", EntryStatus.STREAMING)
    await store.transact(conv, lambda tx: tx.add_entry(streaming))
    await store.transact(conv, lambda tx: tx.append_chunk(streaming.id, "text", 0, "zephyr wind"))
    assert await store.search("zephyr") == []  # a partial is not indexed
    await store.transact(conv, lambda tx: tx.close_entry(streaming.id, "complete", {}))
    assert [h.entry_id for h in await store.search("zephyr")] == [streaming.id]
    result = entry(conv, EntryKind.TOOL_RESULT, "zephyr in a file")
    await store.transact(conv, lambda tx: tx.add_entry(result))
    assert [h.entry_id for h in await store.search("zephyr")] == [streaming.id]
    check_index(tmp_path / "s.sqlite")
    await store.delete_conversation(conv, force=True, live=lambda lease: False)
    assert await store.search("zephyr") == [] and await store.search("first") == []
    check_index(tmp_path / "s.sqlite")
    await store.close()


def _number_of(name: str) -> int:
    for number, found, _ in migrations.MIGRATIONS:
        if found == name:
            return number
    raise AssertionError(f"no migration {name!r}")


async def test_a_store_from_before_the_index_is_indexed_by_the_migration(tmp_path):
    path = tmp_path / "old.sqlite"
    ours = _number_of("full-text search of entries, and what side-effecting calls change")
    db = sqlite3.connect(path, isolation_level=None)
    migrations.ensure_meta(db)
    for number, name, fn in migrations.MIGRATIONS[: ours - 1]:
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?, 0)", (number, name))
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(ours - 1),))
    assert "entries_fts" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    conv_id = uuid7()
    db.execute(
        "INSERT INTO conversations (id, title, cwd, created_at, updated_at) "
        "VALUES (?, 'old one', '/old', 1, 1)",
        (conv_id,),
    )
    rows = [("user", "an old question about lanterns"), ("assistant", "lanterns glow"),
            ("tool_result", "lanterns.txt content")]  # fmt: skip
    for position, (kind, text) in enumerate(rows, 1):
        db.execute(
            "INSERT INTO entries (id, conversation_id, position, kind, status, text, created_at) "
            "VALUES (?, ?, ?, ?, 'complete', ?, 1)",
            (uuid7(), conv_id, position, kind, text),
        )
    db.close()

    store = await Store.open(path)
    hits = await store.search("lanterns")
    assert [(h.conversation.id, h.conversation.title, h.entry_kind) for h in hits] == [
        (conv_id, "old one", "assistant")
    ]
    assert await store.read(lambda d: migrations.current_version(d)) == migrations.latest_version()
    check_index(path)
    await store.close()


async def test_words_are_stemmed_and_tried_as_beginnings_when_nothing_matches(tmp_path):
    store = await Store.open(tmp_path / "s.sqlite")
    conv = await conversation(store, "t", "about walruses", "the migrations were running")
    for query in ("walrus", "walruses", "migration", "run", "MIGRAT"):
        assert [h.conversation.id for h in await store.search(query)] == [conv], query
    assert await store.search("walrusx") == []
    await store.close()


def _index_sql(path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT sql FROM sqlite_master WHERE name = 'entries_fts'").fetchone()[0]
    finally:
        db.close()


async def test_phrases_and_near_need_the_words_in_place_though_the_index_keeps_no_positions(
    tmp_path,
):
    store = await Store.open(tmp_path / "s.sqlite")
    assert "detail = column" in _index_sql(tmp_path / "s.sqlite")
    together = await conversation(store, "t", 'please run "make test" now', "done: foo_bar")
    apart = await conversation(store, "a", "test it, then make it", "bar, then foo")
    far = await conversation(store, "f", "make one two three four five six seven test")
    assert {h.conversation.id for h in await store.search("make test")} == {together, apart, far}
    hits = await store.search('"make test"')
    assert [h.conversation.id for h in hits] == [together]
    assert hits[0].marked() == 'please run "[make test]" now' and hits[0].entry_kind == "user"
    assert [h.conversation.id for h in await store.search('"make tes"*')] == [together]
    assert [h.conversation.id for h in await store.search("foo_bar")] == [together]
    near = {h.conversation.id for h in await store.search("NEAR(make test, 3)")}
    assert near == {together, apart}
    assert {h.conversation.id for h in await store.search("run AND NEAR(make test)")} == {together}
    assert [h.conversation.id for h in await store.search('"then make" OR "then foo"')] == [apart]
    check_index(tmp_path / "s.sqlite")
    await store.close()


async def test_a_store_with_the_positional_index_is_rebuilt_without_positions(tmp_path):
    path = tmp_path / "old.sqlite"
    ours = _number_of("full-text index without positions")
    db = sqlite3.connect(path, isolation_level=None)
    migrations.ensure_meta(db)
    for number, name, fn in migrations.MIGRATIONS[: ours - 1]:
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?, 0)", (number, name))
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(ours - 1),))
    db.close()
    assert "detail" not in _index_sql(path)
    store = await Store.open(path)
    conv = await conversation(store, "t", "lanterns glow at night", "a tool said lanterns")
    await store.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(ours - 1),))
    db.execute("DELETE FROM migrations WHERE version >= ?", (ours,))
    # what the later migration made (7: file bytes shared by hash) goes too
    db.execute("DROP INDEX call_effects_by_blob")
    db.execute("ALTER TABLE call_effects DROP COLUMN content_sha256")
    db.execute("DROP TABLE file_blobs")
    db.execute("DROP TABLE todos")  # and what 9 made (the todo list)
    db.execute("DROP TABLE ledger_marks")  # and 10 (checkpoints as marks on their chunks)
    db.execute("DROP TABLE jobs")  # and 11 (background jobs; its index and trigger with it)
    for trigger in ("runs_settled", "inbox_settled", "entries_settled"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("ALTER TABLE chunks DROP COLUMN seq")
    db.execute("ALTER TABLE chunks DROP COLUMN time")
    # and 8 (subagent children linked to their parent)
    db.execute("DROP INDEX conversations_by_task_call")
    db.execute("DROP INDEX conversations_by_task_parent")
    db.execute("ALTER TABLE conversations DROP COLUMN task_call_id")
    db.execute("ALTER TABLE conversations DROP COLUMN task_parent_id")
    db.execute("DROP TABLE entries_fts")  # the positional index, as migration 5 made it
    db.execute(
        "CREATE VIRTUAL TABLE entries_fts USING fts5 (text, content = 'entries', "
        "content_rowid = 'rowid', tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    db.execute("INSERT INTO entries_fts (rowid, text) SELECT rowid, text FROM entries")
    db.close()

    store = await Store.open(path)
    assert "detail = column" in _index_sql(path)
    assert [h.conversation.id for h in await store.search('"lanterns glow"')] == [conv]
    assert [h.entry_kind for h in await store.search("night")] == ["user"]
    assert await store.read(lambda d: migrations.current_version(d)) == migrations.latest_version()
    check_index(path)
    await store.close()


async def test_a_phrase_is_looked_for_among_the_newest_entries_holding_its_words(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(ftsquery, "PHRASE_RANKED", 3)  # the bound on a phrase query's time
    store = await Store.open(tmp_path / "s.sqlite")
    old = await conversation(store, "old", "red fox jumps")
    await conversation(store, "new", "fox red", "the fox is red", "a fox, red")
    newest = await conversation(store, "newest", "red fox again")
    assert [h.conversation.id for h in await store.search('"red fox"')] == [newest]
    monkeypatch.setattr(ftsquery, "PHRASE_RANKED", 5)
    assert {h.conversation.id for h in await store.search('"red fox"')} == {newest, old}
    await store.close()
