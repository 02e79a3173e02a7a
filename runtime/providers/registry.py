"""From `--model PROVIDER/NAME` to a Provider and the model name it takes.

Built-in prefixes:

    openai/NAME      OpenAI chat completions: OPENAI_BASE_URL (default
                     https://api.openai.com/v1), key OPENAI_API_KEY (not needed
                     when the base URL is a loopback address)
    ollama/NAME      Ollama's OpenAI-compatible API at OLLAMA_HOST (default
                     http://127.0.0.1:11434, "/v1" appended), no key
    llamacpp/NAME    llama.cpp's `llama-server` (OpenAI-compatible) at
                     http://127.0.0.1:8080/v1, no key
    anthropic/NAME   Anthropic Messages: ANTHROPIC_BASE_URL (default
                     https://api.anthropic.com), key ANTHROPIC_API_KEY (not
                     needed on a loopback address)
    openai-responses/NAME   the OpenAI Responses API at OPENAI_BASE_URL
                     (default https://api.openai.com/v1), key OPENAI_API_KEY
                     (not needed on a loopback address)

A refused connection to a local server (a loopback base URL) is retried once,
not the usual four times, and the error says what to start (`ollama serve`,
`llama-server -m MODEL.gguf`); see httpbase.transport_error.

Any other NAME is a `[providers.NAME]` table of config.toml with a `base_url`:
an OpenAI-compatible endpoint (OpenRouter, vLLM, llama.cpp, ...), its key read
from the variable named by `api_key_env` when there is one.

The spec splits on the first slash: `openai/meta-llama/llama-3.3-70b` is model
`meta-llama/llama-3.3-70b` of provider `openai`. For a built-in name, a
`[providers.NAME]` table overrides the defaults (`api_key_env`, `headers`, and
`base_url` when the environment variable does not set one): the order is
environment, then config file, then built-in default.

The stream idle timeout (seconds without a byte before a streaming request is
dropped and retried) is, in that order: BASTION_STREAM_IDLE_TIMEOUT, the
provider table's `stream_idle_timeout`, the top-level one, 90 s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import httpx
import msgspec

from runtime.model.errors import ConfigError
from runtime.model.llm import Provider
from runtime.providers import BUILTIN_PREFIXES
from runtime.providers.httpbase import DEFAULT_IDLE_TIMEOUT, is_loopback_url
from runtime.providers.openai import OpenAIChatProvider

__all__ = ["BUILTIN_PREFIXES", "ProviderSettings", "is_loopback_url", "resolve_model"]

IDLE_TIMEOUT_ENV = "BASTION_STREAM_IDLE_TIMEOUT"
LLAMACPP_BASE_URL = "http://127.0.0.1:8080/v1"


class ProviderSettings(msgspec.Struct, frozen=True):
    """A `[providers.NAME]` table of config.toml."""

    base_url: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    stream_idle_timeout: float | None = None


def resolve_model(
    spec: str,
    *,
    env: Mapping[str, str],
    providers: Mapping[str, ProviderSettings] | None = None,
    stream_idle_timeout: float | None = None,
) -> tuple[Provider, str]:
    """The provider for `spec` ("PROVIDER/NAME") and the model NAME to send it.

    `stream_idle_timeout` is the configured default for providers whose table
    does not set one.
    """
    providers = providers or {}
    prefix, slash, model = spec.strip().partition("/")
    known = _known_prefixes(providers)
    if not slash or not prefix or not model:
        raise ConfigError(
            f"model {spec!r} is not of the form PROVIDER/NAME",
            hint=f"for example openai/gpt-4.1 or ollama/llama3.2; providers: {known}",
        )
    settings = providers.get(prefix)
    factory = _BUILTINS.get(prefix)
    if factory is None and settings is None:
        raise ConfigError(
            f"unknown provider {prefix!r} in model {spec!r}",
            hint=f"use PROVIDER/NAME with one of: {known} (or add a [providers.{prefix}] "
            "table with a base_url to config.toml)",
        )
    settings = settings or ProviderSettings()
    idle = _idle_timeout(env) or settings.stream_idle_timeout or stream_idle_timeout
    settings = msgspec.structs.replace(settings, stream_idle_timeout=idle or DEFAULT_IDLE_TIMEOUT)
    if factory is not None:
        return factory(prefix, settings, env), model
    return _custom(prefix, settings, env), model


def _idle_timeout(env: Mapping[str, str]) -> float | None:
    raw = env.get(IDLE_TIMEOUT_ENV)
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(
            f"{IDLE_TIMEOUT_ENV}={raw!r} is not a number of seconds above 0",
            hint="set it to, for example, 90, or unset it",
        )
    return seconds


def _known_prefixes(providers: Mapping[str, ProviderSettings]) -> str:
    custom = sorted(p for p in providers if p not in BUILTIN_PREFIXES)
    return ", ".join(f"{p}/" for p in (*BUILTIN_PREFIXES, *custom))


def _openai(name: str, settings: ProviderSettings, env: Mapping[str, str]) -> Provider:
    base_url = _check_url(
        env.get("OPENAI_BASE_URL") or settings.base_url or "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
    )
    key_env = settings.api_key_env or "OPENAI_API_KEY"
    key = env.get(key_env) or None
    if key is None and not is_loopback_url(base_url):
        raise ConfigError(
            f"{key_env} is not set",
            hint=f"export {key_env}=... or pick another --model",
        )
    official = httpx.URL(base_url).host == "api.openai.com"
    return OpenAIChatProvider(
        name,
        base_url,
        api_key=key,
        headers=_headers(settings),
        # OpenAI's reasoning models refuse max_tokens; the others take both.
        max_tokens_field="max_completion_tokens" if official else "max_tokens",
        idle_timeout=_idle(settings),
    )


def _ollama(name: str, settings: ProviderSettings, env: Mapping[str, str]) -> Provider:
    if env.get("OLLAMA_HOST"):
        base_url = _ollama_base(env["OLLAMA_HOST"])
    elif settings.base_url:
        base_url = _check_url(settings.base_url, f"[providers.{name}] base_url")
    else:
        base_url = _ollama_base("http://127.0.0.1:11434")
    key = env.get(settings.api_key_env) if settings.api_key_env else None
    return OpenAIChatProvider(
        name,
        base_url,
        api_key=key or None,
        headers=_headers(settings),
        idle_timeout=_idle(settings),
    )


def _ollama_base(host: str) -> str:
    """OLLAMA_HOST as Ollama reads it: scheme and port optional; "/v1" added."""
    value = host.strip()
    if "://" not in value:
        value = "http://" + value
    url = _parse(value, "OLLAMA_HOST")
    if url.port is None and not host.strip().startswith(("http://", "https://")):
        url = url.copy_with(port=11434)
    if url.host in ("0.0.0.0", "::"):  # a listen address: connect locally
        url = url.copy_with(host="127.0.0.1")
    path = url.path.rstrip("/")
    return str(url.copy_with(path=path if path else "/v1")).rstrip("/")


def _anthropic(name: str, settings: ProviderSettings, env: Mapping[str, str]) -> Provider:
    from runtime.providers.anthropic import AnthropicProvider

    raw = env.get("ANTHROPIC_BASE_URL") or settings.base_url or "https://api.anthropic.com"
    base_url = _check_url(raw, "ANTHROPIC_BASE_URL")
    if base_url.endswith("/v1"):  # the API paths start with /v1 already
        base_url = base_url[: -len("/v1")]
    key_env = settings.api_key_env or "ANTHROPIC_API_KEY"
    key = env.get(key_env) or None
    if key is None and not is_loopback_url(base_url):
        raise ConfigError(
            f"{key_env} is not set",
            hint=f"export {key_env}=... or pick another --model",
        )
    return AnthropicProvider(
        name, base_url, api_key=key, headers=_headers(settings), idle_timeout=_idle(settings)
    )


def _responses(name: str, settings: ProviderSettings, env: Mapping[str, str]) -> Provider:
    from runtime.providers.responses import ResponsesProvider

    base_url = _check_url(
        env.get("OPENAI_BASE_URL") or settings.base_url or "https://api.openai.com/v1",
        "OPENAI_BASE_URL",
    )
    key_env = settings.api_key_env or "OPENAI_API_KEY"
    key = env.get(key_env) or None
    if key is None and not is_loopback_url(base_url):
        raise ConfigError(
            f"{key_env} is not set",
            hint=f"export {key_env}=... or pick another --model",
        )
    return ResponsesProvider(
        name, base_url, api_key=key, headers=_headers(settings), idle_timeout=_idle(settings)
    )


def _llamacpp(name: str, settings: ProviderSettings, env: Mapping[str, str]) -> Provider:
    source = f"[providers.{name}] base_url"
    base_url = _check_url(settings.base_url or LLAMACPP_BASE_URL, source)
    key = env.get(settings.api_key_env) if settings.api_key_env else None
    return OpenAIChatProvider(
        name,
        base_url,
        api_key=key or None,
        headers=_headers(settings),
        idle_timeout=_idle(settings),
    )


def _custom(name: str, settings: ProviderSettings, env: Mapping[str, str]) -> Provider:
    if not settings.base_url:
        raise ConfigError(
            f"[providers.{name}] has no base_url",
            hint=f'add base_url = "https://..." to [providers.{name}] in config.toml',
        )
    base_url = _check_url(settings.base_url, f"[providers.{name}] base_url")
    key: str | None = None
    if settings.api_key_env:
        key = env.get(settings.api_key_env) or None
        if key is None and not is_loopback_url(base_url):
            raise ConfigError(
                f"{settings.api_key_env} is not set (provider {name!r})",
                hint=f"export {settings.api_key_env}=... or pick another --model",
            )
    return OpenAIChatProvider(
        name, base_url, api_key=key, headers=_headers(settings), idle_timeout=_idle(settings)
    )


_BUILTINS: dict[str, Callable[[str, ProviderSettings, Mapping[str, str]], Provider]] = {
    "openai": _openai,
    "ollama": _ollama,
    "anthropic": _anthropic,
    "openai-responses": _responses,
    "llamacpp": _llamacpp,
}


def _idle(settings: ProviderSettings) -> float:
    return settings.stream_idle_timeout or DEFAULT_IDLE_TIMEOUT


def _headers(settings: ProviderSettings) -> dict[str, str]:
    return {str(k): str(v) for k, v in (settings.headers or {}).items()}


def _parse(value: str, source: str) -> httpx.URL:
    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{source} is not a valid URL: {value!r}",
            hint="use a base URL like https://api.example.com/v1",
        ) from exc
    return url


def _check_url(value: str, source: str) -> str:
    """The base URL without a trailing slash, or a ConfigError saying what is wrong."""
    if not isinstance(value, str):
        raise ConfigError(
            f"{source} must be a string, not {type(value).__name__} {value!r}",
            hint='use a base URL like "https://api.example.com/v1"',
        )
    url = _parse(value.strip(), source)
    try:
        port = url.port
    except (ValueError, httpx.InvalidURL):
        port = -1
    if url.scheme not in ("http", "https") or not url.host or (port is not None and port < 0):
        raise ConfigError(
            f"{source} is not a valid http(s) URL: {value!r}",
            hint="use a base URL like https://api.example.com/v1",
        )
    return str(url).rstrip("/")
