"""An MCP server with a large catalog (33 tools), for the deferred catalog's tests
(runtime.mcp.catalog): with tests/mcp/lean_server.py's 7 beside it, 40 tools.

    python tests/mcp/catalog_server.py

The tools look like a forge's, a tracker's, a chat's and a database's, each with a
description and documented arguments as real servers have; every one answers with its
own name and its arguments, so a test can tell which ran. A test double speaking the
real MCP wire format (tests/mcp/lean_mcp.py: as the `mcp` SDK v2.3.0 server answers,
each argument typed and described as the SDK's `Annotated[kind, Field(description=)]`
gives it), with the standard library only: the SDK's import alone cost ~0.7 s of CPU.
"""

import json
import sys
from typing import Any

from lean_mcp import Param, Server, main

app = Server("bastion-catalog")

OWNER = ("owner", str, "The account that owns the repository (a user or an organization).")
REPO = ("repo", str, "The repository's name, without the owner.")
NUMBER = ("number", int, "The issue or pull request number within the repository.")
PAGE = ("page", int, "Page number of the results to fetch, from 1.")
QUERY = ("query", str, "Search words; supports the service's own qualifiers.")
CHANNEL = ("channel", str, "The channel's id or its name without the leading #.")
TABLE = ("table", str, "The table's name, schema-qualified when not in the search path.")

# (name, description, arguments)
CATALOG: list[tuple[str, str, list[tuple[str, type, str]]]] = [
    ("create_issue", "Create a new issue in a repository, with a title and a markdown body.",
     [OWNER, REPO, ("title", str, "The issue's title."), ("body", str, "Its body, markdown.")]),
    ("get_issue", "Get one issue of a repository: its title, body, state, labels, assignees.",
     [OWNER, REPO, NUMBER]),
    ("list_issues", "List the issues of a repository, filtered by state, labels and date.",
     [OWNER, REPO, ("state", str, "open, closed or all."), PAGE]),
    ("update_issue", "Change an issue's title, body, state, labels or assignees.",
     [OWNER, REPO, NUMBER, ("state", str, "open or closed."), ("title", str, "A new title.")]),
    ("add_issue_comment", "Add a comment to an issue or a pull request.",
     [OWNER, REPO, NUMBER, ("body", str, "The comment, markdown.")]),
    ("search_issues", "Search issues and pull requests across repositories.", [QUERY, PAGE]),
    ("create_pull_request", "Open a pull request from a head branch into a base branch.",
     [OWNER, REPO, ("title", str, "The title."), ("head", str, "The branch with the changes."),
      ("base", str, "The branch to merge into.")]),
    ("get_pull_request", "Get a pull request: its branches, state, mergeability and checks.",
     [OWNER, REPO, NUMBER]),
    ("merge_pull_request", "Merge a pull request (merge, squash or rebase).",
     [OWNER, REPO, NUMBER, ("method", str, "merge, squash or rebase.")]),
    ("list_pull_requests", "List the pull requests of a repository.", [OWNER, REPO, PAGE]),
    ("get_file_contents", "Get the contents of a file or a directory listing at a ref.",
     [OWNER, REPO, ("path", str, "The path in the repository."), ("ref", str, "A branch, tag or sha.")]),
    ("create_or_update_file", "Create or replace one file in a repository with a commit.",
     [OWNER, REPO, ("path", str, "The file's path."), ("content", str, "The new content."),
      ("message", str, "The commit message."), ("branch", str, "The branch to commit to.")]),
    ("create_branch", "Create a branch from another branch or a commit.",
     [OWNER, REPO, ("branch", str, "The new branch."), ("from_ref", str, "Where it starts.")]),
    ("list_commits", "List the commits of a branch, newest first.", [OWNER, REPO, ("sha", str, "A branch or sha."), PAGE]),
    ("search_code", "Search code across repositories with the forge's code search syntax.", [QUERY, PAGE]),
    ("search_repositories", "Find repositories by name, topic, language or description.", [QUERY, PAGE]),
    ("fork_repository", "Fork a repository into your account or an organization.",
     [OWNER, REPO, ("organization", str, "Fork into this organization instead.")]),
    ("list_workflow_runs", "List the CI workflow runs of a repository with their status.", [OWNER, REPO, PAGE]),
    ("get_job_logs", "Get the logs of one CI job of a workflow run.", [OWNER, REPO, ("job_id", int, "The job's id.")]),
    ("create_ticket", "Create a ticket in the project tracker with a summary and priority.",
     [("project", str, "The tracker project's key."), ("summary", str, "One line."),
      ("priority", str, "low, medium, high or urgent.")]),
    ("transition_ticket", "Move a tracker ticket to another workflow status.",
     [("ticket", str, "The ticket key, like PROJ-12."), ("status", str, "The status to move it to.")]),
    ("search_tickets", "Search tracker tickets with the tracker's query language.", [QUERY]),
    ("post_message", "Post a message to a chat channel, or reply in a thread.",
     [CHANNEL, ("text", str, "The message, chat markdown."), ("thread", str, "Reply in this thread.")]),
    ("list_channels", "List the chat channels the bot can see.", [PAGE]),
    ("get_channel_history", "Get recent messages of a chat channel.", [CHANNEL, ("limit", int, "How many messages.")]),
    ("add_reaction", "Add an emoji reaction to a chat message.",
     [CHANNEL, ("timestamp", str, "The message's timestamp."), ("emoji", str, "The emoji's name.")]),
    ("run_sql_query", "Run a read-only SQL query against the analytics database and return rows.",
     [("sql", str, "One SELECT statement."), ("limit", int, "Most rows to return.")]),
    ("list_tables", "List the database's tables with their row counts.", [("schema", str, "Only this schema.")]),
    ("describe_table", "Describe a database table: its columns, types, keys and indexes.", [TABLE]),
    ("explain_query", "Show the database's query plan for a SQL statement.", [("sql", str, "The statement.")]),
    ("search_docs", "Search the product documentation and return the best passages.", [QUERY]),
    ("fetch_url", "Fetch a web page and return it as markdown.", [("url", str, "An http(s) URL.")]),
    ("get_weather", "Current weather and a three-day forecast for a city.", [("city", str, "The city's name.")]),
]  # fmt: skip


def _tool(name: str) -> Any:
    def run(**kwargs: Any):  # (no return annotation: no outputSchema, as with the SDK)
        return f"{name} ran with " + json.dumps(kwargs, sort_keys=True)

    return run


for _name, _description, _arguments in CATALOG:
    _params = [Param(arg, kind, description=about) for arg, kind, about in _arguments]
    app.add_tool(_tool(_name), name=_name, description=_description, params=_params)


if __name__ == "__main__":
    main(app, sys.argv)
