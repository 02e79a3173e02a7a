"""Bastion's own git repository of a workspace's snapshots (what /rewind restores a
command's changes from), kept where no command can reach and run so that nothing
the workspace holds can make it run a program.

The repository is ``<bastion home>/snapshots/<sha256 of the workspace's real
path>.git`` (folders 0700) with the workspace as its work tree and its own
persistent index (so a later snapshot re-hashes only files whose stat changed).
The workspace's own ``.git`` is never opened: git skips any entry named ``.git``
while it walks, and bastion never points it at one.

Every git process starts from an environment built from nothing (``PATH`` without
the workspace, a private empty ``HOME``, ``LC_ALL=C``, no system or global config,
no replace objects, no prompts, only the ``GIT_DIR``/``GIT_WORK_TREE``/
``GIT_INDEX_FILE`` it needs: no API key, no user ``GIT_*`` variable) and with
``-c`` overrides for every setting that could run a program. The repository's
``config`` and ``info/attributes`` are bastion's bytes, rewritten whenever they
differ; the attributes (``* -text -filter ...``) outrank any ``.gitattributes``
in the tree, so bytes go in and come out raw and no driver is ever looked up.
Folders holding a ``.git`` below the workspace (nested repositories) are left
out of the snapshot (git would read their ``HEAD`` and ``config``; a FIFO there
would hang it), as are bastion's own folders when the workspace contains them.

Snapshot trees are not referenced by any ref: ``git gc`` (after a repository's
first snapshot, then at most daily) packs what the index holds and drops objects
older than KEEP_DAYS that it does not use, so an old snapshot can become
unreadable; the restore plan then says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence

from runtime.store.home import home_dir

GIT_TIMEOUT = 60.0
KEEP_DAYS = 30
GC_EVERY_S = 24 * 3600
FORMAT = 2  # the effect records' "snapshots" format: 2 = this repository
CONFIG = (
    b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
    b"\tlogallrefupdates = false\n\tsymlinks = true\n"
)
ATTRIBUTES = b"* -text -filter -ident -eol -working-tree-encoding -diff -merge\n"
# Settings that could run a program or read a file bastion did not choose, pinned on
# every command line (they outrank any config file git might still read).
OVERRIDES = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.splitIndex=false",
    "core.sparseCheckout=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "submodule.recurse=false",
    "index.threads=true",
)


class SnapshotError(Exception):
    """A snapshot could not be made or read (git missing, failing or too slow)."""


def key_of(workspace: str) -> str:
    """The repository's name for a workspace: a hash of its real path."""
    return hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:32]


def valid_key(key: object) -> bool:
    return isinstance(key, str) and len(key) == 32 and all(c in "0123456789abcdef" for c in key)


def find_git(workspace: str) -> str | None:
    """git's absolute path from PATH, skipping relative entries and any inside the
    workspace (a repository must not choose the git bastion runs)."""
    real = os.path.realpath(workspace)
    safe = [
        entry
        for entry in os.environ.get("PATH", os.defpath).split(os.pathsep)
        if os.path.isabs(entry) and not _within(os.path.realpath(entry), real)
    ]
    found = shutil.which("git", path=os.pathsep.join(safe))
    return os.path.realpath(found) if found else None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class SnapshotRepo:
    """One workspace's snapshot repository (see the module docstring). Blocking."""

    def __init__(self, workspace: str, key: str | None = None, home: str | None = None) -> None:
        self.work_tree = os.path.realpath(workspace)
        self.key = key or key_of(self.work_tree)
        if not valid_key(self.key):
            raise SnapshotError(f"not a snapshot repository name: {self.key!r}")
        self.base = os.path.join(os.path.realpath(home or home_dir()), "snapshots")
        self.git_dir = os.path.join(self.base, f"{self.key}.git")
        self.home = os.path.join(self.base, "empty-home")
        git = find_git(self.work_tree)
        if git is None:
            raise SnapshotError("git is not installed (or only inside the workspace)")
        self.git_path = git

    # -- running git ---------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        return {
            "PATH": os.pathsep.join(
                dict.fromkeys((os.path.dirname(self.git_path), "/usr/bin", "/bin"))
            ),
            "HOME": self.home,
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_DIR": self.git_dir,
            "GIT_WORK_TREE": self.work_tree,
            "GIT_INDEX_FILE": os.path.join(self.git_dir, "index"),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """``git args`` in the work tree with the fixed environment and overrides.
        Raises SnapshotError when git is missing or hangs."""
        argv = [self.git_path, "--no-pager"]
        for override in OVERRIDES:
            argv += ["-c", override]
        try:
            return subprocess.run(
                [*argv, *args],
                capture_output=True,
                env=self.environment(),
                cwd=self.work_tree,
                timeout=GIT_TIMEOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise SnapshotError(f"git {args[0]} took over {GIT_TIMEOUT:.0f} s") from exc
        except OSError as exc:
            raise SnapshotError(f"git {args[0]} could not run: {exc.strerror}") from exc

    def git(self, *args: str) -> bytes:
        """``run(*args)``'s output; SnapshotError when git fails."""
        done = self.run(*args)
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise SnapshotError(f"git {args[0]} failed: {said[-1] if said else done.returncode}")
        return done.stdout

    # -- the repository ------------------------------------------------------------

    def ensure(self) -> None:
        """Make the repository if it is missing, and put bastion's config, attributes
        and excludes back if anything changed them."""
        for folder in (self.base, self.home):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)
        if not os.path.isfile(os.path.join(self.git_dir, "HEAD")):
            os.makedirs(self.git_dir, mode=0o700, exist_ok=True)
            env = {**self.environment()}
            del env["GIT_WORK_TREE"]
            subprocess.run(
                [self.git_path, "-c", "init.templateDir=", "init", "-q", "--template=", self.git_dir],
                env=env, cwd=self.base, capture_output=True, timeout=GIT_TIMEOUT, check=False,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if not os.path.isfile(os.path.join(self.git_dir, "HEAD")):
                raise SnapshotError("git init failed for the snapshot repository")
        os.chmod(self.git_dir, 0o700)
        _keep(os.path.join(self.git_dir, "config"), CONFIG)
        os.makedirs(os.path.join(self.git_dir, "info"), mode=0o700, exist_ok=True)
        _keep(os.path.join(self.git_dir, "info", "attributes"), ATTRIBUTES)
        _keep(os.path.join(self.git_dir, "info", "exclude"), self._excludes())

    def _excludes(self) -> bytes:
        """Bastion's own folders, when the workspace holds them (opened in $HOME)."""
        lines = []
        for folder in (os.path.realpath(home_dir()), os.path.dirname(self.base)):
            if _within(folder, self.work_tree) and folder != self.work_tree:
                rel = os.path.relpath(folder, self.work_tree)
                lines.append("/" + _escape_pattern(rel) + "/\n")
        return "".join(dict.fromkeys(lines)).encode("utf-8", "surrogateescape")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One bastion process at a time uses the index; an ``index.lock`` left by a
        git that was killed is removed (no other git of ours can be running)."""
        fd = os.open(
            os.path.join(self.git_dir, "bastion.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.git_dir, "index.lock"))
            yield
        finally:
            os.close(fd)

    def snapshot(self, leave_out: Sequence[str] = ()) -> str:
        """A tree object of the work tree now (files git does not ignore), leaving out
        the workspace-relative folders ``leave_out``. Raises SnapshotError."""
        self.ensure()
        excludes = [":(exclude,literal)" + path for path in leave_out]
        with self.locked():
            self.git("add", "-A", "--", ".", *excludes)
            tree = self.git("write-tree").decode().strip()
            self._maybe_gc()
        return tree

    def changes(self, old: str, new: str) -> list[tuple[str, str, str, str]]:
        """(status, old mode, old blob, path) for each path that differs from tree
        ``old`` to tree ``new``."""
        out = self.git("diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-ext-diff",
                       "--no-textconv", "--ignore-submodules=none", old, new)  # fmt: skip
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        found = []
        for head, path in zip(fields[0::2], fields[1::2], strict=False):
            parts = head.lstrip(":").split(" ")
            if len(parts) == 5:
                found.append((parts[4], parts[0], parts[2], path))
        return found

    def blob(self, sha: str) -> bytes:
        """A blob's raw bytes (no filter: there is none to run)."""
        return self.git("cat-file", "blob", sha)

    def has(self, tree: str) -> bool:
        """Whether tree ``tree`` is (still) in the repository."""
        return (
            os.path.isdir(self.git_dir)
            and self.run("cat-file", "-e", f"{tree}^{{tree}}").returncode == 0
        )

    def _maybe_gc(self) -> None:
        """Pack what the index holds and drop unreferenced objects older than KEEP_DAYS:
        after a new repository's first snapshot (its files, loose, take several times
        their packed size), then at most daily."""
        stamp = os.path.join(self.git_dir, "bastion-gc")
        try:
            last = os.stat(stamp).st_mtime
        except FileNotFoundError:
            last = 0.0
        if time.time() - last < GC_EVERY_S:
            return
        self.git("gc", "--quiet", f"--prune={KEEP_DAYS}.days.ago")
        os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.utime(stamp)


def _keep(path: str, content: bytes) -> None:
    """``path`` holds exactly ``content`` (replaced atomically when it does not)."""
    try:
        with open(path, "rb") as handle:
            if handle.read(len(content) + 1) == content:
                return
    except FileNotFoundError:
        pass
    temp = f"{path}.bastion-{os.getpid()}"
    with open(temp, "wb") as handle:
        handle.write(content)
    os.chmod(temp, 0o600)
    os.replace(temp, path)


def _escape_pattern(rel: str) -> str:
    return "".join("\\" + c if c in "*?[]\\!# " else c for c in rel)
