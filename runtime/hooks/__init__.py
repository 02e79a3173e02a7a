"""Hooks: commands the user configures to run on events of a run, as Claude Code's.

- `config`: the `[hooks]` tables (user config; a trusted project's settings.toml);
- `process`: one hook command in the command sandbox, JSON on stdin, a time limit;
- `decide`: what its exit code and output mean (block, approve, context, or nothing);
- `points`: where the model loop runs them and what the ledger keeps (`hook.ran`);
  `rounds`: the points around a model request and a tool round (PreRequest, with
  `requests`: the messages a hook sees and may replace; PostResponse, PostToolBatch);
  `running`: what every point shares (running, recording, at-most-once).

Imports the store's value types and the tools' sandbox; nothing of the front ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.hooks.config import EVENTS, HookSet, HookSpec, parse_hooks, project_hooks

if TYPE_CHECKING:
    from runtime.hooks.points import Hooks
    from tools.sandbox import SandboxPolicy

__all__ = [
    "EVENTS", "HookSet", "HookSpec", "hooks_for", "parse_hooks", "project_hooks",
]  # fmt: skip


def hooks_for(config: Any, cwd: str, trusted: bool, policy: SandboxPolicy | None) -> Hooks | None:
    """The hooks a driver of a conversation in `cwd` runs: the user's (`config.hooks`)
    and, only when the folder is `trusted`, the project's; None when there are none."""
    from runtime.hooks.points import Hooks

    found: HookSet = getattr(config, "hooks", None) or HookSet()
    if trusted:
        found = found + project_hooks(cwd)
    return Hooks(found, cwd, policy) if found else None
