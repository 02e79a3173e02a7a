"""Background jobs at the tools' seam (tools/jobs.py): start, read on, wait, stop; the
bad inputs of issue 39 (a flood of output, a daemon, a closed stdout, a double stop,
too many jobs, a forged id)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime.testing.pids import running
from runtime.testing.waiting import until
from tools import ToolContext
from tools.jobs import FIRST_WAIT_S, JobTable

from .conftest import code

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux processes")

# The job under test: prints once, then runs until it is stopped.
READY = "import time; print('ready', flush=True); time.sleep(60)"


@pytest.fixture
def table():
    jobs = JobTable(limit=3)
    yield jobs
    jobs.kill_all()


@pytest.fixture
def jctx(ctx: ToolContext, table: JobTable) -> ToolContext:
    return ctx._replace(jobs=table)


async def test_start_read_on_and_stop(call, jctx, table, root: Path):
    script = (
        "import os, time\n"
        "open('me.pid', 'w').write(str(os.getpid()))\n"
        "print('ready', flush=True)\n"
        "time.sleep(0.5)\n"  # output that comes after run_command returned
        "print('later', flush=True)\n"
        "time.sleep(60)\n"  # then runs until stop_job
    )
    (root / "serve.py").write_text(script)
    started = await call(
        "run_command", tool_ctx=jctx, argv=["python3", "serve.py"], background=True
    )
    assert started.ok, started.model_text()
    assert started.data["job_id"] == "job_1" and started.data["state"] == "running"
    assert started.data["output"] == "ready\n"
    assert "read_output" in started.model_text() and "stop_job" in started.model_text()
    pid = int((root / "me.pid").read_text())
    assert running(pid, root)
    later = await call("read_output", tool_ctx=jctx, id="job_1", wait=20)
    assert later.data["content"] == "later\n" and later.data["job"]["state"] == "running"
    nothing = await call("read_output", tool_ctx=jctx, id="job_1")
    assert nothing.data["content"] == "" and "nothing more yet" in nothing.model_text()
    whole = await call("read_output", tool_ctx=jctx, id="job_1", offset=1)
    assert whole.data["content"] == "ready\nlater" and whole.data["id"] == "job_1"
    stopped = await call("stop_job", tool_ctx=jctx, id="job_1")
    assert stopped.ok and stopped.data["stopped"] and stopped.data["state"] == "stopped"
    assert "later" in stopped.data["last_output"]
    assert not running(pid, root)
    again = await call("stop_job", tool_ctx=jctx, id="job_1")
    assert again.ok and not again.data["stopped"]
    assert again.model_text().count("\n") == 0 and "already ended" in again.model_text()
    after = await call("read_output", tool_ctx=jctx, id="job_1", wait=5)
    assert after.data["job"]["state"] == "stopped" and "stopped" in after.model_text()


async def test_a_job_that_ends_by_itself(call, jctx):
    quick = await call("run_command", tool_ctx=jctx, command="echo one; exit 3", background=True)
    assert quick.data["state"] == "exited" and quick.data["exit_code"] == 3
    assert "exited with code 3" in quick.model_text()
    slow = await call(
        "run_command", tool_ctx=jctx, command="echo a; sleep 2.5; echo b; exit 4", background=True
    )
    assert slow.data["output"] == "a\n"  # (what came within FIRST_WAIT_S)
    read, state = "", "running"
    while state == "running":  # (its output may come a moment before its end)
        ended = await call("read_output", tool_ctx=jctx, id=slow.data["job_id"], wait=20)
        read, state = read + ended.data["content"], ended.data["job"]["state"]
    assert read == "b\n" and ended.data["job"]["exit_code"] == 4


async def test_a_daemon_and_a_closed_stdout_end_with_the_job(call, jctx, table, root: Path):
    daemon = (
        "setsid sh -c 'echo $$ > d.pid; exec sleep 1015' & "
        "exec >&- 2>&-; sleep 60"  # closes its output, then runs on
    )
    started = await call("run_command", tool_ctx=jctx, command=daemon, background=True)
    assert started.data["state"] == "running"
    pid = int((await until(lambda: _read(root / "d.pid"), "the daemon's pid")).strip())
    assert running(pid, root)
    read = await call("read_output", tool_ctx=jctx, id="job_1", wait=0.2)
    assert read.data["job"]["state"] == "running"  # its output ended; it did not
    await table.stop_all("test")
    assert not running(pid, root)


async def test_a_flood_is_bounded(call, jctx, table, ctx):
    from tools.command import MAX_ARTIFACT_BYTES

    flood = await call(
        "run_command", tool_ctx=jctx, command="yes 0123456789abcdef | head -c 80000000",
        background=True,
    )  # fmt: skip
    job = table.get(flood.data["job_id"])
    assert job is not None and len(flood.data["output"]) <= 16 * 1024
    await until(lambda: not job.running, "the flood to end", timeout=60)
    assert job.output_bytes == 80_000_000 and job.sink is not None
    assert job.sink.written == MAX_ARTIFACT_BYTES and len(job.sink.tail) <= 32 * 1024
    size = (Path(ctx.artifacts_dir) / f"{job.output_id}.log").stat().st_size
    assert size == MAX_ARTIFACT_BYTES
    page = await call("read_output", tool_ctx=jctx, id=job.id)
    assert len(page.data["content"]) <= 64 * 1024 + 100


async def test_too_many_jobs_and_forged_ids(call, jctx, ctx):
    for _ in range(3):
        up = await call("run_command", tool_ctx=jctx, command="echo up; sleep 60", background=True)
        assert up.ok
    fourth = await call("run_command", tool_ctx=jctx, command="sleep 60", background=True)
    assert code(fourth) == "TOO_LARGE" and "stop_job" in fourth.model_text()
    assert len(fourth.model_text().splitlines()) == 2  # the refusal and its hint
    for forged in ("job_99", "job_0", "job_1/../x", "job_"):
        assert code(await call("read_output", tool_ctx=jctx, id=forged)) == (
            "SPILL_REFERENCE_UNKNOWN"
        )
        assert code(await call("stop_job", tool_ctx=jctx, id=forged)) == "SPILL_REFERENCE_UNKNOWN"
    # another session's table does not know this one's jobs
    other = ctx._replace(jobs=JobTable())
    assert code(await call("read_output", tool_ctx=other, id="job_1")) == "SPILL_REFERENCE_UNKNOWN"
    # and without a session there are no jobs at all
    alone = await call("run_command", command="sleep 60", background=True)
    assert code(alone) == "FORBIDDEN"


async def test_the_first_output_wait_is_bounded(call, jctx):
    silent = await call("run_command", tool_ctx=jctx, command="sleep 60", background=True)
    assert silent.data["output"] == "" and silent.data["duration_ms"] < (FIRST_WAIT_S + 2) * 1000
    waited = await call("read_output", tool_ctx=jctx, id=silent.data["job_id"], wait=0.3)
    assert waited.data["content"] == "" and waited.data["job"]["state"] == "running"


def _read(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except FileNotFoundError:
        return None
