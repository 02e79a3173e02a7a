"""write_file: create or (with overwrite) replace a file, atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

from tools.context import Access, ToolContext
from tools.digest import sha256
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded
from tools.workspace import (
    Identity,
    RelPath,
    Workspace,
    identity,
    is_directory,
    lookup,
    open_dir_creating,
    special_file,
    symlink,
)

NAME = "write_file"
DESCRIPTION = (
    "Write a whole file in the workspace (UTF-8). Missing parent directories are "
    "created and listed in `created_directories`. An existing file is only replaced "
    "when `overwrite` is true; prefer edit_file for changing part of a file. The write "
    "is atomic and keeps an existing file's permissions."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Workspace-relative path, '/' separated."},
        "content": {"type": "string", "description": "The complete new content."},
        "overwrite": {"type": "boolean", "description": "Replace an existing file."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class WriteArgs:
    path: str
    content: str
    overwrite: bool = False

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> WriteArgs:
        return cls(args["path"], args["content"], bool(args.get("overwrite", False)))


def encode(content: str) -> bytes:
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "content is not valid Unicode (lone surrogate)",
            "send the text as proper UTF-8",
        ) from None


def check_target(st: os.stat_result | None, shown: str) -> None:
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise symlink(shown)
    if stat.S_ISDIR(st.st_mode):
        raise is_directory(shown)
    if not stat.S_ISREG(st.st_mode):
        raise special_file(shown)


def land(
    ws: Workspace,
    parent_fd: int,
    rel: RelPath,
    data: bytes,
    *,
    expected: Identity | None,
    mode: int | None,
) -> None:
    """Write ``data`` to a temp file in the pinned parent, fsync, re-check, rename.

    ``expected`` is the identity the target had when it was read (None: the target
    must still not exist). The parent directory is re-resolved from the root and
    must still be the one we hold, so the write lands where the path says.
    """
    name = rel.name
    tmp = f".{name[:80]}.{os.urandom(6).hex()}.bastion-tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o666,
        dir_fd=parent_fd,
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode))
            os.fsync(fd)
        finally:
            os.close(fd)
        verify_still(ws, parent_fd, rel, expected)
        publish(parent_fd, tmp, name, rel.text, replace=expected is not None)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent_fd)
        raise
    with contextlib.suppress(OSError):
        os.fsync(parent_fd)


def verify_still(ws: Workspace, parent_fd: int, rel: RelPath, expected: Identity | None) -> None:
    with ws.directory(rel.parent) as again:
        if identity(os.fstat(again)) != identity(os.fstat(parent_fd)):
            raise moved(rel)
    current = lookup(parent_fd, rel.name)
    if (identity(current) if current else None) != expected:
        raise moved(rel)


def moved(rel: RelPath) -> Refused:
    return Refused(
        RefusalCode.CONFLICT,
        f"'{rel.text}' changed on disk while it was being written",
        "read it again and retry",
    )


def publish(parent_fd: int, tmp: str, name: str, shown: str, *, replace: bool) -> None:
    if replace:
        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        return
    try:  # link(2) never clobbers: a file created meanwhile makes this fail
        os.link(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd, follow_symlinks=False)
    except FileExistsError:
        raise Refused(
            RefusalCode.CONFLICT,
            f"'{shown}' appeared while it was being written",
            "read it, then write with overwrite: true or use edit_file",
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        return
    os.unlink(tmp, dir_fd=parent_fd)


def write_file(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = WriteArgs.from_dict(raw_args)
    ws = ctx.workspace
    rel = ws.parse(args.path)
    if not rel.parts:
        raise is_directory(rel.text)
    data = encode(args.content)
    _, plan = open_dir_creating(ws, rel.parent, create=False)
    ws.authorize(rel, Access.WRITE, ctx.authorize_path)
    existing: os.stat_result | None = None
    if not plan:
        with ws.directory(rel.parent) as probe:
            existing = lookup(probe, rel.name)
        check_target(existing, rel.text)
        if existing is not None and not args.overwrite:
            raise Refused(
                RefusalCode.CONFLICT,
                f"'{rel.text}' already exists",
                "pass overwrite: true to replace it, or use edit_file to change part",
            )
    parent_fd, created = open_dir_creating(ws, rel.parent, create=True)
    assert parent_fd is not None
    try:
        existing = lookup(parent_fd, rel.name)
        check_target(existing, rel.text)
        if existing is not None and not args.overwrite:
            raise Refused(
                RefusalCode.CONFLICT,
                f"'{rel.text}' already exists",
                "pass overwrite: true to replace it, or use edit_file to change part",
            )
        land(
            ws,
            parent_fd,
            rel,
            data,
            expected=identity(existing) if existing else None,
            mode=existing.st_mode if existing else None,
        )
    finally:
        os.close(parent_fd)
    return ToolResult.success(
        NAME,
        {
            "path": rel.text,
            "bytes": len(data),
            "sha256": sha256(data),
            "overwritten": existing is not None,
            "created_directories": created,
        },
    )


def format_text(data: dict[str, Any]) -> str:
    verb = "Overwrote" if data.get("overwritten") else "Created"
    text = f"{verb} {data['path']} ({data['bytes']} bytes, sha256 {data['sha256']})"
    if data.get("created_directories"):
        text += "\ncreated directories: " + ", ".join(data["created_directories"])
    return text


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=False,
    replay_safe=False,
    run=offloaded(NAME, write_file),
    run_sync=write_file,
)
