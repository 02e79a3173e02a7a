"""Git's control files in and around a workspace, found without running git: which
to bind read-only for a sandboxed command, and which the command created or
changed so that the user's next git would run a program or look elsewhere (those
are moved aside, never deleted, and named).

"Control files" are what git obeys rather than stores: in each git dir ``config``,
``config.worktree``, ``commondir``, ``gitdir``, ``hooks/``, and the same in every
``modules/<name>/`` (submodules, nested) and ``worktrees/<id>/`` below it; and each
``.git`` entry, a folder or a file pointing at a git dir (``gitdir: ...``). They are
looked for in the workspace's own ``.git`` (or, with none, the nearest ancestor's),
every ``.git`` below the workspace (a nested repository: ``git status`` in the
parent runs ``git status`` in each one the index holds), and the git dirs these
point to. Nothing is followed through a symbolic link; a link where git expects a
control file or folder is itself a finding.

``scan`` records them (identity and, for config and pointer files, their bytes);
``judge`` compares a scan taken before a command with one taken after it (its
whole process tree gone) and returns what is dangerous: a hook that is not a
``.sample``; a pointer (``.git`` file, ``commondir``, ``gitdir``) that now points
outside the workspace; a config with a setting ``tools.gitconfig`` does not know
to be inert, or that it cannot read; a link. ``quarantine`` renames each one to
``<name>.bastion-quarantine-<time>``.

Bounds: the workspace walk visits WALK_DIRS folders (breadth first), a scan
MAX_GIT_DIRS git dirs and MAX_HOOKS entries per hooks folder; ``mount_entries``
binds at most MAX_MOUNTS of them (the workspace's own first) and says so when it
leaves some to the check afterwards.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field

from tools import gitconfig

WALK_DIRS = 10_000
MAX_GIT_DIRS = 1_000
MAX_HOOKS = 200
MAX_MOUNTS = 64
MODULE_DEPTH = 6  # folders under modules/ before a submodule's git dir (names may hold "/")
POINTER_BYTES = 4096
SUFFIX = ".bastion-quarantine-"
CONFIGS = ("config", "config.worktree")
POINTERS = ("commondir", "gitdir")


@dataclass(frozen=True, slots=True)
class Entry:
    """What one control position holds. ``role``: config, pointer, dotgit (a ``.git``
    entry), hooks, hook, dir; ``kind``: file, dir, link, other."""

    role: str
    kind: str
    ident: tuple[int, ...]
    content: bytes | None = None  # a config's or pointer's bytes
    target: str | None = None  # where a pointer leads (real path); a link's text
    base: str = ""  # the git dir a config belongs to
    via: tuple[str, ...] = ()  # the pointers followed to reach it


@dataclass(slots=True)
class Scan:
    """The control files of one moment (see the module docstring)."""

    root: str
    entries: dict[str, Entry] = field(default_factory=dict)
    git_dirs: list[str] = field(default_factory=list)
    complete: bool = True


@dataclass(frozen=True, slots=True)
class Finding:
    """A control file a command made dangerous: ``key`` names what (a config key, a
    hook's name, ``gitdir``), ``why`` says what it would do."""

    path: str
    key: str
    why: str


# --- finding .git entries -------------------------------------------------------------


def find_dot_gits(root: str, limit: int = WALK_DIRS) -> tuple[list[str], bool]:
    """Every ``.git`` entry at or below ``root`` (its own first), breadth first, not
    following links nor entering a ``.git``; and whether the walk saw every folder."""
    found: list[str] = []
    todo = [root]
    for seen, top in enumerate(todo):
        if seen >= limit:
            return found, False
        try:
            listing = os.scandir(top)
        except OSError:
            continue
        with listing:
            for entry in listing:
                if entry.name.lower() == ".git":
                    found.append(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
    return found, True


def repository_of(root: str) -> str | None:
    """The nearest ``.git`` entry (folder, file or link) at or above ``root``, without
    running git: whether the workspace is in a git repository."""
    folder = os.path.realpath(root)
    while True:
        candidate = os.path.join(folder, ".git")
        if os.path.lexists(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def nested_repositories(root: str, limit: int = WALK_DIRS) -> tuple[list[str], bool]:
    """Workspace-relative folders below ``root`` that hold a ``.git``."""
    real = os.path.realpath(root)
    dots, complete = find_dot_gits(real, limit)
    found = [os.path.relpath(os.path.dirname(d), real) for d in dots]
    return [f for f in found if f != "."], complete


# --- scanning -------------------------------------------------------------------------


def _ident(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _read(path: str, limit: int) -> bytes | None:
    """Up to ``limit`` + 1 bytes of the regular file at ``path`` (not through a link,
    never blocking on a FIFO); None if it is not one or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def pointer_target(content: bytes | None, base: str, prefix: bytes = b"") -> str | None:
    """Where a pointer file leads, as a real path: ``gitdir: X`` (a ``.git`` file,
    ``prefix`` ``b"gitdir:"``) or a bare path (``commondir``, ``gitdir``), relative
    to ``base``. None when it says nothing usable."""
    if content is None or len(content) > POINTER_BYTES:
        return None
    text = content.split(b"\n", 1)[0].rstrip(b"\r")
    if prefix:
        if not text.startswith(prefix):
            return None
        text = text[len(prefix) :]
    text = text.strip()
    if not text or b"\0" in text:
        return None
    return os.path.realpath(os.path.join(base, os.fsdecode(text)))


class _Scanner:
    def __init__(self, root: str) -> None:
        self.scan = Scan(root)
        self.queue: list[tuple[str, tuple[str, ...]]] = []
        self.seen: set[str] = set()
        self.via: tuple[str, ...] = ()  # of the git dir being scanned

    def look(self, path: str, role: str, base: str = "") -> Entry | None:
        try:
            st = os.lstat(path)
        except OSError:
            return None
        kind = _kind(st.st_mode)
        content = target = None
        if kind == "link":
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
        elif kind == "file" and role in ("config", "pointer", "dotgit"):
            limit = gitconfig.MAX_BYTES if role == "config" else POINTER_BYTES
            content = _read(path, limit)
            if role == "pointer":
                target = pointer_target(content, base)
            elif role == "dotgit":
                target = pointer_target(content, os.path.dirname(path), b"gitdir:")
        entry = Entry(role, kind, _ident(st), content, target, base, self.via)
        self.scan.entries[path] = entry
        return entry

    def dot_git(self, path: str) -> None:
        self.via = ()
        entry = self.look(path, "dotgit")
        if entry is None:
            return
        if entry.kind == "dir":
            self.queue.append((path, ()))
        elif entry.kind == "file" and entry.target is not None:
            self.queue.append((entry.target, (path,)))

    def drain(self) -> None:
        while self.queue:
            git_dir, self.via = self.queue.pop(0)
            real = os.path.realpath(git_dir)
            if real in self.seen:
                continue
            if len(self.seen) >= MAX_GIT_DIRS:
                self.scan.complete = False
                return
            self.seen.add(real)
            if os.path.isdir(git_dir) and not os.path.islink(git_dir):
                self.scan.git_dirs.append(git_dir)
                self.git_dir(git_dir)

    def git_dir(self, path: str) -> None:
        for name in CONFIGS:
            self.look(os.path.join(path, name), "config", base=path)
        for name in POINTERS:
            entry = self.look(os.path.join(path, name), "pointer", base=path)
            if name == "commondir" and entry is not None and entry.target is not None:
                self.queue.append((entry.target, (*self.via, os.path.join(path, name))))
        hooks = self.look(os.path.join(path, "hooks"), "hooks")
        if hooks is not None and hooks.kind == "dir":
            self.hooks(os.path.join(path, "hooks"))
        modules = self.look(os.path.join(path, "modules"), "dir")
        if modules is not None and modules.kind == "dir":
            self.modules(os.path.join(path, "modules"), 0)
        worktrees = self.look(os.path.join(path, "worktrees"), "dir")
        if worktrees is not None and worktrees.kind == "dir":
            for name in self.listing(os.path.join(path, "worktrees")):
                child = os.path.join(path, "worktrees", name)
                found = self.look(child, "dir")
                if found is not None and found.kind == "dir":
                    self.queue.append((child, self.via))

    def hooks(self, path: str) -> None:
        names = self.listing(path)
        if len(names) > MAX_HOOKS:
            self.scan.complete = False
        for name in names[:MAX_HOOKS]:
            self.look(os.path.join(path, name), "hook")

    def modules(self, path: str, depth: int) -> None:
        """Submodules' git dirs below ``modules/`` (a name may hold "/"); a ``hooks``
        folder that is not in one yet is judged too (``git submodule update`` would
        adopt the folder it is in)."""
        for name in self.listing(path):
            child = os.path.join(path, name)
            if any(os.path.lexists(os.path.join(child, n)) for n in ("HEAD", "config", "objects")):
                found = self.look(child, "dir")
                if found is not None and found.kind == "dir":
                    self.queue.append((child, self.via))
            elif name == "hooks" and depth > 0:
                found = self.look(child, "hooks")
                if found is not None and found.kind == "dir":
                    self.hooks(child)
            else:
                found = self.look(child, "dir")
                if found is not None and found.kind == "dir" and depth < MODULE_DEPTH:
                    self.modules(child, depth + 1)

    def listing(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []


def scan(root: str, limit: int = WALK_DIRS) -> Scan:
    """The control files of the workspace ``root`` now (see the module docstring)."""
    real = os.path.realpath(root)
    scanner = _Scanner(real)
    dots, complete = find_dot_gits(real, limit)
    scanner.scan.complete = complete
    if not any(os.path.dirname(d) == real for d in dots):
        above = repository_of(os.path.dirname(real)) if real != "/" else None
        if above is not None:
            dots.insert(0, above)
    for dot in dots:
        scanner.dot_git(dot)
        scanner.drain()
    return scanner.scan


# --- judging --------------------------------------------------------------------------


def _within(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def judge(before: Scan, after: Scan, writable: tuple[str, ...]) -> list[Finding]:
    """What changed from ``before`` to ``after`` beneath the ``writable`` folders (real
    paths; what a command could change) that would make git run a program or look
    elsewhere."""
    found: dict[str, Finding] = {}
    for path, now in after.entries.items():
        was = before.entries.get(path)
        if was == now or not _within(path, writable):
            continue
        finding = _judge_one(path, now, was, after.root)
        if finding is not None:
            found[path] = finding
    # What is reached only through a pointer found dangerous goes with that pointer.
    return [
        finding
        for path, finding in found.items()
        if not any(p in found for p in after.entries[path].via)
    ]


def _judge_one(path: str, now: Entry, was: Entry | None, root: str) -> Finding | None:
    name = os.path.basename(path)
    if now.role == "hook":
        if name.endswith(".sample") or now.kind == "dir":
            return None
        return Finding(path, name, "is a git hook (a program git runs)")
    if now.kind == "link":
        return Finding(path, name, f"is a symbolic link where git looks for its {name}")
    if now.role == "config" and now.kind == "file":
        inside = gitconfig.resolves_inside(now.base, root)
        earlier = was.content if was is not None and was.kind == "file" else None
        bad = gitconfig.dangerous(now.content or b"", inside, earlier)
        if not bad:
            return None
        key, why = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return Finding(path, key + more, why)
    if now.role in ("pointer", "dotgit") and now.kind == "file":
        if was is not None and was.target == now.target and was.kind == "file":
            return None
        if now.target is None or _within(now.target, (root,)):
            return None  # unreadable (git refuses it), or inside: scanned in its own right
        what = "gitdir" if now.role == "dotgit" else name
        return Finding(path, what, f"points git at {now.target}, outside the workspace")
    return None


# --- moving aside -----------------------------------------------------------------------


def quarantine(findings: list[Finding], root: str) -> list[dict[str, str]]:
    """Rename each finding's file to ``<name>.bastion-quarantine-<time>`` (never
    deleted: the user decides). One dict each: path, key, why, and moved_to or
    error; paths relative to the workspace where they are inside it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    done: list[dict[str, str]] = []
    for finding in findings:
        report = {"path": shown(finding.path, root), "key": finding.key, "why": finding.why}
        target = finding.path + SUFFIX + stamp
        n = 2
        while os.path.lexists(target):
            target, n = f"{finding.path}{SUFFIX}{stamp}-{n}", n + 1
        try:
            os.rename(finding.path, target)
        except OSError as exc:
            report["error"] = exc.strerror or str(exc)
        else:
            report["moved_to"] = shown(target, root)
        done.append(report)
    return done


def shown(path: str, root: str) -> str:
    return os.path.relpath(path, root) if _within(path, (root,)) else path


# --- the sandbox's read-only binds ------------------------------------------------------


def mount_entries(found: Scan, writable: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The supervisor's spec entries protecting what ``found`` holds beneath the
    ``writable`` folders: ``pin:`` each ``.git`` folder and its ``modules``/
    ``worktrees`` (so none can be moved aside and planted again), ``ro:`` each
    existing config, pointer, ``.git`` file and hooks folder; at most MAX_MOUNTS,
    the workspace's own git first. Also the notes for the result."""
    pins: list[str] = []
    read_only: list[str] = []
    for path, entry in found.entries.items():
        if not _within(path, writable) or entry.kind not in ("file", "dir"):
            continue  # a link would be followed by the bind; the check afterwards covers it
        if _pinned(path, entry):
            pins.append(path)
        elif entry.role in ("config", "pointer", "hooks", "dotgit"):
            read_only.append(path)
    ordered = [("pin", p) for p in pins] + [("ro", p) for p in read_only]
    ordered.sort(key=lambda item: (_rank(item[1], found.root), item[0] != "pin"))
    entries = [f"{kind}:{path}" for kind, path in ordered[:MAX_MOUNTS]]
    notes: list[str] = []
    if len(ordered) > MAX_MOUNTS:
        notes.append(
            f"{len(ordered) - MAX_MOUNTS} of the repository's git control files (of "
            f"submodules, worktrees or nested repositories) were not made read-only (at "
            f"most {MAX_MOUNTS} are); bastion checks them after the command instead"
        )
    if not found.complete:
        notes.append("the workspace is large: git control files were looked for in part of it only")
    return entries, notes


def _pinned(path: str, entry: Entry) -> bool:
    """A .git folder, or the modules/worktrees folder in a git dir."""
    if entry.kind != "dir":
        return False
    return entry.role == "dotgit" or (
        entry.role == "dir" and os.path.basename(path) in ("modules", "worktrees")
    )


def _rank(path: str, root: str) -> int:
    """The workspace's own .git first, then its submodules and worktrees, then the rest."""
    own = os.path.join(root, ".git")
    if path == own or path.startswith(own + "/"):
        return 0 if "/modules/" not in path[len(own) :] else 1
    return 2
