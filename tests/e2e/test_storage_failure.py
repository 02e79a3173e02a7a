"""Issue 37 item 11, seed 004 ("a storage error ends the Harness with `SessionFailed`"),
through the real command: the store "fills" while an answer streams, by the failpoint
`BASTION_FAILPOINT=store.full:@FLAG` (every write fails once FLAG exists, as SQLite
fails them on a full disk), so no root is needed and the test picks the moment. The
real full disk, on a tmpfs: tests/e2e/test_disk_full.py.

Each front end says it in one line and ends with exit 1 (the README's contract): `-p`
(text and json), an attached second terminal, and `bastion acp` (a JSON-RPC error for
the prompt); the app and `--plain` in a terminal: tests/tui/test_session_failed_tmux.py.
Afterwards, with the failpoint gone ("space is back"), `sessions`, `export` and `-r`
work and the answer goes on from what was saved.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from runtime.testing.waiting import wait_for

pytestmark = pytest.mark.e2e

WORDS = "".join(f"w{i:04d} " for i in range(3000))  # 18,000 characters
SLOW = {"text": WORDS, "chunk_size": 12, "delay_ms": 4}  # ~6 s: the test fills the disk first


def saved_text(store: Path) -> str:
    """The text checkpointed so far (read-only, as another process reads it)."""
    if not store.exists():
        return ""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=10)
    try:
        row = db.execute(
            "SELECT group_concat(text, '') FROM (SELECT text FROM chunks "
            "WHERE kind = 'text' ORDER BY start)"
        ).fetchone()
        return row[0] or ""
    except sqlite3.OperationalError:  # (not created yet)
        return ""
    finally:
        db.close()


def fill_when_streaming(b, flag: Path) -> None:
    """Once part of the answer is saved, the disk "fills" (every write from now fails)."""
    wait_for(lambda: len(saved_text(b.home / "bastion.sqlite")) > 100, "part of the answer saved")
    flag.touch()


def only_session(b) -> str:
    listed = b.run("sessions", "--all")
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.strip().splitlines()
    return line.split()[0]


def test_print_mode_says_it_in_one_line_exits_1_and_the_session_resumes(
    loopback, bastion, tmp_path
):
    flag = tmp_path / "full"
    b = bastion(loopback([SLOW, {"text": "The rest."}]))
    b.env["BASTION_FAILPOINT"] = f"store.full:@{flag}"
    proc = b.popen("-p", "count")
    fill_when_streaming(b, flag)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    (line,) = err.strip().splitlines()
    conv_id = only_session(b)
    assert line.startswith(f"bastion: the session stopped: the disk holding {b.home}"), line
    assert f"is full — free some space on that disk, then `bastion -r {conv_id}` goes on" in line
    assert "characters above were saved" in line
    saved = saved_text(b.home / "bastion.sqlite")
    assert out.rstrip("\n") == saved and WORDS.startswith(saved)  # what was saved, shown

    del b.env["BASTION_FAILPOINT"]  # space is back
    exported = b.run("export", conv_id)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["entries"][-1]["text"] == saved
    resumed = b.run("-p", "-r", conv_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "The rest."


def test_print_mode_json_names_the_failure_and_its_reason(loopback, bastion, tmp_path):
    flag = tmp_path / "full"
    b = bastion(loopback([SLOW]))
    b.env["BASTION_FAILPOINT"] = f"store.ioerr:@{flag}"
    proc = b.popen("-p", "count", "--output-format", "json")
    fill_when_streaming(b, flag)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "failed"
    assert result["error"]["code"] == "session_failed"
    assert result["error"]["reason"] == "store_io"
    assert WORDS.startswith(result["result"]) and result["result"]
    assert "Traceback" not in err


def test_an_attached_terminal_says_it_in_one_line_and_exits_1(loopback, bastion, tmp_path):
    flag = tmp_path / "full"
    b = bastion(loopback([SLOW]))
    b.env["BASTION_FAILPOINT"] = f"store.full:@{flag}"
    driver = b.popen("-p", "count")
    try:
        wait_for(lambda: saved_text(b.home / "bastion.sqlite"), "the answer to stream")
        conv_id = only_session(b)
        env = {k: v for k, v in b.env.items() if k != "BASTION_FAILPOINT"}
        attached = subprocess.Popen(
            b.cmd("attach", conv_id, "--plain"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=b.cwd,
            env=env,
        )
        assert attached.stdout is not None
        first = attached.stdout.read(6)  # it follows: the answer so far is printed
        assert first.startswith("›") or first.strip(), first
        flag.touch()
        _, err = attached.communicate(timeout=60)
    finally:
        driver.communicate(timeout=60)
    assert attached.returncode == 1, err
    said = [x for x in err.splitlines() if x.startswith("bastion:")]
    assert len(said) == 1 and "the session stopped: the disk holding" in said[0], err
    assert f"bastion -r {conv_id}" in said[0] and "Traceback" not in err
    assert driver.returncode == 1


async def test_acp_answers_the_prompt_with_a_json_rpc_error_not_a_hang(loopback, bastion, tmp_path):
    import asyncio

    from acp import RequestError, text_block

    from tests.e2e.test_acp import Editor, acp_process, stderr_of

    flag = tmp_path / "full"
    b = bastion(loopback([SLOW, {"text": "unreached"}]))
    b.env["BASTION_FAILPOINT"] = f"store.full:@{flag}"
    editor = Editor()
    async with acp_process(b, editor) as (conn, _):
        new = await conn.new_session(cwd=str(b.cwd), mcp_servers=[])
        prompt = asyncio.ensure_future(
            conn.prompt(session_id=new.session_id, prompt=[text_block("count")])
        )
        await editor.wait_for(lambda: len(saved_text(b.home / "bastion.sqlite")) > 100)
        flag.touch()
        with pytest.raises(RequestError) as raised:
            await asyncio.wait_for(prompt, 30)
        assert raised.value.data == {"code": "session_failed", "reason": "store_full"}
        assert "the disk holding" in str(raised.value) and new.session_id in str(raised.value)
        with pytest.raises(RequestError) as again:  # the next prompt: the same, at once
            await asyncio.wait_for(
                conn.prompt(session_id=new.session_id, prompt=[text_block("more")]), 30
            )
        assert again.value.data["code"] == "session_failed"
    assert "Traceback" not in stderr_of(b)
