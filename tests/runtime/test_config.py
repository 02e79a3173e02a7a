"""config.toml: every unusable value is one ConfigError naming the file, the key and the fix;
the stream idle timeout flows from environment, provider table and top level to the provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.config.trust import TrustState, set_trust
from runtime.model.errors import ConfigError
from runtime.providers.httpbase import DEFAULT_IDLE_TIMEOUT
from runtime.setup.load import Config, load_config, model_resolver


def write_config(tmp_path: Path, content: bytes | str) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path, {"XDG_CONFIG_HOME": str(tmp_path / "config")}


def refused(tmp_path: Path, content: bytes | str) -> tuple[Path, str]:
    path, env = write_config(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        load_config(str(tmp_path), env)
    line = str(caught.value)
    assert "\n" not in line
    return path, line


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (
            "[providers.x]\nbase_url = 5\n",
            ["[providers.x] base_url must be a string, not integer 5", "base_url = "],
        ),
        (
            '[providers.x]\nbase_url = "http://h"\nheaders = "x"\n',
            ["[providers.x] headers must be a table of strings, not string 'x'"],
        ),
        ("[providers.x]\nheaders = { a = 1 }\n", ["[providers.x] headers.a must be a string"]),
        ("[providers.x]\napi_key_env = true\n", ["api_key_env must be a string, not boolean true"]),
        ("[providers.x]\nmodel = 'm'\n", ["[providers.x] has an unknown setting 'model'"]),
        ("providers = 5\n", ["providers must be a table", "integer 5"]),
        ("providers = { x = 5 }\n", ["providers.x must be a table, not integer 5"]),
        ("model = 5\n", ["model must be a string, not integer 5"]),
        ("theme = [1]\n", ["theme must be a string, not an array"]),
        ("approval_mode = 'sometimes'\n", ["unknown approval mode 'sometimes'", "full-auto"]),
        ("stream_idle_timeout = 'fast'\n", ["stream_idle_timeout must be a number of seconds"]),
        ("stream_idle_timeout = 0\n", ["stream_idle_timeout must be more than 0 seconds"]),
        ("stream_idle_timeout = nan\n", ["stream_idle_timeout must be more than 0 seconds"]),
        (
            "[providers.x]\nstream_idle_timeout = -1\n",
            ["[providers.x] stream_idle_timeout must be more than 0"],
        ),
        ("colour = 'red'\n", ["unknown setting 'colour'"]),
        ("model = 'a\n", ["invalid TOML"]),
        (
            b'theme = "ok"\nmodel = "\xff\xfe"\n',
            ["is not UTF-8 text (byte 0xff on line 2, in the value of model)"],
        ),
        (b"# caf\xe9\n", ["is not UTF-8 text (byte 0xe9 on line 1)"]),
    ],
)
def test_an_unusable_value_names_the_file_and_the_key(
    tmp_path: Path, content: bytes | str, needles: list[str]
) -> None:
    path, line = refused(tmp_path, content)
    assert line.startswith(str(path)), line
    for needle in needles:
        assert needle in line, line


def test_a_config_path_that_is_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.mkdir(parents=True)
    with pytest.raises(ConfigError) as caught:
        load_config(str(tmp_path), {"XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert f"cannot read {path}" in str(caught.value)


def test_the_project_file_is_named_when_it_is_the_bad_one(tmp_path: Path) -> None:
    project = tmp_path / "repo" / ".bastion" / "config.toml"
    project.parent.mkdir(parents=True)
    project.write_text("[providers.local]\nbase_url = 8080\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "none")}
    set_trust(tmp_path / "repo", TrustState.TRUSTED, env)
    with pytest.raises(ConfigError) as caught:
        load_config(str(tmp_path / "repo"), env)
    assert str(caught.value).startswith(f"{project}: [providers.local] base_url")


def test_valid_settings_load(tmp_path: Path) -> None:
    _, env = write_config(
        tmp_path,
        'model = "local/m"\nstream_idle_timeout = 30\n'
        '[providers.local]\nbase_url = "http://127.0.0.1:1/v1"\n'
        'headers = { "X-Title" = "bastion" }\nstream_idle_timeout = 2.5\n',
    )
    config = load_config(str(tmp_path), env)
    assert config.stream_idle_timeout == 30
    assert config.providers["local"]["stream_idle_timeout"] == 2.5


def idle_of(config: Config, spec: str, env: dict[str, Any]) -> float:
    provider, _ = model_resolver(config, env)(spec)
    value = getattr(provider, "idle_timeout", None)
    assert isinstance(value, float | int)
    return float(value)


@pytest.mark.parametrize(
    ("top", "table", "env", "expected"),
    [
        (None, None, {}, DEFAULT_IDLE_TIMEOUT),
        (30, None, {}, 30.0),
        (30, 2.5, {}, 2.5),
        (30, 2.5, {"BASTION_STREAM_IDLE_TIMEOUT": "0.3"}, 0.3),
        (None, None, {"BASTION_STREAM_IDLE_TIMEOUT": "7"}, 7.0),
    ],
)
@pytest.mark.parametrize("spec", ["local/m", "anthropic/claude", "openai/gpt"])
def test_the_idle_timeout_reaches_the_provider(
    spec: str, top: float | None, table: float | None, env: dict[str, str], expected: float
) -> None:
    name = spec.split("/")[0]
    settings: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1"}
    if table is not None:
        settings["stream_idle_timeout"] = table
    config = Config(stream_idle_timeout=top, providers={name: settings})
    assert idle_of(config, spec, env) == expected


@pytest.mark.parametrize("raw", ["soon", "0", "-3", "inf", "nan"])
def test_a_bad_idle_timeout_in_the_environment_is_named(raw: str) -> None:
    config = Config(providers={"local": {"base_url": "http://127.0.0.1:1/v1"}})
    with pytest.raises(ConfigError) as caught:
        idle_of(config, "local/m", {"BASTION_STREAM_IDLE_TIMEOUT": raw})
    assert f"BASTION_STREAM_IDLE_TIMEOUT={raw!r}" in str(caught.value)
