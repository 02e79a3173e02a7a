"""`@path` mentions: the workspace's files for completion, and attaching them on send.

Every front end sends the same thing: `expand_mentions(text, root)` turns each
`@path` that names a file of the workspace at `root` into an attachment after
the prompt, read through the tools' workspace (so `..`, absolute paths and
symlinks are refused exactly as the model's own `read_file` refuses them):

    explain @src/x.py

    <file path="src/x.py" length="1234">
    ...the file...
    </file>

A file is cut at `MAX_FILE_BYTES` (with a note saying how much was kept), a
binary one is not attached (a note says why), and all attachments together stay
under `MAX_TOTAL_BYTES`. `length` counts the characters of the body, so
`split_attachments` finds the prompt and the attachments again however the
files read (a front end shows them compactly). A mention that names nothing
(`@alice`) is left as it was.

`WorkspaceFiles` lists the workspace's files for `@` completion through the
glob tool (same path rules, `.gitignore` and the usual ignores honoured),
bounded in count and time, and `fuzzy_filter` ranks them for what was typed.
"""

from __future__ import annotations

import os
import re
import threading
import time
from html import escape, unescape
from typing import TYPE_CHECKING, Protocol

import msgspec

if TYPE_CHECKING:
    from runtime.model.results import McpResource
    from tools import Workspace

__all__ = [
    "MAX_FILE_BYTES",
    "Attachment",
    "Expansion",
    "ResourceSource",
    "WorkspaceFiles",
    "attach_resources",
    "expand_mentions",
    "expand_prompt",
    "fuzzy_filter",
    "mention_at",
    "split_attachments",
]

MAX_FILE_BYTES = 256 * 1024
MAX_TOTAL_BYTES = 1024 * 1024
MAX_ATTACHMENTS = 20
LIST_MAX_FILES = 50_000  # completion lists at most this many files ...
LIST_TIME_BUDGET = 2.0  # ... found within this many seconds
STALE_AFTER = 5.0  # seconds after which a listing is refreshed when asked for

# `@path` or `@"path with spaces"`, at the start or after whitespace.
_MENTION = re.compile(r'(?:(?<=\s)|^)@(?:"([^"\n]+)"|(\S+))')
_TRAILING = ".,;:!?)]}'\""
# `@SERVER:scheme:…`: an MCP resource (runtime.mcp.extras), never a workspace path.
_RESOURCE = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*:[A-Za-z][A-Za-z0-9+.-]*:\S+")
_HEADER = re.compile(r'<file path="([^"]*)"(?: note="([^"]*)")?(?: length="(\d+)")?(/?)>\n')


class Attachment(msgspec.Struct, frozen=True):
    """One mentioned file: attached (`length` characters of body) or refused (`note`)."""

    path: str
    length: int = 0
    size: int = 0  # the file's size in bytes
    note: str = ""  # why it was cut or not attached; empty when attached whole

    @property
    def attached(self) -> bool:
        return not self.note.startswith("not attached")

    def summary(self) -> str:
        """One short line for a transcript: `src/x.py (1.2 KB)`, with the note if any."""
        if not self.attached:
            return f"@{self.path}: {self.note}"
        size = f"{self.size:,} bytes" if self.size < 10_000 else f"{self.size / 1024:,.0f} KiB"
        return f"@{self.path} ({size}; {self.note})" if self.note else f"@{self.path} ({size})"


class Expansion(msgspec.Struct, frozen=True):
    text: str  # what to send: the prompt, then the attachments
    attachments: tuple[Attachment, ...] = ()


def expand_mentions(text: str, root: str) -> Expansion:
    """`text` with each `@path` naming a file under `root` attached after it.

    Blocking (it reads files): call it off the event loop."""
    from runtime.context.images import IMAGE_SUFFIXES
    from tools import Workspace, WorkspaceError

    # An image (`@shot.png`, a pasted clip's path) goes to the model as an image part
    # (runtime.context.images.prompt_images), not as text here; a resource likewise.
    mentions = [
        c
        for c in _mentions(text)
        if not _RESOURCE.fullmatch(c[0]) and not c[-1].lower().endswith(tuple(IMAGE_SUFFIXES))
    ]
    if not mentions:
        return Expansion(text)
    try:
        workspace = Workspace.open(root)
    except WorkspaceError:
        return Expansion(text)  # no workspace: nothing can be attached
    blocks: list[str] = []
    found: list[Attachment] = []
    total = 0
    try:
        for candidates in mentions:
            attachment, body = _read_first(workspace, candidates, total)
            if attachment is None or any(a.path == attachment.path for a in found):
                continue
            if len(found) == MAX_ATTACHMENTS:
                attachment, body = _refused(attachment.path, "too many files mentioned"), ""
            total += len(body.encode("utf-8"))
            found.append(attachment)
            blocks.append(_block(attachment, body))
    finally:
        workspace.close()
    if not found:
        return Expansion(text)
    return Expansion(text.rstrip("\n") + "\n\n" + "\n".join(blocks), tuple(found))


class ResourceSource(Protocol):
    """Where `@SERVER:URI` mentions are read from (the harness, or its client)."""

    async def mcp_resources(self) -> tuple[McpResource, ...]: ...

    async def mcp_resource(self, server: str, uri: str) -> tuple[str, str]: ...


async def expand_prompt(text: str, root: str, source: ResourceSource | None) -> Expansion:
    """What every front end sends for typed `text`: its `@path` files attached
    (`expand_mentions`, off the event loop), then its `@SERVER:URI` resources."""
    import asyncio

    expansion = await asyncio.to_thread(expand_mentions, text, root)
    return expansion if source is None else await attach_resources(expansion, source)


async def attach_resources(expansion: Expansion, source: ResourceSource) -> Expansion:
    """`expansion` with each `@SERVER:URI` naming a resource an MCP server lists
    attached after it, as a file is (`<file path="SERVER:URI" ...>`): read through
    the server, cut at 256 KiB, a binary or unreadable one noted instead. A mention
    of a URI no server lists is left as it was: nothing is asked of a server for it."""
    wanted = [c for c in _mentions(expansion.text) if _RESOURCE.fullmatch(c[0])]
    if not wanted:
        return expansion
    listed = {r.mention: r for r in await source.mcp_resources()}
    found = list(expansion.attachments)
    blocks: list[str] = []
    for candidates in wanted:
        mention = next((c for c in candidates if c in listed), None)
        if mention is None or any(a.path == mention for a in found):
            continue
        if len(found) >= MAX_ATTACHMENTS:
            attachment, body = _refused(mention, "too many files mentioned"), ""
        else:
            attachment, body = await _resource(source, listed[mention])
        found.append(attachment)
        blocks.append(_block(attachment, body))
    if not blocks:
        return expansion
    joint = "\n" if expansion.attachments else "\n\n"
    text = expansion.text.rstrip("\n") + joint + "\n".join(blocks)
    return Expansion(text, tuple(found))


async def _resource(source: ResourceSource, resource: McpResource) -> tuple[Attachment, str]:
    from runtime.model.errors import BastionError

    try:
        body, note = await source.mcp_resource(resource.server, resource.uri)
    except BastionError as exc:
        return _refused(resource.mention, exc.message), ""
    size = len(body.encode("utf-8"))
    return Attachment(resource.mention, len(body), size, note), body


def _mentions(text: str) -> list[list[str]]:
    """Each mention's candidate paths, longest first (trailing punctuation dropped in turn)."""
    out: list[list[str]] = []
    for match in _MENTION.finditer(text):
        if match.group(1) is not None:
            out.append([match.group(1)])
            continue
        raw = match.group(2)
        candidates = [raw]
        while raw and raw[-1] in _TRAILING:
            raw = raw[:-1]
            if raw:
                candidates.append(raw)
        out.append(candidates)
    return out


def _refused(path: str, why: str) -> Attachment:
    return Attachment(path, note=f"not attached: {why}")


def _read_first(
    workspace: Workspace, candidates: list[str], total: int
) -> tuple[Attachment | None, str]:
    """The first candidate that names something: its attachment and body; None when none does."""
    from tools.refusal import RefusalCode, Refused

    first_refusal: Refused | None = None
    for path in candidates:
        try:
            return _read(workspace, path, total)
        except Refused as exc:
            if exc.refusal.code != RefusalCode.NOT_FOUND and first_refusal is None:
                first_refusal = exc
    if first_refusal is None:
        return None, ""
    return _refused(candidates[-1], first_refusal.refusal.message), ""


def _read(workspace: Workspace, path: str, total: int) -> tuple[Attachment, str]:
    from tools.context import Access

    rel = workspace.parse(path)
    workspace.authorize(rel, Access.READ, None)
    fd, st = workspace.open_file(rel)
    try:
        room = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total)
        if room <= 0:
            return _refused(rel.text, "the attachments already hold 1 MiB"), ""
        raw = _read_up_to(fd, room + 1)  # bounded even if the file grows meanwhile
    finally:
        os.close(fd)
    if b"\x00" in raw[:8192]:
        return _refused(rel.text, "a binary file (it contains NUL bytes)"), ""
    cut = len(raw) > room
    if cut:
        raw = raw[:room]
    text = raw.decode("utf-8", "ignore" if cut else "strict") if _is_utf8(raw, cut) else None
    if text is None:
        return _refused(rel.text, "not UTF-8 text"), ""
    note = f"cut: the first {len(raw):,} of {st.st_size:,} bytes" if cut else ""
    return Attachment(rel.text, len(text), st.st_size, note), text


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _is_utf8(raw: bytes, cut: bool) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return cut and exc.start >= len(raw) - 3  # only the cut split a character
    return True


def _attribute(value: str) -> str:
    return escape(value, quote=False).replace('"', "&quot;")


def _block(attachment: Attachment, body: str) -> str:
    path = _attribute(attachment.path)
    note = f' note="{_attribute(attachment.note)}"' if attachment.note else ""
    if not attachment.length and attachment.note:
        return f'<file path="{path}"{note}/>\n'
    newline = "" if body.endswith("\n") else "\n"
    return f'<file path="{path}"{note} length="{len(body)}">\n{body}{newline}</file>\n'


def split_attachments(text: str) -> tuple[str, tuple[Attachment, ...]]:
    """The prompt and the attachments `expand_mentions` added to it (none: `text`, ())."""
    start = text.find('\n\n<file path="')
    if start < 0:
        return text, ()
    found: list[Attachment] = []
    at = start + 2
    while at < len(text):
        if text.startswith("\n", at):  # the blank line between two attachments
            at += 1
            continue
        match = _HEADER.match(text, at)
        if match is None:
            return text, ()  # not ours after all
        path, note = unescape(match.group(1)), unescape(match.group(2) or "")
        if match.group(4):
            found.append(Attachment(path, note=note))
            at = match.end()
            continue
        length = int(match.group(3) or 0)
        body = text[match.end() : match.end() + length]
        found.append(Attachment(path, length, len(body.encode("utf-8")), note))
        at = match.end() + length
        at += 0 if body.endswith("\n") else 1
        if not text.startswith("</file>\n", at):
            return text, ()
        at += len("</file>\n")
    return text[:start], tuple(found)


def mention_at(text: str, cursor: int) -> tuple[int, str] | None:
    """The `@` mention being typed at `cursor`: its start (the `@`) and what follows it."""
    start = cursor
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:cursor]
    if not word.startswith("@") or word.startswith('@"'):
        return None
    return start, word[1:]


def fuzzy_filter(query: str, paths: list[str], limit: int = 50) -> list[str]:
    """The paths `query`'s characters appear in, in order (any case), best first.

    Best: the query inside the file name, then inside the path, then the most of
    its characters at the start of a word, then the tightest spread, then the
    shorter path; ties keep `paths`' order (the glob's: newest first)."""
    if not query:
        return paths[:limit]
    pattern = re.compile(".*?".join(f"({re.escape(c)})" for c in query), re.IGNORECASE)
    folded = query.casefold()
    groups = range(1, len(query) + 1)
    ranked: list[tuple[int, int, int, int, int, str]] = []
    for index, path in enumerate(paths):
        match = pattern.search(path)
        if match is None:
            continue
        lower = path.casefold()
        name = lower.rsplit("/", 1)[-1]
        rank = 0 if folded in name else 1 if folded in lower else 2
        starts = sum(1 for g in groups if _word_start(path, match.start(g)))
        spread = match.end() - match.start()
        ranked.append((rank, -starts, spread, len(path), index, path))
    ranked.sort()
    return [path for *_, path in ranked[:limit]]


def _word_start(path: str, at: int) -> bool:
    return at == 0 or path[at - 1] in "/_-. " or (path[at].isupper() and path[at - 1].islower())


class WorkspaceFiles:
    """The files of one workspace for completion, listed by the glob tool and cached.

    `paths()` returns the last listing at once (empty before the first);
    `refresh()` lists again when the last listing is older than `STALE_AFTER`
    (blocking: run it on a thread). `complete` says whether the bounds cut it."""

    def __init__(self, root: str, *, max_files: int = LIST_MAX_FILES) -> None:
        self.root = root
        self.max_files = max_files
        self.complete = True
        self._paths: list[str] = []
        self._listed_at: float | None = None
        self._lock = threading.Lock()

    def paths(self) -> list[str]:
        return self._paths

    @property
    def stale(self) -> bool:
        listed = self._listed_at
        return listed is None or time.monotonic() - listed > STALE_AFTER

    def refresh(self, *, force: bool = False) -> bool:
        """List the files again if stale (or `force`); False when nothing was done."""
        with self._lock:
            if not (force or self.stale):
                return False
            self._paths, self.complete = _list_files(self.root, self.max_files)
            self._listed_at = time.monotonic()
            return True


def _list_files(root: str, max_files: int) -> tuple[list[str], bool]:
    from tools import Workspace, WorkspaceError
    from tools.context import ToolContext
    from tools.glob import glob
    from tools.limits import Limits
    from tools.refusal import Refused

    limits = Limits(
        max_files=max_files,
        max_directories=max_files,
        max_entries=max_files * 2,
        max_output_bytes=max_files * 256,
        time_budget_s=LIST_TIME_BUDGET,
        max_results=max_files,
    )
    try:
        workspace = Workspace.open(root)
    except WorkspaceError:
        return [], True
    try:
        result = glob(ToolContext(workspace, limits), {"pattern": "**"})
    except Refused:
        return [], False
    finally:
        workspace.close()
    data = result.data
    return list(data["files"]), bool(data["coverage"]["complete"])
