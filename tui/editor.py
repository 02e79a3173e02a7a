"""Ctrl+G: the prompt's text in the user's own editor, as Claude Code users know it.

The text goes to a private temporary file (0600, removed after), the app steps out of
the terminal (`App.suspend`), `$VISUAL`, else `$EDITOR`, else `vi` runs on it, and what
the file holds afterwards becomes the prompt (not sent: Enter sends it). An editor that
cannot be started, or exits with an error, leaves the prompt as it was and says why in
one line. The command comes from the user's own environment, never from a repository.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

__all__ = ["EditorFailed", "edit"]


class EditorFailed(Exception):
    """The editor could not run or gave an error: the prompt keeps its text."""


def editor_command(env: Any = os.environ) -> list[str]:
    """`$VISUAL`, else `$EDITOR`, else `vi`, split as a shell would (`code --wait`)."""
    raw = env.get("VISUAL") or env.get("EDITOR") or "vi"
    try:
        return shlex.split(raw) or ["vi"]
    except ValueError:
        return [raw]


def edit(app: Any, text: str) -> str:
    """`text` after the user edited it in their editor (blocking; the app suspended
    while it runs). EditorFailed when it could not run or exited with an error."""
    fd, path = tempfile.mkstemp(prefix="bastion-prompt-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        command = [*editor_command(), path]
        with _suspended(app):
            try:
                done = subprocess.run(command, check=False)
            except OSError as exc:
                raise EditorFailed(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
        if done.returncode != 0:
            raise EditorFailed(f"{command[0]} exited with {done.returncode}: prompt unchanged")
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().rstrip("\n")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


@contextlib.contextmanager
def _suspended(app: Any) -> Iterator[None]:
    """The terminal handed to the editor (a headless app, as in tests, has none)."""
    if app.is_headless:
        yield
        return
    with app.suspend():
        yield
