"""The small explicit context every tool runs with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from tools.access import Access, AuthorizePath
from tools.limits import Limits
from tools.result import ToolResult

__all__ = ["Access", "AuthorizePath", "JobHost", "ToolContext"]

if TYPE_CHECKING:
    import pathlib

    from tools.netproxy import NetProxy
    from tools.sandbox import SandboxPolicy
    from tools.workspace import Workspace


class JobHost(Protocol):
    """A session's background jobs as the tools reach them (``tools.jobs.JobTable``):
    run_command starts one, read_output reads one, stop_job stops one."""

    async def start(self, ctx: ToolContext, args: Any, rel: Any) -> ToolResult: ...

    async def read(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult: ...

    async def stop(self, text: str, why: str) -> dict[str, Any] | None: ...


class ToolContext(NamedTuple):
    """``authorize_path(path, access)`` is the host hook; the default write policy
    (never inside ``.git/`` or ``.bastion/``) applies in addition to it.
    ``on_output(text)``, when given, receives a running command's output as it
    arrives (for a live view); the result still carries the bounded whole.
    ``on_start(record)``, when given, is called once a command has started with a
    JSON-able record of its processes, which ``tools.reaper.reap(record)`` uses to
    make sure they are gone (after a crash, say); an awaitable it returns is awaited
    before the command is waited for. If it raises, the command is killed and the
    call fails (INTERNAL): a command that could not be recorded does not run on.
    ``sandbox``: the policy run_command applies (``tools/sandbox.py``); None runs
    commands unsandboxed (the runtime always passes one). ``jobs``: the session's
    background jobs (``tools/jobs.py``); None refuses ``background: true`` (a one-shot
    ``python -m tools`` run has no session for a job to belong to). ``proxy``: the
    network allow-list's proxy (``tools/netproxy.py``) for a policy with ``hosts``;
    without it such a policy keeps the network off."""

    workspace: Workspace
    limits: Limits = Limits()  # immutable: one shared default is safe
    authorize_path: AuthorizePath | None = None
    artifacts_dir: pathlib.Path | None = None
    env: Mapping[str, str] | None = None
    on_output: Callable[[str], None] | None = None
    on_start: Callable[[dict[str, Any]], object] | None = None
    sandbox: SandboxPolicy | None = None
    jobs: JobHost | None = None
    proxy: NetProxy | None = None
