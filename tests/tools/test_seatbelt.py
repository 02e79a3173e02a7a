"""The macOS sandbox profile (sandbox-exec cannot run here: its text is checked)."""

from __future__ import annotations

import pathlib

from tools.sandbox import SandboxMode, SandboxPolicy
from tools.seatbelt import SANDBOX_EXEC, profile, wrap


def test_the_profile_denies_writes_but_in_writable_roots_and_protects_paths(
    tmp_path: pathlib.Path,
) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    env = root / ".env"
    env.write_text("x")
    text = profile(SandboxPolicy(), (str(root), "/tmp/call-1"), [str(secret), str(env)], str(root))
    lines = text.splitlines()
    assert lines[:3] == ["(version 1)", "(allow default)", "(deny file-write*)"]
    allow = text.index("(allow file-write*")
    assert f'(subpath "{root}")' in text[allow:] and '(subpath "/tmp/call-1")' in text
    assert '(literal "/dev/null")' in text
    protected = text.index("(deny file-write*\n")
    assert protected > allow  # later rules win in SBPL
    assert f'(subpath "{root.resolve()}/.git/hooks")' in text[protected:]
    assert f'(subpath "{root.resolve()}/.bastion")' in text[protected:]
    hidden = text.index("(deny file-read* file-write*")
    assert f'(subpath "{secret.resolve()}")' in text[hidden:]
    assert f'(literal "{env.resolve()}")' in text[hidden:]
    assert text.rstrip().endswith("(deny network*)\n(allow network* (remote unix-socket))")


def test_network_and_read_only_change_the_profile_as_they_should() -> None:
    with_network = profile(SandboxPolicy(network=True), ("/w",), [], "/w")
    assert "network" not in with_network
    read_only = profile(SandboxPolicy(SandboxMode.READ_ONLY), (), [], "/w")
    assert "(subpath" not in read_only and '(literal "/dev/null")' in read_only


def test_quotes_are_escaped_and_the_command_is_wrapped() -> None:
    argv = wrap(SandboxPolicy(), ("bash", "-c", "true"), ('/w/a "b"\\c',), [], "/w")
    assert argv[0] == SANDBOX_EXEC and argv[1] == "-p" and argv[3:] == ("bash", "-c", "true")
    assert '(subpath "/w/a \\"b\\"\\\\c")' in argv[2]


def test_on_macos_the_command_is_wrapped_and_the_supervisor_applies_nothing(
    tmp_path: pathlib.Path, monkeypatch
) -> None:
    """What prepare does where probe() finds sandbox-exec (simulated: it cannot run here)."""
    from tools import sandbox_run
    from tools.sandbox import SandboxSupport

    monkeypatch.setattr(sandbox_run, "probe", lambda: SandboxSupport("darwin", seatbelt=True))
    env: dict[str, str] = {}
    prep = sandbox_run.prepare(SandboxPolicy(), str(tmp_path), ("make",), env)
    try:
        assert prep.entries == () and prep.argv[0] == SANDBOX_EXEC and prep.argv[-1] == "make"
        assert env["TMPDIR"] == prep.tmpdir and f'(subpath "{prep.tmpdir}")' in prep.argv[2]
    finally:
        prep.cleanup()
