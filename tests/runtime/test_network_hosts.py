"""`network_hosts`: the user's list, a trusted project's narrowing of it, bad entries
named in one line, the policy and doctor's line, and a refused host through the
real toolbox (its proxy started by the first command and gone with the toolbox)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from runtime.model.errors import ConfigError
from runtime.run.sandboxing import choose_sandbox, network_report
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import load_config
from tests.runtime.test_sandboxing import configs
from tools.sandbox import probe


def test_the_users_list_is_normalised(tmp_path: Path) -> None:
    user = 'network_hosts = ["PyPI.org.", "*.npmjs.org", "bücher.de:8443", "[::1]:81"]\n'
    config = load_config(*configs(tmp_path, user))
    assert config.network_hosts == ("pypi.org", "*.npmjs.org", "xn--bcher-kva.de:8443", "[::1]:81")
    policy = choose_sandbox(config, "full-auto")
    assert policy.hosts == config.network_hosts and policy.proxied
    assert "network off but for pypi.org, *.npmjs.org" in policy.describe()
    assert not policy.with_network().proxied and not policy.outside().proxied


def test_a_project_only_narrows_the_list(tmp_path: Path) -> None:
    user = 'network_hosts = ["pypi.org", "*.example.com"]\n'
    project = 'network_hosts = ["pypi.org", "api.example.com", "evil.com", "pypi.org:22"]\n'
    config = load_config(*configs(tmp_path, user, project))
    assert config.network_hosts == ("pypi.org", "api.example.com")
    assert not config.notes
    emptied = load_config(*configs(tmp_path / "b", user, "network_hosts = []\n"))
    assert emptied.network_hosts == ()
    none_of_mine = load_config(*configs(tmp_path / "c", "", 'network_hosts = ["pypi.org"]\n'))
    assert none_of_mine.network_hosts == ()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('"pypi.org"', "must be an array"),
        ('["https://pypi.org"]', "'https://pypi.org': write the host alone"),
        ('["*.com"]', "two labels or more"),
        ('["pypi.org:99999"]', "not a port"),
        ('["10.0.0.0/8"]', "write the host alone"),
        ("[1]", "int: not a string"),
    ],
)
def test_bad_entries_name_the_file_and_the_entry(tmp_path: Path, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(*configs(tmp_path, f"network_hosts = {value}\n"))
    text = str(caught.value)
    assert "config.toml: network_hosts: " in text and says in text and "\n" not in text


def test_doctor_says_what_commands_may_reach(tmp_path: Path) -> None:
    ok, line = network_report(load_config(*configs(tmp_path, "")), "full-auto")
    assert ok and line.startswith("off for commands")
    on = load_config(*configs(tmp_path / "b", "network = true\n"))
    assert network_report(on, "full-auto") == (True, "commands may use the whole network")
    listed = load_config(*configs(tmp_path / "c", 'network_hosts = ["pypi.org"]\n'))
    ok, line = network_report(listed, "full-auto")
    if probe().namespace:
        assert ok, line
        assert "but for pypi.org, through bastion's proxy" in line and "refused" in line
    else:
        assert not ok and "needs a network namespace" in line


@pytest.mark.skipif(
    not (probe().landlock and probe().namespace), reason=f"no namespaces: {probe().describe()}"
)
async def test_a_refused_host_is_one_line_through_the_toolbox(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    root = tmp_path / "ws"
    root.mkdir()
    config = load_config(*configs(tmp_path, 'network_hosts = ["pypi.org"]\n'))
    box = WorkspaceToolbox(str(root), tmp_path / "artifacts", choose_sandbox(config, "full-auto"))
    proxy = box._proxy
    assert proxy is not None and not proxy.running  # started by the first command
    try:
        out = await box.run("run_command", '{"command": "curl -sS -m 10 https://example.com/"}')
        assert proxy.running
        lines = [ln for ln in out.model_text.splitlines() if "example.com" in ln]
        assert lines, out.model_text
        assert lines[-1] == (
            "[network: bastion's proxy refused example.com:443 (not in network_hosts); "
            "only the user can add it to network_hosts]"
        )
        assert out.data["data"]["network_refused"][0]["host"] == "example.com:443"
        assert os.listdir(proxy.folder) == []  # the call's channel is gone with it
    finally:
        box.close()
    assert not proxy.running and not os.path.exists(proxy.folder)


def test_the_proxy_folder_is_short_enough_for_a_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.run.sandboxing import proxy_folder

    monkeypatch.setenv("BASTION_HOME", str(tmp_path / ("x" * 90)))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    folder = proxy_folder()
    assert len(folder) <= 80 and f"bastion-{os.getuid()}" in folder
    assert os.stat(os.path.dirname(folder)).st_mode & 0o077 == 0
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "h"))
    if len(str(tmp_path / "h")) < 60:
        assert proxy_folder().startswith(str(tmp_path / "h"))


def test_a_gone_processs_proxy_folder_is_swept_and_a_live_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash leaves `proxy/PID` with its sockets: the next proxy folder made removes
    it; a live process's folder, links and other names stay."""
    import socket
    import tempfile

    from runtime.run.sandboxing import proxy_folder

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="bh") as short:  # (socket paths)
        monkeypatch.setenv("BASTION_HOME", short)
        parent = Path(short) / "proxy"
        gone = parent / "4194999"  # above any pid_max: no such process
        gone.mkdir(parents=True)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(gone / "c1.sock"))
        listener.close()
        alive = parent / "1"  # init: always there
        alive.mkdir()
        (parent / "notes").mkdir()
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "keep").write_text("x")
        (parent / "4194998").symlink_to(outside)
        assert proxy_folder().startswith(str(parent))
        assert not gone.exists()
        assert alive.exists() and (parent / "notes").exists()
        assert (outside / "keep").exists() and (parent / "4194998").is_symlink()
