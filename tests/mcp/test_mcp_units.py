"""The pieces of runtime.mcp without a server: a result as the model sees it (errors,
embedded resources, structured content, images, the spill) and tool rules."""

from __future__ import annotations

import base64
import io

import pytest
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

from runtime.config.rules import allow_rule, allowing, propose
from runtime.config.settings import add_project_rules, load_project_rules
from runtime.mcp.results import SPILL_BYTES, outcome
from runtime.model.rules import BadRule, Rule, RuleKind


def png() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), (0, 0, 255)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_an_error_result_is_not_ok_and_says_whose_it_is(tmp_path):
    result = CallToolResult(content=[TextContent(type="text", text="no such repo")], is_error=True)
    got = outcome("gh__get", result, tmp_path)
    assert not got.ok and got.model_text.startswith("ERROR from gh__get:\nno such repo")


def test_embedded_text_structured_content_and_images(tmp_path):
    resource = TextResourceContents(uri="file:///a.txt", text="inside")
    result = CallToolResult(content=[
        EmbeddedResource(type="resource", resource=resource),
        ImageContent(type="image", data=png(), mime_type="image/png"),
        ImageContent(type="image", data="not base64!", mime_type="image/png"),
    ])  # fmt: skip
    got = outcome("t__x", result, tmp_path)
    assert got.ok and got.model_text.startswith("inside\n[an image the server sent could not")
    assert [(i["width"], i["height"]) for i in got.images] == [(4, 3)]
    only = outcome("t__x", CallToolResult(content=[], structured_content={"n": 1}), tmp_path)
    assert '"n": 1' in only.model_text


def test_a_long_text_is_spilled_where_read_output_finds_it(tmp_path):
    text = "".join(f"row {n}\n" for n in range(40_000))
    got = outcome("t__big", CallToolResult(content=[TextContent(type="text", text=text)]), tmp_path)
    output_id = got.data["output_id"]
    assert (tmp_path / f"{output_id}.log").read_text() == text
    assert len(got.model_text) < SPILL_BYTES and "row 0\n" in got.model_text
    assert got.model_text.endswith(f'read_output {{"id": "{output_id}"}} pages them]')
    import tools
    from tools.output import read_output
    from tools.sandbox import SandboxPolicy

    with tools.Workspace.open(str(tmp_path)) as ws:
        ctx = tools.ToolContext(workspace=ws, artifacts_dir=tmp_path, sandbox=SandboxPolicy())
        paged = read_output(ctx, {"id": output_id, "offset": 39_999, "limit": 2})
    shown = paged.model_text()
    assert "row 39998" in shown and "row 39999" in shown


def test_tool_rules_name_a_tool_or_a_whole_server():
    one, server = allow_rule("gh__get_issue"), allow_rule("gh__*")
    assert one.kind == server.kind == RuleKind.TOOL
    assert allowing([one], "gh__get_issue", "{}") == (one,)
    assert allowing([one], "gh__delete_repo", "{}") == ()
    assert allowing([server], "gh__delete_repo", "{}") == (server,)
    assert allowing([server], "ghx__delete_repo", "{}") == ()  # another server
    assert allowing([server], "run_command", '{"command": "gh__x"}') == ()
    assert propose("gh__get_issue", "{}") == (Rule(RuleKind.TOOL, "gh__get_issue"),)
    assert server.describe() == "every tool of MCP server gh"
    assert allow_rule("git status").kind == RuleKind.COMMAND
    with pytest.raises(BadRule):
        allow_rule("bash")


def test_project_settings_keep_tool_rules(tmp_path):
    add_project_rules(tmp_path, [Rule(RuleKind.TOOL, "gh__*"), Rule(RuleKind.COMMAND, "ls")])
    text = (tmp_path / ".bastion" / "settings.toml").read_text()
    assert 'tools = ["gh__*"]' in text
    assert {(r.kind, r.pattern) for r in load_project_rules(tmp_path)} == {
        ("tool", "gh__*"), ("command", "ls")}  # fmt: skip
