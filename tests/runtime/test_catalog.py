"""The model catalog, its config overrides, and the output cap every request carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import Harness
from runtime.context.catalog import DEFAULT_OUTPUT_CAP, cost_of, lookup
from runtime.model.errors import ConfigError
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config, load_config
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import RecordingToolbox


@pytest.mark.parametrize(
    ("spec", "window", "out", "images", "price"),
    [
        ("openai/gpt-4.1", 1_047_576, 32_768, True, 2.0),
        ("openai/gpt-4.1-mini", 1_047_576, 32_768, True, 0.4),
        ("openai/gpt-4o-2024-08-06", 128_000, 16_384, True, 2.5),
        ("openai/o4-mini", 200_000, 100_000, True, 1.1),
        ("openai/gpt-5-mini", 400_000, 128_000, True, 0.25),
        ("anthropic/claude-sonnet-4-5-20250929", 200_000, 64_000, True, 3.0),
        ("anthropic/claude-opus-4-1", 200_000, 32_000, True, 15.0),
        ("anthropic/claude-3-5-haiku-latest", 200_000, 8_192, True, 0.8),
        ("ollama/llama3.2:3b", 131_072, 8_192, False, None),
        ("ollama/qwen2.5-coder:7b", 32_768, 8_192, False, None),
        ("openrouter/mistralai/mistral-small-3.1", 131_072, 8_192, True, None),
        ("ollama/gemma3:4b", 131_072, 8_192, True, None),
    ],
)
def test_catalog_lookup(spec: str, window: int, out: int, images: bool, price: float) -> None:
    info = lookup(spec)
    assert info.known and info.source == "catalog"
    assert (info.context_window, info.max_output_tokens, info.images) == (window, out, images)
    assert info.input_price == price


def test_unknown_model_gets_conservative_defaults_and_is_flagged() -> None:
    info = lookup("llamacpp/some-finetune-q4")
    assert not info.known and info.source == "default"
    assert info.context_window == 32_768 and info.max_output_tokens == DEFAULT_OUTPUT_CAP
    assert not info.images and not info.priced


def write(tmp_path: Path, text: str) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "cfg" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path, {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def test_models_table_overrides_the_catalog(tmp_path: Path) -> None:
    _, env = write(
        tmp_path,
        '[models."ollama/my-model"]\ncontext_window = 65536\nimages = true\n'
        "input_price = 0.5\noutput_price = 1\n"
        '[models."openai/gpt-4o"]\ncontext_window = 64000\n',
    )
    config = load_config(str(tmp_path), env)
    mine = config.model_info("ollama/my-model")
    assert mine.known and mine.source == "config"
    assert (mine.context_window, mine.images, mine.input_price, mine.output_price) == (
        65536,
        True,
        0.5,
        1,
    )
    gpt = config.model_info("openai/gpt-4o")
    assert gpt.context_window == 64000 and gpt.max_output_tokens == 16_384 and gpt.images


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[models."openai/x"]\ncontext_window = "big"\n', "context_window must be a whole number"),
        ('[models."openai/x"]\ncontext_window = 0\n', "context_window must be more than 0"),
        ('[models."openai/x"]\nimages = "yes"\n', "images must be true or false"),
        ('[models."openai/x"]\ninput_price = -1\n', "input_price must be a price"),
        ('[models."openai/x"]\noutput_price = "cheap"\n', "output_price must be a price"),
        ('[models."openai/x"]\nwindow = 5\n', "unknown setting 'window'"),
        ("[models.gpt]\ncontext_window = 5\n", "models.gpt must be a table named PROVIDER/NAME"),
        ("models = 3\n", "models must be a table"),
        ("max_output_tokens = 1.5\n", "max_output_tokens must be a whole number"),
        ("max_output_tokens = true\n", "max_output_tokens must be a whole number"),
        ("compact_reserve_tokens = -4\n", "compact_reserve_tokens must be more than 0"),
        ("compact_model = 4\n", "compact_model must be a string"),
        ("[providers.x]\nmax_output_tokens = 'lots'\n", "[providers.x] max_output_tokens"),
    ],
)
def test_bad_model_settings_name_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path, env = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(tmp_path), env)
    assert needle in str(caught.value) and str(path) in str(caught.value)


def test_output_cap_most_specific_first(tmp_path: Path) -> None:
    assert Config().output_cap("openai/gpt-4o") == 16_384  # the catalog's
    assert Config().output_cap("openai/unknown-thing") == 8192
    _, env = write(
        tmp_path,
        "max_output_tokens = 3000\n[providers.ollama]\nmax_output_tokens = 2000\n"
        '[models."ollama/qwen3"]\nmax_output_tokens = 1000\n',
    )
    config = load_config(str(tmp_path), env)
    assert config.output_cap("ollama/qwen3") == 1000
    assert config.output_cap("ollama/llama3.2") == 2000
    assert config.output_cap("openai/gpt-4o") == 3000


def test_cost_uses_cached_price_for_cached_input() -> None:
    info = lookup("openai/gpt-4.1")  # 2.00 in, 8.00 out, 0.50 cached per 1M
    assert cost_of(info, 1_000_000, 0, 0) == pytest.approx(2.0)
    assert cost_of(info, 1_000_000, 500_000, 400_000) == pytest.approx(1.2 + 0.2 + 4.0)
    assert cost_of(lookup("ollama/llama3.2"), 10, 10, 0) is None


async def drive_over(
    tmp_path: Path, provider: Any, spec: str, config: Config, server: LoopbackServer
) -> list[dict[str, Any]]:
    harness = await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=lambda s: (provider, s.split("/", 1)[1]),
        toolbox_factory=lambda conv: RecordingToolbox(),
        loop_settings=LoopSettings(checkpoint_interval=0.02),
        config=config,
    )
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": spec})
        await harness.drive(conv.id, approval_mode="full-auto")
        item = await harness.submit(conv.id, "look at a")
        run = await harness.wait(item.id, conv.id)
        assert run.state == "completed", run.error
    finally:
        await harness.close()
    return [r.body for r in server.requests]


TURNS = [
    {"text": "Looking.", "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]},
    {"text": "Done."},
]


async def test_every_openai_request_carries_the_cap(tmp_path: Path) -> None:
    async with LoopbackServer(TURNS) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        config = Config(providers={"openai": {"max_output_tokens": 777}})
        bodies = await drive_over(tmp_path, provider, "openai/gpt-4o", config, server)
    assert len(bodies) == 2 and all(b["max_tokens"] == 777 for b in bodies)


async def test_every_anthropic_request_carries_the_cap(tmp_path: Path) -> None:
    async with LoopbackServer(TURNS) as server:
        provider = AnthropicProvider("anthropic", server.url)
        spec = "anthropic/claude-3-5-haiku-latest"
        bodies = await drive_over(tmp_path, provider, spec, Config(), server)
    assert len(bodies) == 2 and all(b["max_tokens"] == 8192 for b in bodies)
