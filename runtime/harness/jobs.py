"""The Harness's background jobs: the jobs of a conversation (`/jobs`, print mode's
end) and stopping one. The jobs run in the process that drives the conversation
(runtime.run.jobs); a process that does not drive it lists their records and stops
none. A mixin over `HarnessCore`; `Harness` is the public face."""

from __future__ import annotations

from runtime.harness.core import HarnessCore
from runtime.model.errors import UnknownJob
from runtime.model.jobs import JobRecord
from runtime.store.jobs import jobs_of


class JobOps(HarnessCore):
    async def jobs(self, conversation_id: str) -> tuple[JobRecord, ...]:
        """Every background job of the conversation, oldest first; a running one with
        its output so far (when this process drives it)."""
        driver = self._drivers.get(conversation_id)
        if driver is not None and driver.jobs is not None:
            return tuple(await driver.jobs.listing())
        return tuple(await self.store.read(lambda db: jobs_of(db, conversation_id)))

    async def stop_job(
        self, conversation_id: str, job: str, *, why: str = "by the user"
    ) -> JobRecord:
        """Stop job `job` (`job_N` or `N`) with its whole process tree; its record once it
        has ended (an ended job's as it was: stopping it again changes nothing); the
        model is told in a note, with `why` ("by the user"). UnknownJob if there is no such job or this process does not drive the session."""
        self._check_open()
        self._needs_driver(conversation_id, "stopping a job (it runs there)")
        driver = self._drivers.get(conversation_id)
        if driver is None or driver.jobs is None:
            raise UnknownJob(
                "this process does not run that session's jobs",
                hint="stop them from the bastion that drives the session",
            )
        return await driver.jobs.stop(job, why)
