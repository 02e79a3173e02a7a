"""The deferred catalog's pieces without a server (runtime.mcp.catalog): the ranking,
the search's answers to bad input (nothing, an empty or huge query, a server down, two
servers with the same tool), the loaded set read from committed calls, and the
`mcp_tool_search` setting (a project may only lower it)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from runtime.mcp.catalog import (
    MAX_QUERY_BYTES,
    MAX_RESULT_BYTES,
    SEARCH_TOOL,
    loaded_tools,
    rank,
    search,
    search_spec,
)
from runtime.mcp.config import DEFAULT_TOOL_SEARCH
from runtime.model.errors import ConfigError
from runtime.model.llm import ToolSpec
from runtime.model.results import McpServerStatus, ServerState
from runtime.setup.load import load_config
from runtime.setup.project import restrict_project

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}


def spec(name: str, about: str, schema: dict | None = None) -> ToolSpec:
    return ToolSpec(name, about, schema or SCHEMA)


LISTED = [
    spec("gh__create_issue", "Create a new issue in a repository."),
    spec("gh__list_issues", "List the issues of a repository."),
    spec("gh__createPullRequest", "Open a pull request."),
    spec("db__run_sql_query", "Run a read-only SQL query against the database."),
    spec("db__describe_table", "Describe a table: columns, types, indexes."),
    spec("a__echo", "Say text back."),
    spec("b__echo", "Say text back, from another server."),
]
READY = [
    McpServerStatus("gh", "stdio", "gh", ServerState.READY, tools=("gh__create_issue",)),
    McpServerStatus("db", "stdio", "db", ServerState.READY, tools=("db__run_sql_query",)),
]


def names(found) -> list[str]:
    return [s.name for s in found]


def test_keywords_rank_names_above_descriptions_and_plurals_and_camel_case_match():
    assert names(rank("create issue", LISTED, 5))[:2] == ["gh__create_issue", "gh__list_issues"]
    assert names(rank("pull requests", LISTED, 5)) == ["gh__createPullRequest"]
    assert names(rank("the columns of a table", LISTED, 5)) == ["db__describe_table"]
    assert names(rank("sql", LISTED, 1)) == ["db__run_sql_query"]
    assert rank("the a of", LISTED, 5) == []  # stop words alone match nothing


def test_an_exact_name_loads_that_tool_alone_and_several_names_each():
    assert names(rank("gh__create_issue", LISTED, 5)) == ["gh__create_issue"]
    assert names(rank("GH__LIST_ISSUES, db__run_sql_query", LISTED, 5)) == [
        "gh__list_issues", "db__run_sql_query"]  # fmt: skip


def test_the_same_tool_on_two_servers_is_two_tools():
    assert names(rank("echo", LISTED, 5)) == ["a__echo", "b__echo"]  # its own name, both
    found = search(json.dumps({"query": "b__echo"}), LISTED, READY)
    assert found.ok and found.data == {"loaded": ["b__echo"]}


def test_a_search_answers_with_the_schema_and_loads_what_it_found():
    found = search(json.dumps({"query": "describe table"}), LISTED, READY)
    assert found.ok and found.data["loaded"][0] == "db__describe_table"
    first = found.model_text.splitlines()
    assert first[0].endswith("now loaded: call them by name from your next turn on.")
    assert "db__describe_table: Describe a table: columns, types, indexes." in first
    assert 'input schema: {"type":"object","properties":{"x":{"type":"string"}}}' in first


@pytest.mark.parametrize(
    ("arguments", "first_line"),
    [
        ({"query": ""}, "REFUSED INVALID_ARGUMENT: the query is empty"),
        ({"query": "   \n"}, "REFUSED INVALID_ARGUMENT: the query is empty"),
        ({}, "REFUSED INVALID_ARGUMENT: the query is empty"),
        ({"query": 3}, "REFUSED INVALID_ARGUMENT: query must be a string"),
        ({"query": "x", "limit": "2"}, "REFUSED INVALID_ARGUMENT: limit must be a whole number"),
        ({"query": "é" * MAX_QUERY_BYTES},
         f"REFUSED TOO_LARGE: the query is {2 * MAX_QUERY_BYTES} bytes; at most {MAX_QUERY_BYTES}"),
    ],
)  # fmt: skip
def test_bad_queries_are_one_clear_refusal_naming_the_servers(arguments, first_line):
    got = search(json.dumps(arguments), LISTED, READY)
    assert not got.ok and "loaded" not in got.data
    first, hint = got.model_text.splitlines()
    assert first == first_line
    assert hint.endswith("MCP servers: gh (1 tools), db (1 tools)")


def test_arguments_that_are_not_a_json_object():
    assert search("{not json", LISTED, READY).model_text.startswith(
        "REFUSED INVALID_ARGUMENT: the arguments are not JSON"
    )
    assert "must be a JSON object" in search("[1]", LISTED, READY).model_text


def test_a_search_for_nothing_says_so_and_loads_nothing():
    got = search(json.dumps({"query": "quantum teleporter"}), LISTED, READY)
    assert got.ok and got.data == {"loaded": []}
    assert got.model_text.startswith("No MCP tool matches 'quantum teleporter' (7 searched).")


def test_a_server_that_is_down_is_named_in_every_answer():
    down = [*READY, McpServerStatus("jira", "http", "u", ServerState.FAILED, "cannot connect")]
    got = search(json.dumps({"query": "issue"}), LISTED, down)
    assert got.model_text.endswith(
        "note: MCP server jira is failed (cannot connect): its tools are not listed, "
        "so not searched."
    )
    none = search(json.dumps({"query": "ticket"}), LISTED, down)
    assert "jira (down)" in none.model_text and "MCP server jira is failed" in none.model_text


def test_limit_is_clamped_and_schemas_stop_at_the_byte_cap_but_all_found_are_loaded():
    big = {"type": "object", "description": "x" * (MAX_RESULT_BYTES // 2)}
    many = [spec(f"s__tool{i}", "make a widget", big) for i in range(12)]
    got = search(json.dumps({"query": "widget", "limit": 50}), many, READY)
    assert len(got.data["loaded"]) == 10  # MAX_RESULTS
    assert got.model_text.count("input schema: {") == 1
    assert "bytes, not repeated here; it comes with the tool in your next turn" in got.model_text
    assert len(search(json.dumps({"query": "widget", "limit": 0}), many, READY).data["loaded"]) == 1


def test_the_search_tool_names_servers_and_caps_the_names_it_lists():
    many = [spec(f"server__a_rather_long_tool_name_{i:03d}", "x") for i in range(200)]
    described = search_spec(many, READY).description
    assert "200 MCP tools (gh 1, db 1)" in described
    assert described.endswith(" more).") and len(described) < 2_500
    assert search_spec(LISTED, READY).name == SEARCH_TOOL and "__" not in SEARCH_TOOL


def test_the_loaded_set_is_read_from_committed_searches_only():
    db = sqlite3.connect(":memory:")
    db.execute(
        'CREATE TABLE tool_calls (conversation_id, name, state, result, created_at, "index")'
    )
    rows = [
        ("c", SEARCH_TOOL, "done", {"ok": True, "loaded": ["gh__b", "gh__a"]}, 1),
        ("c", SEARCH_TOOL, "done", {"ok": True, "loaded": ["gh__a", "db__q"]}, 2),
        ("c", SEARCH_TOOL, "done", {"ok": False, "refusal": {}}, 3),  # refused: loads none
        ("c", SEARCH_TOOL, "interrupted", None, 4),  # cut off by a crash: loads none
        ("c", SEARCH_TOOL, "running", None, 5),
        ("c", "gh__x", "done", {"ok": True, "loaded": ["gh__x"]}, 6),  # not a search
        ("other", SEARCH_TOOL, "done", {"ok": True, "loaded": ["gh__z"]}, 7),
    ]
    for conv, name, state, result, at in rows:
        raw = json.dumps(result) if result is not None else None
        db.execute("INSERT INTO tool_calls VALUES (?, ?, ?, ?, ?, 0)", (conv, name, state, raw, at))
    assert loaded_tools(db, "c") == ("gh__b", "gh__a", "db__q")
    assert loaded_tools(db, "nobody") == ()


def users_config(tmp_path, text: str):
    """The config `load_config` makes of a user's config.toml holding `text`."""
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    (tmp_path / "work").mkdir(exist_ok=True)
    return load_config(str(tmp_path / "work"), {"XDG_CONFIG_HOME": str(tmp_path / "config")})


def test_mcp_tool_search_setting(tmp_path):
    assert users_config(tmp_path, "").mcp_tool_search == DEFAULT_TOOL_SEARCH == 20
    for text, threshold in (("= 5", 5), ("= 0", 0), ("= false", None), ("= true", 20)):
        assert users_config(tmp_path, f"mcp_tool_search {text}\n").mcp_tool_search == threshold
    for bad in ("-1", '"20"', "2.5"):
        with pytest.raises(ConfigError, match="mcp_tool_search must be a number of tools"):
            users_config(tmp_path, f"mcp_tool_search = {bad}\n")


@pytest.mark.parametrize(
    ("user", "project", "kept"),
    [
        ({}, 10, True),  # lower than the default: less context, kept
        ({}, 30, False),
        ({}, False, False),  # never: every schema again, above the user's
        ({"mcp_tool_search": 5}, 5, True),
        ({"mcp_tool_search": 5}, 6, False),
        ({"mcp_tool_search": False}, 40, True),
        ({"mcp_tool_search": False}, False, True),
    ],
)
def test_a_project_may_only_lower_mcp_tool_search(user, project, kept):
    out, ignored = restrict_project({"mcp_tool_search": project}, user, "ask")
    assert ("mcp_tool_search" in out) is kept
    assert bool(ignored) is not kept
    if ignored:
        assert "a project may only lower it" in ignored[0]
