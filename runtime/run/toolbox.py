"""How the model loop sees tools: specs to offer, a policy per tool, and a runner.

`WorkspaceToolbox` adapts the `tools` package (the runtime adapts tools, never
the reverse). Tests may pass any object with the same shape.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.model.errors import ConfigError
from runtime.model.llm import ToolSpec
from runtime.model.tools import (
    OnStart,
    ToolInfo,
    ToolOutcome,
    invalid_arguments,
    unknown_tool,
)

if TYPE_CHECKING:
    from tools.netproxy import NetProxy
    from tools.sandbox import SandboxPolicy


class WorkspaceToolbox:
    """The coding tools over a descriptor-pinned workspace rooted at `root`; commands
    run in `sandbox` (default: workspace-write, network off, the default deny-list,
    which the file tools honour too)."""

    def __init__(
        self, root: str, artifacts_dir: Path, sandbox: SandboxPolicy | None = None
    ) -> None:
        import tools  # deferred: print mode without tools never pays for it
        from tools.jobs import JobTable
        from tools.sandbox import SandboxPolicy

        self._tools = tools
        self.artifacts_dir = artifacts_dir  # where long outputs spill (read_output pages them)
        self.sandbox = sandbox if sandbox is not None else SandboxPolicy()
        try:
            self._workspace = tools.Workspace.open(
                root, deny=self.sandbox.deny, private=self.sandbox.private
            )
        except tools.WorkspaceError as exc:
            raise ConfigError(
                str(exc), hint="run bastion from the project directory, or start a new session"
            ) from exc
        # The session's background jobs (tools/jobs.py); its driver keeps their records
        # (runtime.run.jobs) and ends them; closing this kills any left.
        self.jobs = JobTable()
        self._proxy = allow_list_proxy(self.sandbox)
        self._ctx = tools.ToolContext(
            workspace=self._workspace,
            artifacts_dir=artifacts_dir,
            sandbox=self.sandbox,
            jobs=self.jobs,
            proxy=self._proxy,
        )
        self._specs = tuple(
            ToolSpec(d.name, d.description, d.parameters) for d in tools.TOOLS.values()
        )

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def info(self, name: str) -> ToolInfo | None:
        tool = self._tools.TOOLS.get(name)
        return None if tool is None else ToolInfo(tool.read_only, tool.replay_safe)

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        *,
        sandbox: str | None = None,
    ) -> ToolOutcome:
        """Run tool `name`; `sandbox` ("outside" or "network", see SANDBOX_OVERRIDES)
        is what the user approved for this one call."""
        if name not in self._tools.TOOLS:
            return unknown_tool(name, list(self._tools.TOOLS))
        try:
            args = json.loads(arguments or "{}")
        except ValueError as exc:
            return invalid_arguments(name, str(exc))
        if not isinstance(args, dict):
            return invalid_arguments(name, f"got {type(args).__name__}")
        policy = self.sandbox
        if sandbox == "outside":
            policy = policy.outside()
        elif sandbox == "network":
            policy = policy.with_network()
        ctx = self._ctx._replace(on_output=on_output, on_start=on_start, sandbox=policy)
        result = await self._tools.run_tool(name, args, ctx)
        images = tuple(
            {"media_type": i.media_type, "data": i.data, "width": i.width, "height": i.height}
            for i in result.images
        )
        data = result.to_dict()
        data.pop("images", None)
        # A name that is not UTF-8 (list, glob, search) is written out (`\\xff`): the
        # store, the model's request and every screen need valid text.
        from runtime.store.surrogates import escaped, escaped_tree

        text = escaped(result.model_text())
        return ToolOutcome(ok=result.ok, model_text=text, data=escaped_tree(data), images=images)

    def resolve_path(self, path: str) -> tuple[str, ...] | None:
        """`path` as workspace segments if the workspace accepts it and nothing that
        exists on the way is a symlink (what a folder rule may allow); else None."""
        from tools.workspace import resolve_plain

        return resolve_plain(self._workspace, path)

    def preview(self, name: str, arguments: str) -> dict[str, Any] | None:
        """The change a write or edit would make, as a unified diff (bounded), computed
        from the file as it is now: {"diff", "note"}; None for other tools."""
        from tools.preview import preview

        try:
            args = json.loads(arguments or "{}")
        except ValueError:
            return None
        return preview(self._ctx, name, args) if isinstance(args, dict) else None

    def capture_effects(self, name: str, arguments: str) -> dict[str, Any]:
        """What call `name(arguments)` will change, recorded before it starts (blocking:
        reads a file or runs git; see runtime/run/effects.py)."""
        from runtime.run.effects import capture

        return capture(self._workspace.root, name, arguments)

    def capture_after(self, effect: dict[str, Any]) -> str | None:
        """The tree a command recorded by `effect` left (runtime/run/effects.py;
        blocking: runs bastion's own git)."""
        from runtime.run.effects import capture_after

        return capture_after(self._workspace.root, effect)

    def interrupted_output(self, record: dict[str, Any]) -> str | None:
        """What a command of `record` had printed when bastion stopped (its output
        artifact is written as the output arrives), bounded like a result's output;
        None if nothing was kept. Call after `reap_processes(record)`."""
        from tools.output import artifact_excerpt

        found = artifact_excerpt(self._ctx, str(record.get("output_id", "")))
        return None if found is None else found[0]

    def close(self) -> None:
        self.jobs.kill_all()
        self._workspace.close()
        if self._proxy is not None:
            self._proxy.close()
            with contextlib.suppress(OSError):
                os.rmdir(self._proxy.folder)


def allow_list_proxy(policy: SandboxPolicy) -> NetProxy | None:
    """The proxy commands reach `network_hosts` through (tools/netproxy.py), when the
    policy has hosts; it starts with the first command that uses it."""
    if not policy.hosts:
        return None
    from runtime.run.sandboxing import proxy_folder
    from tools.netproxy import NetProxy
    from tools.netrules import parse_hosts

    return NetProxy(parse_hosts(list(policy.hosts)), proxy_folder())


def reap_processes(record: dict[str, Any]) -> dict[str, Any]:
    """Make sure nothing of the command `record` (from `on_start`) still runs: kills
    what is left and returns {"killed": [[pid, name], ...], "remaining": [...],
    "note": str}. Blocking (up to about 10 s): call it through asyncio.to_thread.
    Safe after a crash, from any process, and more than once."""
    from tools.lifetime import reap  # deferred, like the tools themselves

    return reap(record).to_dict()
