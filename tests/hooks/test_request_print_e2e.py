"""The real `bastion -p` with a PreRequest hook in the user's config: the loopback
server receives the messages the hook made, and the session keeps what was said."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

HOOK = r"""#!/bin/bash
python3 -c '
import json, sys
event = json.load(sys.stdin)
msgs = event["messages"]
msgs[-1]["content"] = msgs[-1]["content"].replace("hunter2", "[password withheld]")
msgs.insert(0, {"role": "user", "content": "Team rule: answer in one line."})
print(json.dumps({"hookSpecificOutput": {"messages": msgs}}))
'
"""


def test_print_mode_sends_the_messages_a_pre_request_hook_made(loopback, bastion, tmp_path):
    server = loopback([{"text": "done"}])
    b = bastion(server)
    hook = tmp_path / "hooks" / "pre-request.sh"
    hook.parent.mkdir()
    hook.write_text(HOOK)
    hook.chmod(0o755)
    config = tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[[hooks.PreRequest]]\ncommand = "{hook}"\n')
    out = b.run("-p", "log in with hunter2", "--output-format", "json")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed", out.stderr
    sent = server.requests()[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user"]
    assert sent[1]["content"] == "Team rule: answer in one line."
    assert sent[2]["content"] == "log in with [password withheld]"
    assert "PreRequest hook `" in out.stderr and "replaced the messages" in out.stderr
    exported = b.run("export", result["session_id"], "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert "log in with hunter2" in exported.stdout  # the record keeps what the user said
