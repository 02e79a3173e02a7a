"""Hooks: commands the user configures to run on events of a run, as Claude Code's.

- `config`: the `[hooks]` tables (user config; a trusted project's settings.toml);
- `process`: one hook command in the command sandbox, JSON on stdin, a time limit;
- `decide`: what its exit code and output mean (block, approve, context, or nothing);
- `points`: where the model loop runs them and what the ledger keeps (`hook.ran`).

Imports the store's value types and the tools' sandbox; nothing of the front ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.hooks.config import EVENTS, HookSet, HookSpec, parse_hooks, project_hooks

if TYPE_CHECKING:
    from runtime.hooks.points import Hooks
    from tools.sandbox import SandboxPolicy

__all__ = [
    "EVENTS", "HookSet", "HookSpec", "hooks_for", "hooks_report", "parse_hooks", "project_hooks",
]  # fmt: skip


def hooks_for(config: Any, cwd: str, trusted: bool, policy: SandboxPolicy | None) -> Hooks | None:
    """The hooks a driver of a conversation in `cwd` runs: the user's (`config.hooks`)
    and, only when the folder is `trusted`, the project's; None when there are none."""
    from runtime.hooks.points import Hooks

    found: HookSet = getattr(config, "hooks", None) or HookSet()
    if trusted:
        found = found + project_hooks(cwd)
    return Hooks(found, cwd, policy) if found else None


def hooks_report(cwd: str) -> str:
    """`bastion doctor`'s line: the hooks a session started in `cwd` would run (the
    user's, and a trusted project's), each command whole (doctor shows its control
    characters). ConfigError when a file's [hooks] is wrong."""
    from runtime.config.load import load_config
    from runtime.config.trust import trust_of

    mine = load_config(cwd).hooks.hooks
    theirs = project_hooks(cwd).hooks if trust_of(cwd).trusted else ()
    if not mine and not theirs:
        return "none configured ([[hooks.EVENT]] tables in config.toml)"
    shown = [f"{h.event} `{h.command}`" for h in mine] + [
        f"{h.event} `{h.command}` (project)" for h in theirs
    ]
    return f"{len(shown)} configured: " + "; ".join(shown)
