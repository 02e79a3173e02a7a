"""What a side-effecting tool call will change, recorded before it starts, and the
restore that undoes a span of calls (a rewind offers it).

Before a call that is not replay-safe starts, `capture` notes:

- write_file / edit_file: the file's previous bytes, or that it did not exist;
- run_command in a git repository (a `.git` in the workspace or above it, found
  without running git): a snapshot of the workspace, a tree in bastion's own
  snapshot repository (runtime/run/snapshots.py: outside the workspace, with a
  fixed environment and configuration; the workspace's `.git` is never opened).
  It holds the files git would not ignore, nested repositories left out; the
  user's index, stash, refs and objects are not touched. Trees older than a month
  may be pruned; the plan then says the snapshot is gone;
- run_command elsewhere: that its effects are untracked, with a listing of the
  workspace's files (size and mtime, up to MANIFEST_LIMIT files) so a restore
  can name the files the command changed even though it cannot undo them;
- any other tool: untracked.

The record lands in the store (`call_effects`) in the transaction that moves the
call to running (`start_with_effects`, the one hook in runtime/run/calls.py).
`plan` works out, for the calls after a point, the earliest recorded state of
every path they touched and what cannot be undone; `restore` writes it back
through the tools' workspace (no path outside it is ever written). A snapshot an
older bastion made in the repository's own git (a record with `toplevel`) is not
read: that would run git in the workspace; the plan says it cannot be read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from runtime.model.records import ToolCallRecord, ToolCallState
from runtime.model.results import FileRestore, RestorePlan, RestoreReport
from runtime.run.snapshots import FORMAT, SnapshotError, SnapshotRepo
from runtime.store import blobs
from runtime.store.tx import Tx

log = logging.getLogger(__name__)
FILE_LIMIT = 16 << 20  # previous bytes kept up to this size
MANIFEST_LIMIT = 5_000  # files listed before a command outside git
_FILE_TOOLS = ("write_file", "edit_file")

Effect = dict[str, Any]


# --- capture (before the call starts) -----------------------------------------------


def capture(root: str, name: str, arguments: str) -> Effect:
    """What call `name(arguments)` in workspace `root` may change, as a JSON-able record.
    Blocking (reads a file, or runs git): call it in a thread."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return {"kind": "none", "why": "its arguments were not a JSON object"}
    if name in _FILE_TOOLS:
        return _capture_file(root, args.get("path"))
    if name == "run_command":
        shown = args.get("command") or " ".join(str(a) for a in args.get("argv") or ())
        if in_git_repository(root):
            try:
                repo = SnapshotRepo(root)
                tree = snapshot_tree(repo)
            except (SnapshotError, OSError) as exc:
                log.warning("no git snapshot before %r: %s", shown, exc)
                why = f"its git snapshot could not be made ({exc})"
                return {"kind": "untracked", "command": shown, "manifest": manifest(root),
                        "why": why}  # fmt: skip
            else:
                return {"kind": "git", "command": shown, "tree": tree, "snapshots": FORMAT,
                        "repository": repo.key}  # fmt: skip
        return {"kind": "untracked", "command": shown, "manifest": manifest(root)}
    return {"kind": "untracked", "command": name}


def capture_after(root: str, effect: Effect) -> str | None:
    """For a command recorded with a git snapshot: a tree of the workspace as the command
    left it (None for any other record, or when it cannot be made). A restore then
    undoes what happened between the two trees, the command's own changes, and leaves
    alone a file made between commands (the user's, or bastion's own /export)."""
    if effect.get("kind") != "git":
        return None
    try:
        return snapshot_tree(SnapshotRepo(root, key=effect.get("repository")))
    except (SnapshotError, OSError) as exc:
        log.warning("no git snapshot after %r: %s", effect.get("command"), exc)
        return None


async def finish_with_effects(
    toolbox: Any,
    call: ToolCallRecord,
    read: Callable[[Callable[[Any], Any]], Awaitable[Any]],
    commit: Callable[[Callable[[Tx], None]], Awaitable[Any]],
) -> None:
    """After a command recorded with a git snapshot ran: record the tree it left (one
    more snapshot, incremental; a crash before it leaves the plan comparing with the
    workspace as it is now, as before)."""
    capture = getattr(toolbox, "capture_after", None)
    if call.replay_safe or capture is None or call.name != "run_command":
        return

    def recorded(db: Any) -> Any:
        return db.execute(
            "SELECT detail FROM call_effects WHERE tool_call_id = ? AND kind = 'git'", (call.id,)
        ).fetchone()

    row = await read(recorded)
    if row is None:
        return
    detail = json.loads(row[0] or "{}")
    tree = await asyncio.to_thread(capture, {"kind": "git", **detail})
    if tree is None:
        return
    text = json.dumps({**detail, "tree_after": tree})

    def body(tx: Tx) -> None:
        tx.execute("UPDATE call_effects SET detail = ? WHERE tool_call_id = ?", (text, call.id))

    await commit(body)


def _capture_file(root: str, raw: Any) -> Effect:
    import tools
    from tools.refusal import Refused

    try:
        with tools.Workspace.open(root) as ws:
            rel = ws.parse(raw)
            try:
                fd, st = ws.open_file(rel)
            except Refused as exc:
                if exc.refusal.code.value == "NOT_FOUND":
                    return {"kind": "file", "path": rel.text, "existed": False}
                return {"kind": "none", "why": str(exc.refusal.message)}
            try:
                if st.st_size > FILE_LIMIT:
                    return {"kind": "file", "path": rel.text, "existed": True, "too_large": True}
                with os.fdopen(fd, "rb", closefd=False) as f:
                    data = f.read(FILE_LIMIT + 1)
            finally:
                os.close(fd)
            return {"kind": "file", "path": rel.text, "existed": True, "content": data}
    except (Refused, tools.WorkspaceError) as exc:
        return {"kind": "none", "why": str(exc)}


def in_git_repository(root: str) -> bool:
    """Whether `root` is in a git work tree: a `.git` in it or a folder above it (looked
    for by bastion itself; git is never run in the workspace to ask)."""
    from tools.gitguard import repository_of

    return repository_of(root) is not None


def snapshot_tree(repo: SnapshotRepo) -> str:
    """A tree of the workspace as it is now, nested repositories left out (git would
    read their HEAD and config). Raises SnapshotError or OSError."""
    from tools.gitguard import nested_repositories

    nested, _ = nested_repositories(repo.work_tree)
    return repo.snapshot(nested)


def manifest(root: str) -> dict[str, list[int]] | None:
    """{path: [size, mtime_ns]} of the files under `root` (no symlink followed, .git
    left out); None when there are more than MANIFEST_LIMIT."""
    out: dict[str, list[int]] = {}
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in files:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            out[os.path.relpath(path, root)] = [st.st_size, st.st_mtime_ns]
            if len(out) > MANIFEST_LIMIT:
                return None
    return out


# --- the hook in runtime/run/calls.py ----------------------------------------------------


async def start_with_effects(
    commit: Callable[[Callable[[Tx], ToolCallRecord | None]], Awaitable[ToolCallRecord | None]],
    toolbox: Any,
    call: ToolCallRecord,
) -> ToolCallRecord | None:
    """Move a pending call to running and, in the same transaction, record what it will
    change (side-effecting calls only, with a toolbox that can tell). None if the
    call was settled meanwhile (nothing written)."""
    effect: Effect | None = None
    capture_effects = getattr(toolbox, "capture_effects", None)
    if not call.replay_safe and capture_effects is not None:
        try:
            effect = await asyncio.to_thread(capture_effects, call.name, call.arguments)
        except Exception as exc:  # the call still runs; its plan says nothing was recorded
            log.warning("recording what %s will change failed", call.name, exc_info=True)
            effect = {"kind": "unrecorded", "why": f"{type(exc).__name__}: {exc}"}

    def body(tx: Tx) -> ToolCallRecord | None:
        started = tx.transition_tool_call(
            call.id, from_states=(ToolCallState.PENDING,), state=ToolCallState.RUNNING
        )
        if started is not None and effect is not None:
            record_effect(tx, call, effect)
        return started

    return await commit(body)


def record_effect(tx: Tx, call: ToolCallRecord, effect: Effect) -> None:
    """The effect's row; a file's previous bytes are kept once by hash (runtime.store.blobs)."""
    content = effect.get("content")
    sha = blobs.keep(tx.db, content) if content is not None else None
    detail = {k: v for k, v in effect.items() if k not in ("kind", "path", "content")}
    tx.execute(
        "INSERT INTO call_effects "
        "(tool_call_id, conversation_id, kind, path, content, content_sha256, detail, "
        "created_at) VALUES (?, ?, ?, ?, NULL, ?, ?, ?) ON CONFLICT (tool_call_id) DO UPDATE "
        "SET conversation_id = excluded.conversation_id, kind = excluded.kind, "
        "path = excluded.path, content = NULL, content_sha256 = excluded.content_sha256, "
        "detail = excluded.detail, created_at = excluded.created_at",
        (
            call.id,
            call.conversation_id,
            effect["kind"],
            effect.get("path"),
            sha,
            json.dumps(detail),  # ASCII: a name that is not UTF-8 reads back as it was
            time.time(),
        ),
    )


# --- the plan -------------------------------------------------------------------------


class SpanCall(msgspec.Struct, frozen=True):
    """A side-effecting call after the rewind point, with its record (if any)."""

    id: str
    name: str
    arguments: str
    kind: str | None
    path: str | None
    content: bytes | None
    detail: dict[str, Any]


def read_span(db: Any, conversation_id: str, position: int) -> list[SpanCall]:
    """The calls that ran (or may have) from entry `position` on, oldest first."""
    rows = db.execute(
        "SELECT c.id, c.name, c.arguments, f.kind, f.path, COALESCE(b.content, f.content), "
        "f.detail, f.content_sha256 IS NOT NULL AND b.sha256 IS NULL "
        "FROM tool_calls c JOIN entries e ON e.id = c.entry_id "
        "LEFT JOIN call_effects f ON f.tool_call_id = c.id "
        "LEFT JOIN file_blobs b ON b.sha256 = f.content_sha256 "
        "WHERE c.conversation_id = ? AND e.position >= ? AND c.replay_safe = 0 "
        "AND c.state IN ('running', 'done', 'interrupted') "
        'ORDER BY e.position, c."index"',
        (conversation_id, position),
    ).fetchall()
    return [SpanCall(r[0], r[1], r[2], r[3], r[4], r[5], _detail(r[6], bool(r[7]))) for r in rows]


def _detail(raw: str | None, reclaimed: bool) -> dict[str, Any]:
    """The effect's detail; `reclaimed`: its kept bytes went to the size cap (runtime.store.blobs)."""
    detail: dict[str, Any] = json.loads(raw) if raw else {}
    return {**detail, "reclaimed": True} if reclaimed else detail


def plan(conversation_id: str, entry_id: str, cwd: str, span: list[SpanCall]) -> RestorePlan:
    """The earliest recorded state of every path the span touched (blocking: git)."""
    decided: dict[str, FileRestore] = {}
    cannot: list[str] = []
    untracked_before: list[str] = []  # commands outside git that ran so far
    gave_up: set[str] = set()  # paths whose earliest state cannot be restored
    for call in span:
        if call.kind == "file" and call.path is not None:
            if call.path in decided or call.path in gave_up:
                continue
            if call.detail.get("too_large") or call.detail.get("reclaimed"):
                gave_up.add(call.path)  # no later state stands in for the earliest
            if call.detail.get("too_large"):
                cannot.append(f"{call.path}: it was over {FILE_LIMIT >> 20} MB before {call.name}")
                continue
            if call.detail.get("reclaimed"):
                cannot.append(
                    f"{call.path}: its bytes from before {call.name} were dropped to keep "
                    "the store under its size cap"
                )
                continue
            decided[call.path] = FileRestore(call.path, call.content, f"as before {call.name}")
            if untracked_before:
                cannot.append(
                    f"{call.path}: `{untracked_before[0]}` (outside git) ran before {call.name} "
                    "changed it; it is restored to how it was just before that change"
                )
        elif call.kind == "git":
            _plan_git(cwd, call, decided, cannot)
        elif call.kind == "untracked":
            command = str(call.detail.get("command", call.name))
            untracked_before.append(command)
            cannot.append(_untracked(cwd, command, call.detail, decided))
        elif call.kind == "none":
            continue  # the tool refused before changing anything (e.g. a bad path)
        else:
            why = call.detail.get("why")
            cannot.append(
                f"{call.name} ({call.id}): nothing was recorded about what it changed"
                + (f" ({why})" if why else "")
            )
    files = tuple(sorted(decided.values(), key=lambda f: f.path))
    return RestorePlan(conversation_id, entry_id, cwd, _with_states(cwd, files), tuple(cannot))


def _with_states(cwd: str, files: tuple[FileRestore, ...]) -> tuple[FileRestore, ...]:
    """`files`, each with the state its path is in now (what `restore` checks)."""
    import tools

    try:
        with tools.Workspace.open(cwd) as ws:
            return tuple(msgspec.structs.replace(f, seen=state_of(ws, f.path)) for f in files)
    except OSError:
        return files  # the workspace is gone: restoring will say so, path by path


def state_of(ws: Any, path: str) -> str:
    """The sha256 of the regular file at `path`, "absent", or "not a file" (a
    directory, a symlink, a path that cannot be reached); read through the workspace."""
    from tools.refusal import RefusalCode, Refused
    from tools.workspace import lookup

    try:
        rel = ws.parse(path)
        with ws.directory(rel.parent) as parent_fd:
            found = lookup(parent_fd, rel.name)
            if found is None:
                return "absent"
            if not stat.S_ISREG(found.st_mode):
                return "not a file"
            fd = os.open(rel.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent_fd)
    except Refused as exc:
        return "absent" if exc.refusal.code is RefusalCode.NOT_FOUND else "not a file"
    except OSError:
        return "not a file"
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _untracked(
    cwd: str, command: str, detail: dict[str, Any], decided: dict[str, FileRestore]
) -> str:
    text = f"`{command}` ran outside a git repository: what it changed cannot be undone"
    if detail.get("why"):
        text = f"`{command}`: {detail['why']}, so what it changed cannot be undone"
    before: dict[str, list[int]] | None = detail.get("manifest")
    if before is None:
        return text
    now = manifest(cwd) or {}
    changed = sorted(
        p for p in set(before) | set(now) if before.get(p) != now.get(p) and p not in decided
    )
    if changed:
        shown = ", ".join(changed[:10]) + (
            f" and {len(changed) - 10} more" if len(changed) > 10 else ""
        )
        text += f" (files changed since it ran: {shown})"
    return text


def _plan_git(cwd: str, call: SpanCall, decided: dict[str, FileRestore], cannot: list[str]) -> None:
    tree, command = str(call.detail["tree"]), str(call.detail.get("command", call.name))
    if call.detail.get("snapshots") != FORMAT:
        cannot.append(
            f"`{command}`: its git snapshot {tree[:12]} was made by an older bastion in the "
            "repository's own git, which bastion no longer opens; it cannot be read any more"
        )
        return
    try:
        repo = SnapshotRepo(cwd, key=call.detail.get("repository"))
        if not repo.has(tree):
            raise SnapshotError("pruned")
        after = call.detail.get("tree_after")
        # what the command changed (to the tree it left), else all since it started
        changes = repo.changes(tree, after if after and repo.has(after) else snapshot_tree(repo))
    except (SnapshotError, OSError):
        cannot.append(f"`{command}`: its git snapshot {tree[:12]} cannot be read any more")
        return
    for status, mode, blob, path in changes:
        if not status or path in decided:
            continue
        if status == "A":  # made after the snapshot
            decided[path] = FileRestore(path, None, f"not there before `{command}`")
        elif mode == "120000":
            cannot.append(
                f"{path}: it was a symbolic link before `{command}`; links are not restored"
            )
        elif mode == "160000":
            cannot.append(f"{path}: a nested repository before `{command}`; not in the snapshot")
        else:
            try:
                content = repo.blob(blob)
            except SnapshotError:
                cannot.append(f"{path}: not readable from the git snapshot before `{command}`")
                continue
            decided[path] = FileRestore(path, content, f"from the git snapshot before `{command}`")


# --- restoring ------------------------------------------------------------------------


def restore(restore_plan: RestorePlan) -> RestoreReport:
    """Write the plan back through the workspace (blocking). A path that cannot be put
    back (now a directory or a symlink, outside the workspace) is reported, not forced."""
    import tools
    from tools.refusal import Refused

    restored: list[str] = []
    removed: list[str] = []
    failed: list[tuple[str, str]] = []
    left: list[tuple[str, str]] = []
    with tools.Workspace.open(restore_plan.cwd) as ws:
        for item in restore_plan.files:
            if item.seen is not None and state_of(ws, item.path) != item.seen:
                left.append((item.path, "it changed after /rewind; left as it is now"))
                continue
            try:
                if item.content is None:
                    if _remove(ws, item.path):
                        removed.append(item.path)
                else:
                    _write(ws, item.path, item.content)
                    restored.append(item.path)
            except Refused as exc:
                failed.append((item.path, exc.refusal.message))
            except OSError as exc:
                failed.append((item.path, exc.strerror or str(exc)))
    return RestoreReport(
        tuple(restored), tuple(removed), tuple(failed), restore_plan.cannot_undo, tuple(left)
    )


def _write(ws: Any, path: str, content: bytes) -> None:
    from tools.workspace import identity, lookup, open_dir_creating
    from tools.write import check_target, land

    rel = ws.parse(path)
    parent_fd, _ = open_dir_creating(ws, rel.parent, create=True)
    assert parent_fd is not None
    try:
        existing = lookup(parent_fd, rel.name)
        check_target(existing, rel.text)
        land(
            ws,
            parent_fd,
            rel,
            content,
            expected=identity(existing) if existing else None,
            mode=existing.st_mode if existing else None,
        )
    finally:
        os.close(parent_fd)


def _remove(ws: Any, path: str) -> bool:
    from tools.refusal import RefusalCode, Refused
    from tools.workspace import lookup
    from tools.write import check_target

    rel = ws.parse(path)
    try:
        with ws.directory(rel.parent) as parent_fd:
            existing = lookup(parent_fd, rel.name)
            if existing is None:
                return False
            check_target(existing, rel.text)
            os.unlink(rel.name, dir_fd=parent_fd)
            return True
    except Refused as exc:
        if exc.refusal.code is RefusalCode.NOT_FOUND:
            return False  # its directory is gone too
        raise
