"""A real session for hook tests: the Harness, the coding tools over a workspace, and
the loopback OpenAI-compatible server recording what the model was sent."""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime import Harness
from runtime.hooks import parse_hooks
from runtime.model.records import Run
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import Config
from runtime.testing.pids import running
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import store_location
from tools.sandbox import SandboxMode, SandboxPolicy

MODEL = "openai/gpt-4.1"


def script(folder: Path, name: str, body: str) -> Path:
    """An executable bash script `name` in `folder` (a real hook command)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def alive(pid_file: Path) -> bool:
    """Whether the process whose pid a hook wrote to `pid_file` still runs: the pid is
    its PID namespace's, and the hook ran in the file's folder (runtime.testing.pids)."""
    return running(int(pid_file.read_text()), pid_file.parent)


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "edit_file", "arguments": {"path": path, "old_text": old, "new_text": new}}


def command(line: str) -> dict[str, Any]:
    return {"name": "run_command", "arguments": {"command": line}}


@dataclass
class Session:
    harness: Harness
    server: LoopbackServer
    conversation_id: str
    workspace: Path

    async def prompt(self, text: str) -> Run:
        item = await self.harness.submit(self.conversation_id, text)
        return await self.harness.wait(item.id, self.conversation_id, poll=0.05)

    def sent(self) -> list[list[dict[str, Any]]]:
        """The messages of every request the model server got, in order."""
        return [r.body["messages"] for r in self.server.requests]

    def sent_text(self, index: int = -1) -> str:
        return json.dumps(self.sent()[index], ensure_ascii=False)

    async def notes(self) -> list[str]:
        snap = await self.harness.store.snapshot(self.conversation_id)
        return [e.text for e in snap.entries if e.kind == "note"]

    async def hook_rows(self) -> list[dict[str, Any]]:
        def read(db: Any) -> list[dict[str, Any]]:
            rows = db.execute(
                "SELECT payload FROM ledger WHERE conversation_id = ? AND type = 'hook.ran' "
                "ORDER BY seq",
                (self.conversation_id,),
            ).fetchall()
            return [json.loads(r[0]) for r in rows]

        return await self.harness.store.read(read)


async def open_session(
    tmp_path: Path,
    server: LoopbackServer,
    hooks: dict[str, Any] | None,
    *,
    approval_mode: str = "full-auto",
    interactive: bool = True,
    conversation_id: str | None = None,
    sandbox: str | None = None,
    allow: tuple[str, ...] = (),
) -> Session:
    """A harness over `server` with `hooks` (a [hooks] table as data) in the user's
    config, driving a conversation in `tmp_path/ws` (created, or `conversation_id`)."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    provider = OpenAIChatProvider("openai", server.base_url)
    config = Config(hooks=parse_hooks(hooks, "config.toml"))
    policy = SandboxPolicy(mode=SandboxMode(sandbox)) if sandbox else None
    harness = await Harness.open(
        store_location(tmp_path),
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, tmp_path / "artifacts", policy),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        config=config,
    )
    if conversation_id is None:
        conv = await harness.create_conversation(
            str(workspace), settings={"model": MODEL, "approval_mode": approval_mode}
        )
        conversation_id = conv.id
    await harness.drive(conversation_id, interactive=interactive, allow=list(allow))
    return Session(harness, server, conversation_id, workspace)
