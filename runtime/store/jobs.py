"""Background jobs as stored (migration 11): a row from the run_command call that
started the job, settled once when it ends, each change a `job.updated` event in the
same transaction. The jobs themselves are tools/jobs.py's; their keeper is
runtime.run.jobs."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.model.events import JobUpdated
from runtime.model.jobs import LAST_OUTPUT_CHARS, JobRecord

if TYPE_CHECKING:
    from runtime.model.records import ToolCallRecord
    from runtime.store.dialect import Db
    from runtime.store.tx import Tx

__all__ = ["JOB_COLUMNS", "insert_job", "job_row", "jobs_of", "settle_job"]

JOB_COLUMNS = (
    "conversation_id, number, tool_call_id, command, cwd, state, exit_code, started_at, "
    "ended_at, end_reason, output_id, last_output, sandbox, process, notes"
)


def job_row(row: Sequence[Any]) -> JobRecord:
    return JobRecord(
        conversation_id=row[0], number=int(row[1]), tool_call_id=row[2], command=row[3],
        cwd=row[4], state=row[5], exit_code=row[6], started_at=row[7], ended_at=row[8],
        end_reason=row[9], output_id=row[10], last_output=row[11],
        sandbox=json.loads(row[12] or "{}"), process=json.loads(row[13]) if row[13] else None,
        notes=tuple(json.loads(row[14] or "[]")),
    )  # fmt: skip


def jobs_of(db: Db, conversation_id: str) -> list[JobRecord]:
    """The conversation's jobs, in the order they started."""
    rows = db.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE conversation_id = ? ORDER BY number",
        (conversation_id,),
    ).fetchall()
    return [job_row(r) for r in rows]


def insert_job(tx: Tx, call: ToolCallRecord, record: dict[str, Any]) -> JobRecord | None:
    """In the transaction that records the process of `call` (run_command's `on_start`):
    the job its record names, if it names one (`job`: "job_N")."""
    name = record.get("job")
    if not isinstance(name, str) or not name.startswith("job_"):
        return None
    sandbox = record.get("sandbox") if isinstance(record.get("sandbox"), dict) else {}
    job = JobRecord(
        call.conversation_id, int(name.removeprefix("job_")), call.id,
        str(record.get("command", "")), str(record.get("cwd", ".")), "running",
        started_at=time.time(), output_id=str(record.get("output_id", "")),
        sandbox=sandbox or {}, process=record,
    )  # fmt: skip
    tx.execute(
        f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            job.conversation_id, job.number, job.tool_call_id, job.command, job.cwd, job.state,
            None, job.started_at, None, "", job.output_id, "",
            json.dumps(job.sandbox, ensure_ascii=False), json.dumps(record, ensure_ascii=False),
            "[]",
        ),
    )  # fmt: skip
    tx.emit(lambda v: JobUpdated(job.conversation_id, v, job))
    return job


def settle_job(tx: Tx, job: JobRecord) -> JobRecord | None:
    """Settle a running job with `job`'s state, exit code, reason, last output and notes
    (compare-and-set on its row still running); None, nothing written, if it was not."""
    ended = job.but(
        ended_at=job.ended_at or time.time(), last_output=job.last_output[-LAST_OUTPUT_CHARS:]
    )
    changed = tx.execute(
        "UPDATE jobs SET state = ?, exit_code = ?, ended_at = ?, end_reason = ?, "
        "last_output = ?, notes = ? WHERE conversation_id = ? AND number = ? "
        "AND state = 'running'",
        (
            ended.state, ended.exit_code, ended.ended_at, ended.end_reason, ended.last_output,
            json.dumps(list(ended.notes), ensure_ascii=False), tx.conversation_id, ended.number,
        ),
    )  # fmt: skip
    if not changed:
        return None
    rows = tx.rows(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE conversation_id = ? AND number = ?",
        (tx.conversation_id, ended.number),
    )
    stored = job_row(rows[0])
    tx.emit(lambda v: JobUpdated(stored.conversation_id, v, stored))
    return stored
