"""The model catalog: what bastion knows about a model before it asks it anything.

For each common OpenAI, Anthropic and local model: its context window, the
most it may write in one response, prices in US dollars per million input,
output and cached input tokens, whether it takes images and tools. A model is
found by its name without the provider prefix (`openai/gpt-4.1-mini` and
`openrouter/openai/gpt-4.1-mini` are both `gpt-4.1-mini`), the longest known
prefix winning, so dated names (`claude-sonnet-4-5-20250929`) and tags
(`llama3.2:3b`) match their family.

`[models."PROVIDER/NAME"]` tables of config.toml override any field of one
model (see runtime.setup.load). A model the catalog does not know gets
conservative defaults (a 32k window, 8,192 output tokens, no images, no
prices) and `known=False`, so `bastion doctor` and the status line can say
its numbers are guesses.

The output cap sent with every request is, most specific first: the model's
`max_output_tokens` in config, its provider table's, the top-level one, the
catalog's, 8192 (`output_cap`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "ModelInfo",
    "catalog_entry",
    "cost_of",
    "lookup",
    "model_name",
]

DEFAULT_OUTPUT_CAP = 8192


class ModelInfo(msgspec.Struct, frozen=True):
    """What is known of one model; prices are USD per million tokens, None if unknown."""

    spec: str
    context_window: int
    max_output_tokens: int
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    images: bool = False
    tools: bool = True
    known: bool = True
    #: Where the numbers come from: "catalog", "config" (a [models] table), "default".
    source: str = "catalog"

    @property
    def priced(self) -> bool:
        return self.input_price is not None and self.output_price is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "input_price": self.input_price,
            "output_price": self.output_price,
            "cached_input_price": self.cached_input_price,
            "images": self.images,
            "tools": self.tools,
            "known": self.known,
            "source": self.source,
        }


def _m(
    window: int,
    out: int,
    price: tuple[float, float, float] | None = None,
    *,
    images: bool = False,
    tools: bool = True,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "context_window": window,
        "max_output_tokens": out,
        "images": images,
        "tools": tools,
    }
    if price is not None:
        row["input_price"], row["output_price"], row["cached_input_price"] = price
    return row


# Name prefix -> numbers. Prices as the providers list them (USD per 1M tokens:
# input, output, cached input). Local models have no price.
_CATALOG: dict[str, dict[str, Any]] = {
    # OpenAI
    "gpt-4o-mini": _m(128_000, 16_384, (0.15, 0.60, 0.075), images=True),
    "gpt-4o": _m(128_000, 16_384, (2.50, 10.00, 1.25), images=True),
    "gpt-4.1-nano": _m(1_047_576, 32_768, (0.10, 0.40, 0.025), images=True),
    "gpt-4.1-mini": _m(1_047_576, 32_768, (0.40, 1.60, 0.10), images=True),
    "gpt-4.1": _m(1_047_576, 32_768, (2.00, 8.00, 0.50), images=True),
    "o3-mini": _m(200_000, 100_000, (1.10, 4.40, 0.55)),
    "o3": _m(200_000, 100_000, (2.00, 8.00, 0.50), images=True),
    "o4-mini": _m(200_000, 100_000, (1.10, 4.40, 0.275), images=True),
    "gpt-5-nano": _m(400_000, 128_000, (0.05, 0.40, 0.005), images=True),
    "gpt-5-mini": _m(400_000, 128_000, (0.25, 2.00, 0.025), images=True),
    "gpt-5": _m(400_000, 128_000, (1.25, 10.00, 0.125), images=True),
    # Anthropic (cached = cache reads)
    "claude-3-5-haiku": _m(200_000, 8_192, (0.80, 4.00, 0.08), images=True),
    "claude-3-5-sonnet": _m(200_000, 8_192, (3.00, 15.00, 0.30), images=True),
    "claude-3-7-sonnet": _m(200_000, 64_000, (3.00, 15.00, 0.30), images=True),
    "claude-haiku-4": _m(200_000, 64_000, (1.00, 5.00, 0.10), images=True),
    "claude-sonnet-4": _m(200_000, 64_000, (3.00, 15.00, 0.30), images=True),
    "claude-opus-4-5": _m(200_000, 64_000, (5.00, 25.00, 0.50), images=True),
    "claude-opus-4": _m(200_000, 32_000, (15.00, 75.00, 1.50), images=True),
    # Local (Ollama / llama.cpp names); the window is the model's, not the server's default.
    "llama3.2-vision": _m(131_072, 8_192, images=True),
    "llama3": _m(131_072, 8_192),
    "llama-3": _m(131_072, 8_192),
    "qwen2.5-coder": _m(32_768, 8_192),
    "qwen2.5": _m(32_768, 8_192),
    "qwen3-coder": _m(262_144, 16_384),
    "qwen3": _m(40_960, 16_384),
    "mistral-small": _m(131_072, 8_192, images=True),
    "mistral-nemo": _m(131_072, 8_192),
    "mistral": _m(32_768, 8_192),
    "devstral": _m(131_072, 8_192),
    "gemma3": _m(131_072, 8_192, images=True),
    "gemma2": _m(8_192, 4_096, tools=False),
    "deepseek-r1": _m(131_072, 8_192, tools=False),
    "phi4": _m(16_384, 4_096, tools=False),
}
_UNKNOWN = _m(32_768, DEFAULT_OUTPUT_CAP)


def model_name(spec: str) -> str:
    """The model's own name: the last path segment of the spec, lower-cased."""
    return spec.strip().rsplit("/", 1)[-1].lower()


def catalog_entry(spec: str) -> tuple[str, dict[str, Any]] | None:
    """The catalog's (prefix, numbers) for `spec`, the longest matching prefix; None if none."""
    name = model_name(spec)
    best: str | None = None
    for prefix in _CATALOG:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return (best, _CATALOG[best]) if best is not None else None


def lookup(spec: str, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> ModelInfo:
    """What is known of `spec` ("PROVIDER/NAME"): catalog, then its [models] table."""
    found = catalog_entry(spec)
    row = found[1] if found is not None else _UNKNOWN
    info = ModelInfo(
        spec=spec, known=found is not None, source="catalog" if found else "default", **row
    )
    table = (overrides or {}).get(spec)
    if table:
        fields = {k: v for k, v in table.items() if k in _OVERRIDABLE}
        if "context_window" in fields or found is not None:
            # A model the user described is known as far as they said.
            info = msgspec.structs.replace(info, known=True)
        info = msgspec.structs.replace(info, source="config", **fields)
    return info


_OVERRIDABLE = (
    "context_window",
    "max_output_tokens",
    "input_price",
    "output_price",
    "cached_input_price",
    "images",
    "tools",
)


def cost_of(
    info: ModelInfo, input_tokens: int, output_tokens: int, cached_input_tokens: int
) -> float | None:
    """Dollars for these counts at `info`'s prices; None when the prices are not known.

    `input_tokens` includes the cached ones (as the providers report them), which
    are charged at the cached price when there is one.
    """
    if info.input_price is None or info.output_price is None:
        return None
    cached_price = info.cached_input_price
    if cached_price is None:
        cached_price = info.input_price
    cached = min(cached_input_tokens, input_tokens)
    fresh = input_tokens - cached
    return (
        fresh * info.input_price + cached * cached_price + output_tokens * info.output_price
    ) / 1_000_000
