"""Issue 25, item 5 (resume), end to end: `kill -9` of `bastion -p` mid-answer, then
`bastion -p -r ID`. The kept partial is sent to the model marked as cut off with a
note to go on from it; stdout gets only the rest; stderr says so in one line; the
transcript holds the partial (interrupted) and the rest under it, no text twice.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from runtime.context.compaction import CUT_OFF
from runtime.context.messages import CONTINUE
from runtime.testing.waiting import wait_for
from tests.e2e.test_crash_matrix import store_state

pytestmark = pytest.mark.e2e

TEXT = "".join(f"{i:04d} " for i in range(400))


def test_resume_partial_after_kill_is_continued_not_repeated(loopback, bastion):
    server = loopback([{"text": TEXT, "chunk_size": 5, "delay_ms": 20}, {"text": "THE REST."}])
    b = bastion(server)
    sid = str(uuid.uuid4())
    proc = b.popen("-p", "--output-format", "stream-json", "--session-id", sid, "count")
    deltas = 0
    deadline = time.monotonic() + 30
    for line in proc.stdout:  # kill once a good part was shown, and committed
        deltas += line.startswith('{"type": "text.delta"')
        if deltas >= 40 or time.monotonic() > deadline:
            break

    def committed() -> bool:
        entries, _ = store_state(b.home, sid)
        return any(status == "streaming" and len(text) > 20 for status, text in entries.values())

    wait_for(committed, "part of the answer committed")
    proc.kill()
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()

    resumed = b.run("-p", "-r", sid)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "THE REST."
    said = [line for line in resumed.stderr.splitlines() if "cut off" in line]
    assert len(said) == 1 and "kept as interrupted" in said[0], resumed.stderr

    entries = json.loads(b.run("export", sid).stdout)["entries"]
    answers = [(e["status"], e["text"]) for e in entries if e["kind"] == "assistant"]
    assert len(answers) == 2, answers
    (status, partial), rest = answers
    assert status == "interrupted" and len(partial) > 20 and TEXT.startswith(partial)
    assert rest == ("complete", "THE REST.")

    sent = server.requests()[-1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "user"]
    assert sent[-3]["content"] == "count"
    assert sent[-2]["content"] == partial + "\n\n" + CUT_OFF
    assert sent[-1]["content"] == CONTINUE
