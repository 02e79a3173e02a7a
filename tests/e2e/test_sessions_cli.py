"""`bastion fork`, `sessions search`, `export` and `import` as a user runs them."""

from __future__ import annotations

import json


def two_prompts(loopback, bastion, *answers: str):
    server = loopback([{"text": a} for a in answers])
    b = bastion(server)
    first = b.json("-p", "first question", "--output-format", "json")
    assert first["status"] == "completed"
    conv_id = first["session_id"]
    second = b.json("-p", "second question", "-r", conv_id, "--output-format", "json")
    assert second["status"] == "completed"
    return b, conv_id


def test_fork_prints_the_new_id_last_and_shares_history_up_to_the_entry(loopback, bastion):
    b, conv_id = two_prompts(loopback, bastion, "answer one", "answer two")
    exported = json.loads(b.run("export", conv_id).stdout)
    first_answer = exported["entries"][1]
    assert first_answer["text"] == "answer one"

    out = b.run("fork", conv_id, "--at", first_answer["id"])
    assert out.returncode == 0, out.stderr
    new_id = out.stdout.strip().splitlines()[-1]
    assert new_id != conv_id
    forked = json.loads(b.run("export", new_id).stdout)
    assert [e["text"] for e in forked["entries"]] == ["first question", "answer one"]
    assert forked["conversation"]["parent_id"] == conv_id
    again = json.loads(b.run("export", conv_id).stdout)
    assert [e["text"] for e in again["entries"]] == [e["text"] for e in exported["entries"]]

    bad = b.run("fork", conv_id, "--at", "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e")
    assert bad.returncode == 2 and "no entry" in bad.stderr and bad.stdout == ""
    junk = b.run("fork", conv_id, "--at", "nope")
    assert junk.returncode == 2 and "not an entry id" in junk.stderr


def test_sessions_search_lists_ranked_hits_with_snippets(loopback, bastion):
    b, conv_id = two_prompts(loopback, bastion, "the lighthouse keeper", "no match here")
    out = b.run("sessions", "search", "lighthouse")
    assert out.returncode == 0, out.stderr
    head, snippet = out.stdout.splitlines()[:2]
    assert head.startswith(conv_id) and "first question" in head and str(b.cwd) in head
    assert "ago" in head and snippet.strip() == "the [lighthouse] keeper"
    rows = json.loads(b.run("sessions", "search", "lighthouse", "--json").stdout)
    assert [(r["id"], r["snippet"], r["cwd"]) for r in rows] == [
        (conv_id, "the [lighthouse] keeper", str(b.cwd))
    ]
    bad = b.run("sessions", "search", '"unbalanced')
    assert bad.returncode == 0 and "no conversation matches" in bad.stderr
    empty = b.run("sessions", "search", " ")
    assert empty.returncode == 2 and "empty" in empty.stderr


def test_export_then_import_round_trip_and_a_bad_file_changes_nothing(loopback, bastion, tmp_path):
    b, conv_id = two_prompts(loopback, bastion, "answer one", "answer two")
    out = tmp_path / "conv.json"
    assert b.run("export", conv_id, "-o", str(out)).returncode == 0
    imported = b.run("import", str(out))
    assert imported.returncode == 0, imported.stderr
    new_id = imported.stdout.strip().splitlines()[-1]
    assert new_id != conv_id
    original = json.loads(out.read_text())
    copy = json.loads(b.run("export", new_id).stdout)
    assert [(e["kind"], e["text"]) for e in copy["entries"]] == [
        (e["kind"], e["text"]) for e in original["entries"]
    ]
    assert copy["conversation"]["title"] == original["conversation"]["title"]
    markdown = b.run("export", new_id, "--format", "markdown").stdout
    assert "## User\n\nfirst question" in markdown and "answer two" in markdown

    listed = b.run("sessions", "--json", "--all").stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**original, "format_version": 99}))
    refused = b.run("import", str(bad))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "newer than this bastion reads" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    missing = b.run("import", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert b.run("sessions", "--json", "--all").stdout == listed
