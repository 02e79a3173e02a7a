"""The command sandbox through the real `bastion` command: full-auto commands run in
workspace-write by default, a write outside is refused and named to the model,
`--sandbox danger-full-access` lifts it, a project file cannot, and where no
sandbox exists the user is told once on stderr (and by `bastion doctor`)."""

from __future__ import annotations

import pytest

from tools.sandbox import probe

pytestmark = pytest.mark.e2e
SUPPORT = probe()
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock, reason=f"no Landlock here: {SUPPORT.describe()}"
)


def call(call_id, name, **arguments):
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def tool_results(server):
    return [m["content"] for m in server.requests()[-1]["messages"] if m["role"] == "tool"]


@needs_landlock
def test_full_auto_commands_are_sandboxed_and_a_flag_lifts_it(loopback, bastion, tmp_path):
    outside = tmp_path / "outside.txt"
    script = [
        call("c1", "run_command", command=f"touch in.txt; echo x > {outside}"),
        {"text": "done"},
    ]
    b = bastion(loopback(script))
    out = b.run("-p", "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    assert (b.cwd / "in.txt").exists() and not outside.exists()
    server = loopback(script)
    out = bastion(server).run(
        "-p", "go", "--approval-mode", "full-auto", "--sandbox", "danger-full-access"
    )
    assert out.returncode == 0, out.stderr
    assert outside.exists()
    assert "WITHOUT a sandbox" not in out.stderr


@needs_landlock
def test_the_model_is_told_what_was_denied(loopback, bastion, tmp_path):
    server = loopback([call("c1", "run_command", command="echo x > ../escape.txt"), {"text": "ok"}])
    out = bastion(server).run("-p", "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    [result] = tool_results(server)
    assert f"output reports a refused write to {tmp_path / 'escape.txt'}" in result
    assert "the user can add its folder to writable_paths" in result
    assert "approve this command outside the sandbox" in result  # (it failed: exit 1)


@needs_landlock
def test_a_project_cannot_open_the_sandbox(loopback, bastion, tmp_path):
    """Even in a trusted folder, a project's danger-full-access is ignored (said on stderr)
    and the command stays sandboxed."""
    server = loopback([call("c1", "run_command", command="echo x > ../escape.txt"), {"text": "ok"}])
    b = bastion(server)
    (b.cwd / ".bastion").mkdir()
    (b.cwd / ".bastion" / "config.toml").write_text('sandbox_mode = "danger-full-access"\n')
    assert b.run("trust").returncode == 0
    out = b.run("-p", "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    assert "ignored sandbox_mode 'danger-full-access'" in out.stderr
    assert not (tmp_path / "escape.txt").exists()


def test_without_a_sandbox_the_user_is_told_once_and_doctor_says_it(loopback, bastion):
    server = loopback(
        [call("c1", "run_command", command="true"), call("c2", "run_command", command="true"),
         {"text": "done"}]
    )  # fmt: skip
    b = bastion(server)
    out = b.run("-p", "go", "--approval-mode", "full-auto", env={"BASTION_SANDBOX_PROBE": "fail"})
    # Without a sandbox (so without its walls) a command asks even in full-auto: -p
    # cannot ask, so both are refused (exit 3), each saying why (issue 34).
    assert out.returncode == 3, out.stderr
    assert out.stderr.count("commands will run WITHOUT a sandbox") == 1, out.stderr
    doctor = b.run("doctor", env={"BASTION_SANDBOX_PROBE": "fail"})
    assert "FAIL sandbox   commands would run WITHOUT a sandbox" in doctor.stdout
    quiet = b.run(
        "-p", "go", "--sandbox", "danger-full-access", env={"BASTION_SANDBOX_PROBE": "fail"}
    )
    assert "WITHOUT a sandbox" not in quiet.stderr


@needs_landlock
def test_doctor_shows_the_allow_list_proxy(loopback, bastion, tmp_path):
    """With network_hosts, `bastion doctor` starts the proxy once and has it refuse a
    host; without a network namespace it says the list cannot apply."""
    b = bastion(loopback([{"text": "unused"}]))
    config = tmp_path / "config" / "bastion"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('network_hosts = ["pypi.org", "*.npmjs.org"]\n')
    doctor = b.run("doctor")
    [line] = [ln for ln in doctor.stdout.splitlines() if ln.split()[1:2] == ["network"]]
    if SUPPORT.namespace:
        assert line.startswith("ok"), doctor.stdout
        assert "but for pypi.org, *.npmjs.org, through bastion's proxy" in line
    no_ns = b.run("doctor", env={"BASTION_SANDBOX_PROBE": "no-namespace"})
    [line] = [ln for ln in no_ns.stdout.splitlines() if ln.split()[1:2] == ["network"]]
    assert line.startswith("FAIL") and "needs a network namespace" in line, line
