"""First run: no model is configured. Say how to set one, and which local servers answer.

`open_session` raises `NoModelConfigured` when nothing chose a model (no
`--model`, no `BASTION_MODEL`, no `model` key, none stored with the session) and
the built-in default cannot be used (no OPENAI_API_KEY). Every front end then
shows `first_run_text(...)`: the app as a screen, print and plain modes as one
error on stderr. Before that, `probe_local_servers` asks the usual local
servers, concurrently and with a short timeout, which models they serve:

    Ollama     GET {OLLAMA_HOST or http://127.0.0.1:11434}/api/tags
    llama.cpp  GET {BASTION_LLAMACPP_URL or http://127.0.0.1:8080}/v1/models

Nothing answering is the usual case and is not an error: such a server is just
not listed. The addresses are `ProbeTarget`s so tests point them at a loopback
server.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from runtime.model.errors import ConfigError

__all__ = [
    "PROBE_TIMEOUT",
    "LocalServer",
    "NoModelConfigured",
    "ProbeTarget",
    "default_targets",
    "first_run_report",
    "first_run_text",
    "probe_local_servers",
]

PROBE_TIMEOUT = 1.0  # seconds per server; all are asked at once
LLAMACPP_ENV = "BASTION_LLAMACPP_URL"
MAX_MODELS = 5  # models named per server


class NoModelConfigured(ConfigError):
    """Nothing chose a model and the default one cannot be used."""

    code = "no_model"


class ProbeTarget(msgspec.Struct, frozen=True):
    name: str  # "Ollama" or "llama.cpp"
    base: str  # e.g. http://127.0.0.1:11434
    kind: str  # "ollama" (GET /api/tags) or "openai" (GET /v1/models)

    @property
    def url(self) -> str:
        return self.base.rstrip("/") + ("/api/tags" if self.kind == "ollama" else "/v1/models")


class LocalServer(msgspec.Struct, frozen=True):
    target: ProbeTarget
    models: tuple[str, ...]

    def commands(self) -> list[str]:
        """What to run to use it (the first model, or NAME when it lists none)."""
        model = self.models[0] if self.models else "NAME"
        if self.target.kind == "ollama":
            return [f"bastion --model ollama/{model}"]
        return [f"OPENAI_BASE_URL={self.target.base.rstrip('/')}/v1 bastion --model openai/{model}"]


def default_targets(env: Mapping[str, str] | None = None) -> tuple[ProbeTarget, ...]:
    env = os.environ if env is None else env
    ollama = env.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
    if "://" not in ollama:
        ollama = "http://" + ollama
    llamacpp = env.get(LLAMACPP_ENV) or "http://127.0.0.1:8080"
    return (ProbeTarget("Ollama", ollama, "ollama"), ProbeTarget("llama.cpp", llamacpp, "openai"))


async def probe_local_servers(
    targets: Sequence[ProbeTarget] | None = None, *, timeout: float = PROBE_TIMEOUT
) -> list[LocalServer]:
    """The targets that answer with a model list, in the order given."""
    import httpx

    targets = default_targets() if targets is None else targets
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        found = await asyncio.gather(*(_probe(client, t, timeout) for t in targets))
    return [server for server in found if server is not None]


async def _probe(client: Any, target: ProbeTarget, timeout: float) -> LocalServer | None:
    import httpx

    try:
        async with asyncio.timeout(timeout):
            response = await client.get(target.url)
        if response.status_code != 200:
            return None
        body = response.json()
    except (httpx.HTTPError, TimeoutError, ValueError):
        return None  # nothing (usable) listens there
    return LocalServer(target, _models(target, body))


def _models(target: ProbeTarget, body: Any) -> tuple[str, ...]:
    key, field = ("models", "name") if target.kind == "ollama" else ("data", "id")
    items = body.get(key) if isinstance(body, dict) else None
    if not isinstance(items, list):
        return ()
    names = [i[field] for i in items if isinstance(i, dict) and isinstance(i.get(field), str)]
    return tuple(names)


def first_run_text(
    servers: Sequence[LocalServer] | None, config_path: str, *, probing: Sequence[str] = ()
) -> str:
    """What to tell a first-time user, as plain lines. `servers` None: still probing;
    `probing` names the addresses asked."""
    lines = [
        "No model is configured. Set one in any of these ways:",
        "",
        "  --model PROVIDER/NAME         for one run, e.g. --model ollama/llama3.2",
        "  BASTION_MODEL=PROVIDER/NAME   in the environment",
        f'  model = "PROVIDER/NAME"       in {config_path}',
        "                                or .bastion/config.toml in a project you trust",
        "",
        "Providers: openai/ (OPENAI_API_KEY, OPENAI_BASE_URL),",
        "anthropic/ (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), ollama/ (OLLAMA_HOST),",
        "or any OpenAI-compatible server: a [providers.NAME] table with",
        'base_url = "..." in config.toml.',
        "",
    ]
    if servers is None:
        lines.append("Local servers: asking " + ", ".join(probing) + " …")
    elif not servers:
        lines.append("Local servers: none answered (" + ", ".join(probing) + ").")
    else:
        lines.append("Local servers that answered:")
        for server in servers:
            shown = ", ".join(server.models[:MAX_MODELS]) or "no models listed"
            more = (
                f" (+{len(server.models) - MAX_MODELS} more)"
                if len(server.models) > MAX_MODELS
                else ""
            )
            lines.append(f"  {server.target.name} at {server.target.base}: {shown}{more}")
            lines.extend(f"    {command}" for command in server.commands())
    return "\n".join(lines)


async def first_run_report(
    targets: Sequence[ProbeTarget] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = PROBE_TIMEOUT,
) -> str:
    """`first_run_text` after probing: what print and plain modes say, as one error."""
    from runtime.setup.load import user_config_path

    targets = default_targets(env) if targets is None else targets
    servers = await probe_local_servers(targets, timeout=timeout)
    config = str(user_config_path(os.environ if env is None else env))
    return first_run_text(servers, config, probing=[f"{t.name} at {t.base}" for t in targets])
