"""Export and import: JSON with the ledger, read back under a new id (the imported view
equals the original's); a malformed or newer file is refused and writes nothing;
Markdown folds tool calls, shows edits as diffs and marks compacted history."""

from __future__ import annotations

import json
import time

import pytest

from runtime.harness.transfer import FORMAT_VERSION, ImportRefused, export_markdown
from runtime.model.ids import uuid7
from runtime.model.llm import ToolCall
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.usefixtures("store_kind")


async def worked(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.py").write_text("x = 1\n")
    edit = {"path": "a.py", "old_text": "x = 1", "new_text": "x = 2"}
    turns = [
        ScriptedTurn(text="Let me look.", reasoning="thinking <hard>",
                     tool_calls=(ToolCall("c1", "edit_file", json.dumps(edit)),
                                 ToolCall("c2", "run_command", json.dumps({"command": "echo hi"})))),
        ScriptedTurn(text="Changed **x**."),
        ScriptedTurn(text="second answer"),
    ]  # fmt: skip
    box = WorkspaceToolbox(str(work), tmp_path / "artifacts")
    harness = await open_harness(tmp_path, ScriptedProvider(turns), box)
    conv = await harness.create_conversation(
        str(work), settings={"model": "s/m", "approval_mode": "full-auto"}, title="worked"
    )
    await harness.drive(conv.id)
    for text in ("change x", "and then?"):
        item = await harness.submit(conv.id, text)
        assert (await harness.wait(item.id, conv.id)).state == "completed"
    await harness.release(conv.id)
    return harness, conv


def normalized(view) -> dict:
    """The view with ids replaced by their order of appearance (a new id is expected)."""
    names: dict[str, str] = {}

    def swap(value):
        if isinstance(value, str) and value in ids:
            return names.setdefault(value, f"#{len(names)}")
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items() if k not in ("updated_at", "version")}
        if isinstance(value, list | tuple):
            return [swap(v) for v in value]
        return value

    ids = {view.conversation.id}
    for e in view.entries:
        ids |= {e.id, e.run_id}
    ids |= {r.id for r in view.runs} | {c.id for c in view.tool_calls}
    conv = view.conversation.to_dict()
    return swap({
        "conversation": {k: conv[k] for k in ("id", "title", "cwd", "settings")},
        "entries": [{**e.to_dict(), "position": i} for i, e in enumerate(view.entries)],
        "runs": [{**r.to_dict(), "revision": 0, "inbox_id": "-"} for r in view.runs],
        # The processes a command started are this host's business: neither copied nor exported.
        "tool_calls": [{**c.to_dict(), "process": None} for c in view.tool_calls],
    })  # fmt: skip


async def test_export_then_import_gives_the_same_view_under_a_new_id(tmp_path):
    harness, conv = await worked(tmp_path)
    doc = await harness.export(conv.id)
    assert doc["format_version"] == FORMAT_VERSION
    assert doc["ledger"][0]["type"] == "conversation.created"
    assert len(doc["ledger"]) == (await harness.snapshot(conv.id)).version
    imported = await harness.import_conversation(json.dumps(doc), cwd=conv.cwd)
    assert imported.id != conv.id and imported.id[14] == "7"
    original, copy = await harness.snapshot(conv.id), await harness.snapshot(imported.id)
    expected = normalized(original)
    del expected["conversation"]["settings"]["approval_mode"]  # never imported
    assert normalized(copy) == expected
    assert not {e.id for e in copy.entries} & {e.id for e in original.entries}
    # Importing the same file again makes another conversation, never a clash.
    again = await harness.import_conversation(json.dumps(doc), cwd=conv.cwd)
    assert normalized(await harness.snapshot(again.id)) == expected
    await harness.close()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_an_import_works_where_it_is_imported_never_in_the_files_cwd(tmp_path):
    """Issue 23: the imported session belongs to the folder `bastion import` ran in; the
    file's cwd and approval mode are not taken."""
    harness, conv = await worked(tmp_path)
    doc = await harness.export(conv.id)
    doc["conversation"]["cwd"] = "/etc"
    doc["conversation"]["settings"] = {"model": "s/m", "approval_mode": "full-auto", "x": 1}
    here = tmp_path / "here"
    here.mkdir()
    imported = await harness.import_conversation(json.dumps(doc), cwd=str(here))
    assert imported.cwd == str(here)
    assert imported.settings == {"model": "s/m"}
    await harness.close()


@pytest.mark.parametrize(
    "damage, says",
    [
        (lambda d: "{not json", "not JSON"),
        (lambda d: json.dumps([1, 2]), "not a bastion conversation export"),
        (lambda d: json.dumps({**d, "format_version": FORMAT_VERSION + 1}), "newer than this"),
        (lambda d: json.dumps({**d, "entries": "nope"}), '"entries"'),
        (lambda d: json.dumps({**d, "entries": [*d["entries"], {"kind": "user"}]}), "unknown kind"),
        (lambda d: json.dumps({**d, "entries": d["entries"] + d["entries"][:1]}), "twice"),
        (
            lambda d: json.dumps({**d, "tool_calls": [{**d["tool_calls"][0], "entry_id": "x"}]}),
            "belongs to no entry",
        ),
        (lambda d: json.dumps({**d, "runs": [{**d["runs"][0], "state": "dancing"}]}), "runs[0]"),
        (lambda d: json.dumps({**d, "conversation": {"title": 3}}), "conversation.title"),
        (lambda d: json.dumps({**d, "ledger": "X"}).replace('"X"', nested(10_000)), "levels deep"),
        (lambda d: json.dumps({**d, "ledger": "X"}).replace('"X"', nested(70)), "levels deep"),
        (lambda d: "[" * 100_000 + "]" * 100_000, "levels deep"),
        (lambda d: json.dumps({**d, "runs": [{**d["runs"][0], "id": "../../x"}]}), "not an id"),
        (
            lambda d: json.dumps(
                {**d, "conversation": {**d["conversation"], "settings": {"model": 3}}}
            ),
            "settings.model",
        ),
    ],
)
async def test_a_malformed_or_newer_file_is_refused_and_writes_nothing(tmp_path, damage, says):
    harness, conv = await worked(tmp_path)
    doc = await harness.export(conv.id)
    before = [c.id for c in await harness.list_conversations()]
    with pytest.raises(ImportRefused) as refused:
        await harness.import_conversation(damage(doc), cwd=str(tmp_path))
    assert says in str(refused.value) and "nothing was written" in str(refused.value)
    assert [c.id for c in await harness.list_conversations()] == before
    await harness.close()


async def test_markdown_folds_calls_shows_diffs_and_marks_compaction(tmp_path):
    harness, conv = await worked(tmp_path)
    summary = Entry(uuid7(), conv.id, 0, EntryKind.SUMMARY, EntryStatus.COMPLETE,
                    "We changed x.\n\nThen asked more.", time.time(), data={"entries": 6})  # fmt: skip
    await harness.store.transact(conv.id, lambda tx: tx.add_entry(summary))
    text = export_markdown(await harness.snapshot(conv.id))
    assert text.startswith("# worked\n")
    assert "## User *(compacted)*\n\nchange x\n" in text and "Changed **x**." in text
    assert "<details><summary>✓ <code>edit_file</code> a.py</summary>" in text
    assert "```diff\n--- a/a.py\n+++ b/a.py\n" in text and "-x = 1\n+x = 2\n```" in text
    assert "<details><summary>✓ <code>run_command</code> echo hi</summary>" in text
    assert "hi" in text.split("run_command</code>")[1].split("</details>")[0]
    assert "<details><summary>Reasoning</summary>\n\nthinking <hard>" in text
    assert "**Compacted (6 earlier entries)** — what the model keeps of the above:" in text
    assert "> We changed x.\n>\n> Then asked more." in text
    assert "read_file ok" not in text and text.count("<details>") == text.count("</details>")
    await harness.close()


def test_a_code_block_fence_outgrows_the_backticks_inside():
    from runtime.harness.transfer import fenced

    assert fenced("a ``` b", "diff") == ["````diff", "a ``` b", "````", ""]
    assert fenced("plain") == ["```", "plain", "```", ""]
