"""Keep the workspace off the import path of bastion's own interpreters.

A repository bastion is opened in is untrusted (ARCHITECTURE: trust boundary). A
Python process started with the workspace as its working directory puts it first
on `sys.path` (`python -m`), and so do relative or in-workspace entries of
`PYTHONPATH` (a project's `.envrc` often sets `PYTHONPATH=.` or `=src`): a clone
with a `tools/`, `tui/`, `runtime/` or `httpx.py` of its own would then run its
code, unsandboxed, inside bastion. So:

- children (`start_pair`) start with `-P` (no script or working directory on the
  path) and `child_environment()`: `PYTHONPATH` without relative entries or entries
  inside the workspace, and no relative `PYTHONPYCACHEPREFIX` (bytecode a repository
  could ship under that folder would be loaded);
- the `bastion` command itself drops such entries from its own `sys.path` before
  it imports anything else (`tui/cli.py`, by the same rule, inline: importing
  this module could itself be shadowed).

Where bastion itself is installed is always kept (bastion run from its own
checkout is an editable install rooted in the workspace). Standard library only:
this runs before anything else is imported.
"""

from __future__ import annotations

import os
import sys

__all__ = ["child_environment", "own_root", "unsafe_entry"]


def own_root() -> str:
    """The folder bastion's packages are imported from (site-packages, or a checkout)."""
    here = os.path.dirname(os.path.abspath(__file__))  # .../runtime/ipc
    return os.path.dirname(os.path.dirname(here))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def unsafe_entry(entry: str, workspace: str, keep: str) -> bool:
    """An import-path entry a repository in `workspace` could fill: empty or relative
    (resolved against the working directory), or inside the workspace; `keep` (where
    bastion is installed) and the interpreter's own folders never are."""
    if not entry or not os.path.isabs(entry):
        return True
    real = os.path.realpath(entry)
    kept = (keep, sys.prefix, sys.base_prefix, sys.exec_prefix)
    if any(_within(real, os.path.realpath(k)) for k in kept):
        return False
    return _within(real, os.path.realpath(workspace))


def child_environment(workspace: str | None = None, *, keys: bool = True) -> dict[str, str]:
    """This process's environment for a child interpreter of bastion's, without what
    would put the workspace on its import path or its bytecode cache there; without
    secret variables (runtime.config.secrets) unless `keys` (the harness needs them)."""
    from runtime.config.secrets import secret_names

    workspace = workspace or os.getcwd()
    env = dict(os.environ)
    if not keys:
        for name in secret_names(env):
            del env[name]
    keep = own_root()
    if "PYTHONPATH" in env:
        entries = [
            e for e in env["PYTHONPATH"].split(os.pathsep) if not unsafe_entry(e, workspace, keep)
        ]
        if entries:
            env["PYTHONPATH"] = os.pathsep.join(entries)
        else:
            del env["PYTHONPATH"]
    prefix = env.get("PYTHONPYCACHEPREFIX")
    if prefix is not None and (
        not os.path.isabs(prefix) or _within(os.path.realpath(prefix), os.path.realpath(workspace))
    ):
        del env["PYTHONPYCACHEPREFIX"]
    return env
