"""Issue 27 item 14: a conversation's reasoning effort goes out on the wire in each
provider's own words (chat `reasoning_effort`, Responses `reasoning.effort`, Anthropic
`thinking.budget_tokens`), checked against the loopback server, which records what it
is sent; Anthropic gets its signed thinking back with the tool calls it led to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import ConfigError, Harness
from runtime.providers.anthropic import thinking_budget
from runtime.providers.registry import resolve_model
from runtime.run.deps import LoopSettings
from runtime.run.reasoning import parse_effort
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import RecordingToolbox

LISTING = {"tool_calls": [{"id": "t1", "name": "list_directory", "arguments": {}}]}


async def bodies_for(
    tmp_path: Path, spec: str, turns: list[dict[str, Any]], effort: str | None, **loop: Any
) -> list[dict[str, Any]]:
    """Ask once with `effort` set on the conversation; the bodies the server was sent."""
    async with LoopbackServer(turns) as server:
        base = server.url if spec.startswith("anthropic/") else server.base_url
        env = {"OPENAI_BASE_URL": base, "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "k"}
        provider, model = resolve_model(spec, env=env)
        harness = await Harness.open(
            tmp_path / "b.sqlite",
            resolve_model=lambda s: (provider, model),
            toolbox_factory=lambda conv: RecordingToolbox(),
            loop_settings=LoopSettings(checkpoint_interval=0.02, **loop),
        )
        try:
            conv = await harness.create_conversation(
                str(tmp_path), settings={"model": spec, "approval_mode": "full-auto"}
            )
            if effort is not None:
                assert await harness.set_reasoning_effort(conv.id, effort) == parse_effort(effort)
            await harness.drive(conv.id)
            item = await harness.submit(conv.id, "go")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed", run.error
        finally:
            await harness.close()
        return [r.body for r in server.requests]


async def test_chat_completions_sends_reasoning_effort(tmp_path: Path) -> None:
    (body,) = await bodies_for(tmp_path, "openai/o4-mini", [{"text": "hi"}], "high")
    assert body["reasoning_effort"] == "high"


async def test_no_effort_sends_nothing_and_default_clears_it(tmp_path: Path) -> None:
    (body,) = await bodies_for(tmp_path, "openai/o4-mini", [{"text": "hi"}], None)
    assert "reasoning_effort" not in body
    (body,) = await bodies_for(tmp_path / "b", "openai/o4-mini", [{"text": "hi"}], "default")
    assert "reasoning_effort" not in body


async def test_the_config_default_applies_when_the_conversation_has_none(tmp_path: Path) -> None:
    spec = "openai/o4-mini"
    (body,) = await bodies_for(tmp_path, spec, [{"text": "hi"}], None, reasoning_effort="low")
    assert body["reasoning_effort"] == "low"
    (body,) = await bodies_for(
        tmp_path / "b", spec, [{"text": "hi"}], "high", reasoning_effort="low"
    )
    assert body["reasoning_effort"] == "high"  # the conversation's own wins


async def test_responses_sends_reasoning_effort(tmp_path: Path) -> None:
    (body,) = await bodies_for(tmp_path, "openai-responses/gpt-5", [{"text": "hi"}], "minimal")
    assert body["reasoning"] == {"effort": "minimal", "summary": "auto"}


async def test_anthropic_thinks_within_its_budget_and_gets_its_signed_thinking_back(
    tmp_path: Path,
) -> None:
    turns = [{**LISTING, "reasoning": "let me look"}, {"text": "done"}]
    first, second = await bodies_for(tmp_path, "anthropic/claude-sonnet-4-5", turns, "medium")
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 10_000}
    assert first["max_tokens"] > 10_000
    assistant = [t for t in second["messages"] if t["role"] == "assistant"][-1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "let me look",
        "signature": "loopback-signature",
    }
    assert assistant["content"][-1]["type"] == "tool_use"


async def test_anthropic_without_an_effort_does_not_think(tmp_path: Path) -> None:
    turns = [{**LISTING, "reasoning": "hm"}, {"text": "done"}]
    first, second = await bodies_for(tmp_path, "anthropic/claude-sonnet-4-5", turns, None)
    assert "thinking" not in first and "thinking" not in second
    assistant = [t for t in second["messages"] if t["role"] == "assistant"][-1]
    assert all(block["type"] != "thinking" for block in assistant["content"])


def test_a_budget_never_reaches_max_tokens() -> None:
    assert thinking_budget("high", 64_000) == 24_000
    assert thinking_budget("high", 8_192) == 8_192 - 1024
    assert thinking_budget("minimal", 1_500) is None  # too small a cap: no thinking
    assert thinking_budget(None, 64_000) is None


def test_an_unknown_effort_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_effort("extreme")
    assert "minimal, low, medium, high" in (err.value.hint or "")
