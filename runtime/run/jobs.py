"""A driver's background jobs: the toolbox's job table (tools/jobs.py) kept in step
with their records (runtime.store.jobs).

The jobs belong to the conversation's driver (runtime.run.driver), and so does this
keeper. When the driver starts it settles the jobs a driver that died left marked
running: each one's process tree is made sure gone (`reap`: the supervisor's
lifeline already killed it when that driver died), it is marked lost with its last
output (read from its artifact, which is written as output arrives), and a note
tells the model and the user. It seeds the table with the conversation's earlier
jobs (their output stays readable, numbers go on) and records each end as it
happens. When the driver stops (the app closes, `-p` is done, a release), every job
still running is stopped, its end recorded and the model told in a note, before the
lease is released. Whatever this cannot commit (a lease lost), the processes still
go: the table kills them when the toolbox closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from runtime.model.errors import UnknownJob
from runtime.model.jobs import LAST_OUTPUT_CHARS, JobRecord, ended_note, job_note
from runtime.store.database import Store
from runtime.store.jobs import jobs_of, settle_job
from runtime.store.tx import Tx

if TYPE_CHECKING:
    from tools.jobs import Job, JobTable

__all__ = ["JobKeeper"]

log = logging.getLogger(__name__)
Commit = Callable[[Callable[[Tx], Any]], Awaitable[Any]]
CRASHED = "bastion stopped"


class JobKeeper:
    def __init__(self, store: Store, conversation_id: str, commit: Commit, toolbox: Any) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.commit = commit
        self.toolbox = toolbox
        table = getattr(toolbox, "jobs", None) if toolbox is not None else None
        self.table: JobTable | None = table

    async def open(self) -> None:
        """Settle what a dead driver left running, then take the table over."""
        records = await self.store.read(lambda db: jobs_of(db, self.conversation_id))
        lost = [await self._lost(job) for job in records if job.running]
        if lost:
            await self._settle(lost, "crash")
            records = await self.store.read(lambda db: jobs_of(db, self.conversation_id))
        if self.table is not None:
            from tools.jobs import Job

            self.table.seed(Job.known(job.to_dict()) for job in records)
            self.table.on_end = self.ended

    async def _lost(self, job: JobRecord) -> JobRecord:
        """A job its driver left running: gone now (made sure), with its last output."""
        notes: list[str] = []
        if job.process is not None:
            from runtime.run.toolbox import reap_processes

            summary = await asyncio.to_thread(reap_processes, job.process)
            if summary.get("remaining"):
                shown = ", ".join(f"{name} ({pid})" for pid, name in summary["remaining"])
                notes.append(f"processes that may still run: {shown}")
        recover = getattr(self.toolbox, "interrupted_output", None)
        output = ""
        if recover is not None and job.process is not None:
            output = await asyncio.to_thread(recover, job.process) or ""
        return job.but(
            state="lost", end_reason=CRASHED, last_output=output[-LAST_OUTPUT_CHARS:],
            notes=tuple(notes),
        )  # fmt: skip

    async def _settle(self, jobs: list[JobRecord], why: str) -> None:
        """Record the ends of `jobs` and, for those this settles, one note for the model."""

        def build(tx: Tx) -> None:
            settled = [s for job in jobs if (s := settle_job(tx, job)) is not None]
            if settled:
                line, told = ended_note(settled, why)
                tx.add_entry(job_note(self.conversation_id, line, told, jobs=settled))

        await self.commit(build)

    async def ended(self, job: Job) -> None:
        """The table's `on_end`: a job ended while its driver runs (by itself or stopped)."""
        await self.commit(lambda tx: settle_job(tx, _record(self.conversation_id, job)))

    async def close(self, why: str) -> list[JobRecord]:
        """Stop every job still running (their ends recorded as each ends) and tell the
        model in one note; the jobs stopped, as recorded."""
        if self.table is None:
            return []
        stopped = await self.table.stop_all(why)
        if not stopped:
            return []
        numbers = {job.number for job in stopped}
        records = await self.store.read(lambda db: jobs_of(db, self.conversation_id))
        ended = [r for r in records if r.number in numbers and not r.running]
        if ended:
            await self._tell(ended, why)
        return ended

    async def listing(self) -> list[JobRecord]:
        """Every job of the conversation; a running one with its output so far."""
        records = await self.store.read(lambda db: jobs_of(db, self.conversation_id))
        live = {job.number: job for job in self.table.all()} if self.table is not None else {}
        out = []
        for record in records:
            job = live.get(record.number)
            if record.running and job is not None:
                record = record.but(last_output=job.last_output())
            out.append(record)
        return out

    async def stop(self, text: str, why: str) -> JobRecord:
        """Stop job `text` (`job_N` or `N`) for the user; its record once it has ended,
        and a note tells the model. UnknownJob if the conversation has no such job."""
        job = self.table.get(text) if self.table is not None else None
        if job is None:
            raise UnknownJob(f"no background job {text!r} in this session", hint="/jobs lists them")
        stopped = await job.stop(why)
        record = next((r for r in await self.listing() if r.number == job.number), None)
        if record is None:
            return _record(self.conversation_id, job)
        if stopped and not record.running:
            await self._tell([record], why)
        return record

    async def _tell(self, jobs: list[JobRecord], why: str) -> None:
        """One note for the model (and the user) of `jobs` ending for `why`."""
        line, told = ended_note(jobs, why)
        note = job_note(self.conversation_id, line, told, jobs)
        try:
            await self.commit(lambda tx: tx.add_entry(note))
        except Exception as exc:  # (a lease lost: the jobs are stopped all the same)
            log.warning("could not note the jobs stopped in %s: %s", self.conversation_id, exc)


def _record(conversation_id: str, job: Job) -> JobRecord:
    return JobRecord(
        conversation_id, job.number, "", job.command, job.cwd, job.state, job.exit_code,
        job.started_at, job.ended_at, job.end_reason, job.output_id,
        job.last_output(LAST_OUTPUT_CHARS), notes=tuple(job.notes),
    )  # fmt: skip
