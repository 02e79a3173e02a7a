"""The user's deny-list in the file tools: a denied path is refused (FORBIDDEN, with
a hint), and listings, globs and searches leave it out."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from tools import ToolContext, Workspace, run_tool
from tools.denylist import DEFAULT_DENY, DenyList


@pytest.fixture
def denied(root: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[ToolContext]:
    (root / ".env").write_text("TOKEN=secret\n")
    (root / "app").mkdir()
    (root / "app" / ".env.local").write_text("TOKEN=secret\n")
    (root / "app" / "main.py").write_text("print('TOKEN')\n")
    with Workspace.open(root, deny=(*DEFAULT_DENY, "private/*")) as ws:
        yield ToolContext(ws, artifacts_dir=tmp_path)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": ".env"}),
        ("read_file", {"path": "app/.env.local"}),
        ("write_file", {"path": ".env", "content": "x", "overwrite": True}),
        ("edit_file", {"path": ".env", "old_text": "TOKEN", "new_text": "T"}),
        ("write_file", {"path": "private/notes.txt", "content": "x"}),
        ("read_file", {"path": "private/notes.txt"}),
    ],
)
async def test_a_denied_path_is_refused_with_a_hint(
    tool: str, args: dict[str, object], denied: ToolContext, root: pathlib.Path
) -> None:
    result = await run_tool(tool, args, denied)
    assert result.refusal is not None and result.refusal.code.value == "FORBIDDEN"
    assert "deny-list" in result.refusal.message and "deny_paths" in result.refusal.hint
    assert (root / ".env").read_text() == "TOKEN=secret\n"


async def test_listings_globs_and_searches_leave_denied_paths_out(denied: ToolContext) -> None:
    listing = await run_tool("list_directory", {"path": "app"}, denied)
    assert "main.py" in listing.model_text() and ".env" not in listing.model_text()
    found = await run_tool("glob", {"pattern": "**/.env*"}, denied)
    assert found.data["files"] == [] and "withheld" in str(found.data["coverage"])
    search = await run_tool("search_files", {"pattern": "TOKEN", "literal": True}, denied)
    assert "main.py" in search.model_text() and "secret" not in search.model_text()


def test_entries_match_names_at_any_depth_home_paths_and_relative_patterns(tmp_path):
    deny = DenyList(str(tmp_path), (".env", ".env.*", "secrets/*.key", str(tmp_path / "abs")))
    assert deny.match("a/b/.env") == ".env"
    assert deny.match(".env.production/x") == ".env.*"
    assert deny.match("secrets/prod.key") == "secrets/*.key"
    assert deny.match("abs/inner") == str(tmp_path / "abs")
    assert deny.match("env.py") is None and deny.match("secrets/readme") is None
