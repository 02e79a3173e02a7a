"""Configuration: user file, project file, environment, then command-line flags.

    $XDG_CONFIG_HOME/bastion/config.toml   (user)
    <cwd>/.bastion/config.toml             (project; wins over user)

Keys: model, approval_mode, theme, and [providers.NAME] tables with base_url,
api_key_env and headers. BASTION_MODEL overrides the files; flags override all.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.approvals import ApprovalMode
from runtime.errors import ConfigError

DEFAULT_MODEL = "openai/gpt-4.1"
DEFAULT_APPROVAL_MODE = ApprovalMode.ASK
_KEYS = {"model", "approval_mode", "theme", "providers", "instructions"}
_PROVIDER_KEYS = {"base_url", "api_key_env", "headers"}


@dataclass(frozen=True, slots=True)
class Config:
    model: str = DEFAULT_MODEL
    approval_mode: ApprovalMode = DEFAULT_APPROVAL_MODE
    theme: str = "bastion-dark"
    instructions: str = ""
    providers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sources: tuple[str, ...] = ()


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "bastion" / "config.toml"


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})", hint="fix or remove that file") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting {sorted(unknown)[0]!r}",
            hint=f"known settings: {', '.join(sorted(_KEYS))}",
        )
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigError(f"{path}: [providers] must be a table of [providers.NAME] tables")
    for name, table in providers.items():
        if not isinstance(table, dict) or set(table) - _PROVIDER_KEYS:
            raise ConfigError(
                f"{path}: [providers.{name}] takes only {', '.join(sorted(_PROVIDER_KEYS))}"
            )
    for key in ("model", "approval_mode", "theme", "instructions"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key} must be a string")
    return data


def load_config(cwd: str, env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    merged: dict[str, Any] = {}
    providers: dict[str, dict[str, Any]] = {}
    sources: list[str] = []
    for path in (user_config_path(env), Path(cwd) / ".bastion" / "config.toml"):
        data = _read(path)
        if data:
            sources.append(str(path))
        for name, table in data.pop("providers", {}).items():
            providers.setdefault(name, {}).update(table)
        merged.update(data)
    if env.get("BASTION_MODEL"):
        merged["model"] = env["BASTION_MODEL"]
    return Config(
        model=merged.get("model", DEFAULT_MODEL),
        approval_mode=ApprovalMode.parse(merged.get("approval_mode", DEFAULT_APPROVAL_MODE.value)),
        theme=merged.get("theme", "bastion-dark"),
        instructions=merged.get("instructions", ""),
        providers=providers,
        sources=tuple(sources),
    )


def model_resolver(config: Config, env: Mapping[str, str] | None = None) -> Any:
    """A `resolve_model(spec)` for the Harness, with the configured provider tables."""
    from runtime.providers.registry import ProviderSettings, resolve_model

    env = dict(os.environ if env is None else env)
    settings = {
        name: ProviderSettings(
            base_url=table.get("base_url"),
            api_key_env=table.get("api_key_env"),
            headers=dict(table.get("headers") or {}),
        )
        for name, table in config.providers.items()
    }

    def resolve(spec: str) -> Any:
        return resolve_model(spec, env=env, providers=settings)

    return resolve
