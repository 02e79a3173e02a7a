"""Configuration: user file, project file, environment, then command-line flags.

    $XDG_CONFIG_HOME/bastion/config.toml   (user)
    <cwd>/.bastion/config.toml             (project: only in a trusted folder, and
                                            only what runtime.setup.project allows)

Keys: model, approval_mode, theme, instructions, compact_model (strings),
stream_idle_timeout (seconds without a byte from a streaming model before the
request is dropped and retried; default 90), max_output_tokens (the output cap
of every request), compact_reserve_tokens (room kept free in the context
window; default 16,384, at most a quarter of the window), [providers.NAME]
tables with base_url, api_key_env, headers (a table of strings),
stream_idle_timeout and max_output_tokens, and [models."PROVIDER/NAME"] tables
with context_window, max_output_tokens, input_price, output_price,
cached_input_price (USD per million tokens), images and tools (booleans), and a
run's budget: max_turns, max_cost (USD), time_limit (seconds), and the session's,
session_max_cost (USD) (runtime.run.budget; a trusted project file may only lower them), reasoning_effort (runtime.run.reasoning),
[hooks] (runtime.hooks) and [mcp_servers.NAME] tables (runtime.mcp.config), both
from the user's file only, idle_park (seconds an idle session waits before the
app's harness process parks, default 60, 0: never; tui.parking), and mcp_tool_search (runtime.mcp.catalog: past this many MCP
tools, default 20, a request offers a search tool instead of their schemas; false:
never; a trusted project file may only lower it). BASTION_MODEL overrides the files;
flags override all.

A file that cannot be used is a ConfigError naming the file, the key and what it
should hold: it is never half-applied, and nothing is stored before it is read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from runtime.config.approvals import ApprovalMode
from runtime.config.safe_read import parse_toml, read_project_file, read_user_file, too_large
from runtime.config.trust import Trust, project_files, trust_of
from runtime.context.catalog import DEFAULT_OUTPUT_CAP, ModelInfo, catalog_entry, lookup
from runtime.hooks.config import HookSet, parse_hooks
from runtime.model.errors import ConfigError
from runtime.run.budget import BUDGET_KEYS, Budget, check_budget_keys
from runtime.run.sandboxing import KEYS as _SANDBOX_KEYS
from runtime.run.sandboxing import check_keys as _check_sandbox
from runtime.run.sandboxing import config_fields as _sandbox_fields
from runtime.setup.commands import CommandFile, load_commands
from runtime.setup.project import restrict_project
from runtime.store.home import default_home as default_home
from tools.denylist import DEFAULT_DENY

DEFAULT_MODEL = "openai/gpt-4.1"
DEFAULT_APPROVAL_MODE = ApprovalMode.ASK
_STRING_KEYS = (
    "model", "approval_mode", "theme", "instructions", "compact_model", "reasoning_effort",
    "notify", "store",
)  # fmt: skip
#: When the app tells the user a run ended or an approval waits (tui.notices).
NOTIFY_MODES = ("auto", "always", "bell", "off")
_TOKEN_KEYS = ("max_output_tokens", "compact_reserve_tokens")
_KEYS = {
    *_STRING_KEYS, *_TOKEN_KEYS, *_SANDBOX_KEYS, *BUDGET_KEYS, "providers", "models",
    "stream_idle_timeout", "hooks", "mcp_servers", "mcp_tool_search", "idle_park",
}  # fmt: skip
#: Seconds the app's session stays idle before its harness process parks (tui.parking).
DEFAULT_IDLE_PARK = 60.0
_PROVIDER_KEYS = {"base_url", "api_key_env", "headers", "stream_idle_timeout", "max_output_tokens"}
_MODEL_INTS = ("context_window", "max_output_tokens")
_MODEL_PRICES = ("input_price", "output_price", "cached_input_price")
_MODEL_BOOLS = ("images", "tools")
_MODEL_KEYS = {*_MODEL_INTS, *_MODEL_PRICES, *_MODEL_BOOLS}
_EXAMPLES = {
    "model": 'model = "openai/gpt-4.1"',
    "approval_mode": 'approval_mode = "ask"',
    "theme": 'theme = "bastion-dark"',
    "notify": 'notify = "auto"  # or "always", "bell", "off"',
    "instructions": 'instructions = "..."',
    "base_url": 'base_url = "https://api.example.com/v1"',
    "api_key_env": 'api_key_env = "EXAMPLE_API_KEY"',
    "headers": 'headers = { "X-Title" = "bastion" }',
    "stream_idle_timeout": "stream_idle_timeout = 90",
    "idle_park": "idle_park = 60  # seconds; 0: never park",
    "compact_model": 'compact_model = "openai/gpt-4.1-mini"',
    "reasoning_effort": 'reasoning_effort = "medium"',
    "max_output_tokens": "max_output_tokens = 8192",
    "compact_reserve_tokens": "compact_reserve_tokens = 16384",
    "context_window": "context_window = 131072",
    "input_price": "input_price = 2.5",
    "output_price": "output_price = 10.0",
    "cached_input_price": "cached_input_price = 1.25",
    "images": "images = true",
    "tools": "tools = true",
}


class Config(msgspec.Struct, frozen=True):
    model: str = DEFAULT_MODEL
    approval_mode: ApprovalMode = DEFAULT_APPROVAL_MODE
    theme: str = "bastion-dark"
    theme_source: str = ""  # the config file that set `theme` ("" when none did)
    notify: str = "auto"  # a run's end and an approval, told when the terminal is behind
    store: str = ""  # the user's file's `store` (runtime.setup.storechoice); never a project's
    #: `/name` command files (runtime.setup.commands): the user's, a trusted project's.
    commands: tuple[CommandFile, ...] = ()
    model_source: str = ""  # the config file that set `model` ("" when none did)
    instructions: str = ""
    stream_idle_timeout: float | None = None
    #: Seconds of an idle session before the app's harness process parks (0: never).
    idle_park: float = DEFAULT_IDLE_PARK
    providers: Mapping[str, Mapping[str, Any]] = msgspec.field(default_factory=dict)
    sources: tuple[str, ...] = ()
    max_output_tokens: int | None = None
    compact_reserve_tokens: int | None = None
    compact_model: str | None = None
    models: Mapping[str, Mapping[str, Any]] = msgspec.field(default_factory=dict)

    def model_info(self, spec: str) -> ModelInfo:
        """The catalog's numbers for `spec` with its [models."…"] table applied."""
        return lookup(spec, self.models)

    def output_cap(self, spec: str) -> int:
        """The output cap for `spec`: its [models] table, its provider's table, the top
        level, the catalog, 8192 (the first that says)."""
        model = self.models.get(spec, {}).get("max_output_tokens")
        provider = self.providers.get(spec.partition("/")[0], {}).get("max_output_tokens")
        for cap in (model, provider, self.max_output_tokens):
            if cap is not None:
                return int(cap)
        found = catalog_entry(spec)
        return int(found[1]["max_output_tokens"]) if found else DEFAULT_OUTPUT_CAP

    model_set: bool = False  # a file or BASTION_MODEL chose `model` (else: the default)
    trust: Trust | None = None  # the working folder's (None: not looked up)
    notes: tuple[str, ...] = ()  # one line each for the user: project settings ignored, why
    # The command sandbox (runtime/run/sandboxing.py): mode, network and writable paths
    # come from the user's file only; a project file may narrow it and add deny entries.
    sandbox_mode: str | None = None
    network: bool = False
    writable_paths: tuple[str, ...] = ()
    deny_paths: tuple[str, ...] = DEFAULT_DENY
    network_hosts: tuple[str, ...] = ()  # reached through bastion's proxy (network off)
    # Every run's limits (runtime.run.budget); the flags override them.
    budget: Budget = msgspec.field(default_factory=Budget)
    reasoning_effort: str = ""  # a new conversation's (runtime.run.reasoning); "" the model's
    # [hooks] of the user's file (runtime.hooks); a trusted project's come from its
    # .bastion/settings.toml when a driver starts, never from its config.toml.
    hooks: HookSet = msgspec.field(default_factory=HookSet)
    # [mcp_servers.NAME] tables (runtime.mcp.config), from the user's own file only.
    mcp_servers: Mapping[str, Mapping[str, Any]] = msgspec.field(default_factory=dict)
    # Past this many MCP tools, a search tool instead of their schemas (None: never):
    # runtime.mcp.config.DEFAULT_TOOL_SEARCH (not imported here: the first frame's path).
    mcp_tool_search: int | None = 20


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "bastion" / "config.toml"


def read_config_file(path: Path, project_root: str | None = None) -> dict[str, Any]:
    """A config file's checked data ({} when it does not exist). A project file is read
    pinned under `project_root` (no symlink on the way); a user file may be a symlink.
    Either must be a regular file of at most 256 KiB, nested at most 64 deep."""
    if project_root is None:
        read = read_user_file(path)
    else:
        read = read_project_file(project_root, PROJECT_CONFIG)
    if read is None:
        return {}
    if read.cut:
        raise too_large(path, read.size)
    data = parse_toml(read.data, path)
    if project_root is not None and "store" in data:
        raise ConfigError(
            f"{path}: `store` is refused in a project file: only your own config or "
            "BASTION_STORE chooses where your sessions are kept",
            hint="remove `store` from that file (put it in your own config.toml if it is yours)",
        )
    _check(path, data)
    return data


def _kind(value: Any) -> str:
    """How TOML calls the type of `value`, with the value when it is short."""
    names: dict[type, str] = {bool: "boolean", int: "integer", float: "float", str: "string"}
    name = names.get(type(value))
    if name is None:
        containers: dict[type, str] = {dict: "a table", list: "an array"}
        return containers.get(type(value), type(value).__name__)
    shown = repr(value) if not isinstance(value, bool) else str(value).lower()
    return f"{name} {shown}" if len(shown) <= 40 else name


def _type_error(path: Path, where: str, key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(
        f"{path}: {where}{key} must be {expected}, not {_kind(value)}",
        hint=f"for example {_EXAMPLES[key]}",
    )


def _check_seconds(path: Path, where: str, value: Any) -> None:
    key = "stream_idle_timeout"
    if type(value) not in (int, float):
        raise _type_error(path, where, key, "a number of seconds", value)
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(
            f"{path}: {where}{key} must be more than 0 seconds, not {value}",
            hint=f"for example {_EXAMPLES[key]}",
        )


def _check_idle_park(path: Path, value: Any) -> None:
    if type(value) not in (int, float) or not (math.isfinite(value) and value >= 0):
        raise ConfigError(
            f"{path}: idle_park must be a number of seconds, 0 or more, not {value!r}",
            hint=f"for example {_EXAMPLES['idle_park']}",
        )


def _check(path: Path, data: dict[str, Any]) -> None:
    """Refuse unknown keys and wrongly typed values, naming the file and the key."""
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting {sorted(unknown)[0]!r}",
            hint=f"known settings: {', '.join(sorted(_KEYS))}",
        )
    for key in _STRING_KEYS:
        if key in data and not isinstance(data[key], str):
            raise _type_error(path, "", key, "a string", data[key])
    if "approval_mode" in data:
        try:
            ApprovalMode.parse(data["approval_mode"])
        except ConfigError as exc:
            raise ConfigError(f"{path}: approval_mode: {exc.message}", hint=exc.hint) from None
    if data.get("notify", "auto") not in NOTIFY_MODES:
        raise ConfigError(
            f"{path}: notify is {data['notify']!r}, not one of {', '.join(NOTIFY_MODES)}",
            hint='notify = "auto" tells you when a run ends or waits while the terminal is '
            "behind other windows",
        )
    if "stream_idle_timeout" in data:
        _check_seconds(path, "", data["stream_idle_timeout"])
    if "idle_park" in data:
        _check_idle_park(path, data["idle_park"])
    if "reasoning_effort" in data:
        _check_effort(path, data["reasoning_effort"])
    for key in _TOKEN_KEYS:
        if key in data:
            _check_tokens(path, "", key, data[key])
    check_budget_keys(path, data)
    _check_models(path, data.get("models", {}))
    _check_sandbox(path, data)
    parse_hooks(data.get("hooks"), path)
    if "mcp_servers" in data:
        from runtime.mcp.config import check_servers

        check_servers(path, data["mcp_servers"])
    if "mcp_tool_search" in data:
        from runtime.mcp.config import check_tool_search

        check_tool_search(path, data["mcp_tool_search"])
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigError(
            f"{path}: providers must be a table of [providers.NAME] tables, not {_kind(providers)}",
            hint='for example [providers.openrouter] with base_url = "https://..."',
        )
    for name, table in providers.items():
        _check_provider(path, name, table)


def _check_effort(path: Path, value: str) -> None:
    from runtime.run.reasoning import parse_effort

    try:
        parse_effort(value)
    except ConfigError as exc:
        raise ConfigError(f"{path}: reasoning_effort: {exc.message}", hint=exc.hint) from None


def _check_provider(path: Path, name: str, table: Any) -> None:
    where = f"[providers.{name}] "
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}: providers.{name} must be a table, not {_kind(table)}",
            hint=f'write it as [providers.{name}] with base_url = "https://..." under it',
        )
    unknown = set(table) - _PROVIDER_KEYS
    if unknown:
        raise ConfigError(
            f"{path}: {where}has an unknown setting {sorted(unknown)[0]!r}",
            hint=f"[providers.NAME] takes only {', '.join(sorted(_PROVIDER_KEYS))}",
        )
    for key in ("base_url", "api_key_env"):
        if key in table and not isinstance(table[key], str):
            raise _type_error(path, where, key, "a string", table[key])
    headers = table.get("headers", {})
    if not isinstance(headers, dict):
        raise _type_error(path, where, "headers", "a table of strings", headers)
    for header, value in headers.items():
        if not isinstance(value, str):
            raise ConfigError(
                f"{path}: {where}headers.{header} must be a string, not {_kind(value)}",
                hint=f"for example {_EXAMPLES['headers']}",
            )
    if "stream_idle_timeout" in table:
        _check_seconds(path, where, table["stream_idle_timeout"])
    if "max_output_tokens" in table:
        _check_tokens(path, where, "max_output_tokens", table["max_output_tokens"])


def _check_tokens(path: Path, where: str, key: str, value: Any) -> None:
    if type(value) is not int:
        raise _type_error(path, where, key, "a whole number of tokens", value)
    if value <= 0:
        raise ConfigError(
            f"{path}: {where}{key} must be more than 0 tokens, not {value}",
            hint=f"for example {_EXAMPLES[key]}",
        )


def _check_models(path: Path, models: Any) -> None:
    if not isinstance(models, dict):
        raise ConfigError(
            f'{path}: models must be a table of [models."PROVIDER/NAME"] tables, '
            f"not {_kind(models)}",
            hint='for example [models."ollama/qwen3"] with context_window = 40960',
        )
    for spec, table in models.items():
        where = f'[models."{spec}"] '
        if "/" not in spec or not isinstance(table, dict):
            raise ConfigError(
                f"{path}: models.{spec} must be a table named PROVIDER/NAME",
                hint=f'write it as [models."openai/{spec}"] with context_window = ... under it',
            )
        unknown = set(table) - _MODEL_KEYS
        if unknown:
            raise ConfigError(
                f"{path}: {where}has an unknown setting {sorted(unknown)[0]!r}",
                hint=f"[models.NAME] takes only {', '.join(sorted(_MODEL_KEYS))}",
            )
        for key in _MODEL_INTS:
            if key in table:
                _check_tokens(path, where, key, table[key])
        for key in _MODEL_PRICES:
            value = table.get(key, 0)
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise _type_error(path, where, key, "a price in USD per million tokens", value)
        for key in _MODEL_BOOLS:
            if key in table and not isinstance(table[key], bool):
                raise _type_error(path, where, key, "true or false", table[key])


PROJECT_CONFIG = ".bastion/config.toml"


def load_config(cwd: str, env: Mapping[str, str] | None = None) -> Config:
    """The user's config, then (in a trusted folder) what the project's may change,
    then BASTION_MODEL. An untrusted folder's project files are not even read: a note
    says they were ignored and how to trust the folder."""
    env = os.environ if env is None else env
    user_path = user_config_path(env)
    user = read_config_file(user_path)
    trust = trust_of(cwd, env)
    layers: list[tuple[Path, dict[str, Any]]] = [(user_path, user)]  # the user's first
    notes: list[str] = []
    project_path = Path(cwd) / PROJECT_CONFIG
    if trust.trusted:
        project = read_config_file(project_path, project_root=cwd)
        kept, ignored = restrict_project(project, user, DEFAULT_APPROVAL_MODE.value)
        layers.append((project_path, kept if project else {}))
        if ignored:
            notes.append(
                f"{project_path}: ignored {'; '.join(ignored)}: a project file never routes "
                "your keys or raises the approval mode"
            )
        notes.extend(_refused_rules(cwd))
    elif present := project_files(cwd):
        notes.append(untrusted_note(cwd, present))
    commands, skipped = load_commands(cwd, trust.trusted, env)
    config = _merge(layers, env, trust, (*notes, *skipped))
    return msgspec.structs.replace(config, commands=commands) if commands else config


def _refused_rules(cwd: str) -> list[str]:
    """One note per rule the trusted project's settings file holds that is refused (the
    file itself is read again, and reported, where the rules are used)."""
    from runtime.config.settings import read_project_rules

    try:
        return list(read_project_rules(cwd)[1])
    except ConfigError:
        return []


def untrusted_note(cwd: str, present: tuple[str, ...]) -> str:
    """One line: which project files (and settings in them) were ignored, and how to trust.
    The files are parsed (safely) only to name what they hold; nothing of them applies."""
    shown = [f"{rel} ({_holds(cwd, rel)})" for rel in present]
    files = " and ".join(shown)
    return (
        f"this folder is not trusted, so {files} {'was' if len(present) == 1 else 'were'} "
        f"ignored; run `bastion trust {cwd}` to apply {'it' if len(present) == 1 else 'them'} "
        "(or pass --trust for this run)"
    )


def _holds(cwd: str, rel: str) -> str:
    from runtime.config.safe_read import parse_toml

    try:
        read = read_project_file(cwd, rel)
        data = parse_toml(read.data, rel) if read is not None and not read.cut else None
    except ConfigError:
        data = None
    if data is None:
        return "not readable"
    if rel == PROJECT_CONFIG:
        names = [f"{k}.{n}" if isinstance(v, dict) else k for k, v in data.items()
                 for n in (v if isinstance(v, dict) else [""])]  # fmt: skip
        return ", ".join(names[:6]) + (", …" if len(names) > 6 else "") or "empty"
    approvals = data.get("approvals", {})
    count = (
        sum(len(v) for v in approvals.values() if isinstance(v, list))
        if isinstance(approvals, dict)
        else 0
    )
    return f"{count} approval rule{'s' if count != 1 else ''}"


def _merge(
    layers: list[tuple[Path, dict[str, Any]]],
    env: Mapping[str, str],
    trust: Trust,
    notes: tuple[str, ...],
) -> Config:
    merged: dict[str, Any] = {}
    providers: dict[str, dict[str, Any]] = {}
    models: dict[str, dict[str, Any]] = {}
    theme_source = model_source = ""
    sandbox: list[dict[str, Any]] = [{}, {}]  # the user's sandbox keys, the project's
    user_path, user = layers[0]
    hooks = parse_hooks(user.get("hooks"), user_path)  # the user's file alone sets hooks
    servers: dict[str, Any] = dict(user.get("mcp_servers", {}))  # and MCP servers
    for index, (path, data) in enumerate(layers):
        data = dict(data)
        data.pop("hooks", None)
        data.pop("mcp_servers", None)
        sandbox[index] = {key: data.pop(key) for key in _SANDBOX_KEYS if key in data}
        if "theme" in data:
            theme_source = str(path)
        if "model" in data:
            model_source = str(path)
        for name, table in data.pop("providers", {}).items():
            providers.setdefault(name, {}).update(table)
        for spec, table in data.pop("models", {}).items():
            models.setdefault(spec, {}).update(table)
        merged.update(data)
    if env.get("BASTION_MODEL"):
        merged["model"] = env["BASTION_MODEL"]
    return Config(
        model=merged.get("model", DEFAULT_MODEL),
        approval_mode=ApprovalMode.parse(merged.get("approval_mode", DEFAULT_APPROVAL_MODE.value)),
        theme=merged.get("theme", "bastion-dark"),
        theme_source=theme_source,
        notify=merged.get("notify", "auto"),
        store=str(user.get("store", "")),
        model_source=model_source,
        instructions=merged.get("instructions", ""),
        stream_idle_timeout=merged.get("stream_idle_timeout"),
        idle_park=float(merged.get("idle_park", DEFAULT_IDLE_PARK)),
        providers=providers,
        sources=tuple(str(path) for path, data in layers if data),
        max_output_tokens=merged.get("max_output_tokens"),
        compact_reserve_tokens=merged.get("compact_reserve_tokens"),
        compact_model=merged.get("compact_model"),
        models=models,
        model_set="model" in merged,
        trust=trust,
        notes=notes,
        budget=Budget.from_mapping(merged),
        reasoning_effort=_effort(merged.get("reasoning_effort", "")),
        hooks=hooks,
        mcp_servers=servers,
        mcp_tool_search=_tool_search(merged.get("mcp_tool_search", True)),
        **_sandbox_fields(*sandbox),
    )


def _tool_search(value: Any) -> int | None:
    from runtime.mcp.config import tool_search_threshold

    return tool_search_threshold(value)


def _effort(value: str) -> str:
    from runtime.run.reasoning import parse_effort

    return parse_effort(value)


def model_resolver(config: Config, env: Mapping[str, str] | None = None) -> Any:
    """A `resolve_model(spec)` for the Harness, with the configured provider tables.

    The providers (and httpx) are imported by the first resolution, not here: a
    session can be opened and shown before any model is needed."""
    env = dict(os.environ if env is None else env)
    from runtime.config.secrets import note_key_names

    note_key_names(table.get("api_key_env") for table in config.providers.values())

    def resolve(spec: str) -> Any:
        from runtime.providers.registry import ProviderSettings, resolve_model

        settings = {
            name: ProviderSettings(
                base_url=table.get("base_url"),
                api_key_env=table.get("api_key_env"),
                headers=dict(table.get("headers") or {}),
                stream_idle_timeout=table.get("stream_idle_timeout"),
            )
            for name, table in config.providers.items()
        }
        return resolve_model(
            spec, env=env, providers=settings, stream_idle_timeout=config.stream_idle_timeout
        )

    return resolve
