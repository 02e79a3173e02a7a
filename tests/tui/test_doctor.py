"""`bastion doctor`: one line per check, and the search path says why it is Python."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tools import native
from tui.cli import main

ROOT = Path(__file__).parents[2]


def test_doctor_names_the_python_search_path_and_why(tmp_path):
    env = {**os.environ, "BASTION_NATIVE": "0", "BASTION_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "doctor"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert (
        lines[0] == "ok   search    python search path (BASTION_NATIVE=0 asks for the Python path)"
    )
    assert any(line.startswith("ok   store     ") and "not created yet" in line for line in lines)


def test_doctor_reports_a_missing_native_module_and_the_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(native, "NATIVE", None)
    monkeypatch.setattr(native, "REASON", "the native module did not import: No module named x")
    monkeypatch.setenv("BASTION_HOME", str(tmp_path))
    db = sqlite3.connect(tmp_path / "bastion.sqlite")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '999')")
    db.commit()
    db.close()
    assert main(["doctor"]) == 1  # a store newer than this bastion is a failure
    out = capsys.readouterr().out
    assert "python search path (the native module did not import: No module named x)" in out
    assert "FAIL store" in out and "schema 999, newer than" in out
    if sys.platform.startswith("linux"):
        assert "ok   commands  every process a command starts is tracked" in out
    assert main(["doctor", "--bogus"]) == 2


def test_doctor_lists_the_instruction_files(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "CLAUDE.md").write_text("root rules\n")
    user = tmp_path / "config" / "bastion" / "AGENTS.md"
    user.parent.mkdir(parents=True)
    user.write_text("mine\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(repo)
    main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    agents = next(line for line in lines if line.startswith("ok   agents    "))
    assert agents.endswith(f"{user} (5 bytes), {repo / 'CLAUDE.md'} (11 bytes)")


def test_doctor_reports_trust_privacy_and_a_broken_trust_file(tmp_path, monkeypatch, capsys):
    """Issue 23: whether this folder is trusted (and what was ignored), the store's modes,
    and a trust file that cannot be read (which counts as no decision) as a failure."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".bastion").mkdir()
    (tmp_path / ".bastion" / "config.toml").write_text('model = "x/m"\n')
    main(["doctor"])
    out = capsys.readouterr().out
    assert f"ok   trust     {tmp_path} is not trusted" in out
    assert ".bastion/config.toml (model) was ignored" in out
    assert "ok   private" in out
    trust_file = Path(os.environ["XDG_CONFIG_HOME"]) / "bastion" / "trusted.toml"
    trust_file.parent.mkdir(parents=True, exist_ok=True)
    trust_file.write_text("[folders\n")
    assert main(["doctor"]) == 1
    assert f"FAIL trust     {trust_file}: invalid TOML" in capsys.readouterr().out


def test_doctor_help_says_what_each_check_is_and_exits_0(capsys):
    from tui.doctor import CHECKS

    assert main(["doctor", "--help"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("usage: bastion doctor")
    assert len(said.splitlines()) > len(CHECKS)  # a line per check, and the exit codes
    assert main(["doctor", "nonsense"]) == 2
    assert "unknown argument 'nonsense'" in capsys.readouterr().err


def test_without_the_native_module_doctor_says_the_fast_path_is_off_and_how_to_build_it():
    """Issue 38: an install without RE2's headers builds no tools._native and pip says
    nothing; `doctor` says the fast path is off, why, and what to install."""
    code = (
        "import sys\n"
        "sys.modules['tools._native'] = None  # (as if it had not been built)\n"
        "from tui.doctor import search_path\n"
        "print(search_path().line)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "BASTION_NATIVE": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("python search path (the native module was not built: ")
    assert "apt install libre2-dev" in line and "brew install re2" in line
    assert "pip install -e ." in line and "slower" in line
