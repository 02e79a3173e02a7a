"""The small explicit context every tool runs with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from tools.limits import Limits

if TYPE_CHECKING:
    import pathlib

    from tools.workspace import Workspace


class Access(StrEnum):
    READ = "read"
    WRITE = "write"


AuthorizePath = Callable[[str, Access], bool]


class ToolContext(NamedTuple):
    """``authorize_path(path, access)`` is the host hook; the default write policy
    (never inside ``.git/`` or ``.bastion/``) applies in addition to it.
    ``on_output(text)``, when given, receives a running command's output as it
    arrives (for a live view); the result still carries the bounded whole."""

    workspace: Workspace
    limits: Limits = Limits()  # immutable: one shared default is safe
    authorize_path: AuthorizePath | None = None
    artifacts_dir: pathlib.Path | None = None
    env: Mapping[str, str] | None = None
    on_output: Callable[[str], None] | None = None
