"""The command sandbox: the policy, what this machine supports, and the spec the
command supervisor applies before it starts a command.

Modes (as Codex names them):

- ``read-only``: the command may write nothing (but ``/dev/null`` and the like);
- ``workspace-write``: writes only in the workspace, a per-call temp dir (the
  command's ``TMPDIR``), ``/dev/shm`` and the paths the user lists; git's control
  files (``tools/gitguard.py``: ``.git`` pinned, configs, hooks, pointers),
  ``.bastion/`` and deny-listed paths stay read-only (or hidden);
- ``danger-full-access``: no sandbox at all.

Network is off in the sandboxed modes unless allowed, but for the hosts of the
allow-list (``hosts``), reached through bastion's proxy (``tools/netproxy.py``) by
way of a bridge in the command's network namespace (``tools/bridge.py``). In every sandboxed mode the
walls (``tools/walls.py``) keep bastion's own folders, the sockets that act for the
user and, in a home-folder workspace, the user's start-up files out of reach, and
the command runs in a PID namespace of its own. On Linux the supervisor applies it
(``tools/landlock.py``: private mount, PID and network namespaces, then Landlock);
on macOS the command is wrapped in ``sandbox-exec`` with a generated profile
(``tools/seatbelt.py``, without walls). Where neither exists the command runs
unsandboxed, and ``unavailable_notice`` is the one line the user is told; without
walls, the runtime makes each command ask (``SandboxSupport.walls``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from tools.denylist import DEFAULT_DENY, DenyList, expand

if TYPE_CHECKING:
    from tools.gitguard import Scan
    from tools.walls import Walls

# Read-only even in workspace-write: git hooks and config run code at the user's next
# git command (hooks, core.hooksPath, core.fsmonitor, filters); .bastion/ holds the
# user's approval rules and project config.
PROTECTED = (".git/hooks", ".git/config", ".bastion")
WRITABLE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
SHARED_WRITABLE = ("/dev/shm",)
# "fail": act as if this kernel had no sandbox; "no-namespace": as if it had Landlock
# but no namespaces (so no walls)
PROBE_ENV = "BASTION_SANDBOX_PROBE"
LANDLOCK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "landlock.py")


class SandboxMode(StrEnum):
    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a command may do. ``writable``: absolute paths writable besides the
    workspace and temp; ``deny``: deny-list entries (``~/x``, ``/abs``, or a name
    pattern such as ``.env.*`` matched at any depth of the workspace, or a
    workspace-relative pattern with a ``/``); ``private``: bastion's own folders (its
    store and sockets, its config dir, the sockets' fallback folders), which commands
    never see and the file tools never open (``tools/walls.py``): the runtime names
    them, as only it knows where it keeps them."""

    mode: SandboxMode = SandboxMode.WORKSPACE_WRITE
    network: bool = False
    writable: tuple[str, ...] = ()
    deny: tuple[str, ...] = DEFAULT_DENY
    private: tuple[str, ...] = ()
    # With the network off, the hosts commands may still reach through bastion's proxy
    # (tools/netrules.py entries, normalised; tools/netproxy.py, tools/bridge.py).
    hosts: tuple[str, ...] = ()

    @property
    def sandboxed(self) -> bool:
        return self.mode is not SandboxMode.DANGER_FULL_ACCESS

    def outside(self) -> SandboxPolicy:
        """This policy for one command the user approved to run outside the sandbox."""
        return replace(self, mode=SandboxMode.DANGER_FULL_ACCESS, network=True)

    def with_network(self) -> SandboxPolicy:
        return replace(self, network=True)

    def describe(self) -> str:
        if not self.sandboxed:
            return "danger-full-access (no sandbox)"
        net = "network allowed" if self.network else "network off"
        if not self.network and self.hosts:
            shown = ", ".join(self.hosts[:4]) + (", …" if len(self.hosts) > 4 else "")
            net = f"network off but for {shown} (through bastion's proxy)"
        return f"{self.mode.value}, {net}"

    @property
    def proxied(self) -> bool:
        """Whether commands reach the allow-list's hosts through bastion's proxy."""
        return self.sandboxed and not self.network and bool(self.hosts)


@dataclass(frozen=True, slots=True)
class SandboxSupport:
    """What this machine offers: the Landlock ABI (0: none), whether a private mount
    namespace can be made, sandbox-exec on macOS, and why something is missing."""

    platform: str
    landlock: int = 0
    namespace: bool = False
    seatbelt: bool = False
    reasons: tuple[str, ...] = field(default=())
    pid_namespace: bool = False

    @property
    def available(self) -> bool:
        return self.landlock > 0 or self.seatbelt

    @property
    def walls(self) -> bool:
        """Whether bastion's own folders and sockets, and the sockets of other programs
        that act for the user, can be hidden from commands (``tools/walls.py``): a
        private mount namespace. Without walls, a command can reach outside its
        sandbox, so the runtime asks before running one (runtime/run/sandboxing.py)."""
        return self.landlock > 0 and self.namespace

    def describe(self) -> str:
        if self.seatbelt:
            return (
                "sandbox-exec (macOS Seatbelt), without walls: bastion's own folders and "
                "Unix sockets are not hidden from commands"
            )
        if self.landlock and self.namespace:
            return f"Landlock ABI {self.landlock} and " + self.uncovered()
        if self.landlock:
            return (
                f"Landlock ABI {self.landlock} only, without walls (no mount namespace: "
                + "; ".join(self.reasons or ("unknown",))
                + "): bastion's own folders and sockets, other programs' sockets, "
                ".git/hooks, .bastion/ and deny-listed paths are not hidden from commands"
            )
        return "none (" + "; ".join(self.reasons or ("unknown",)) + ")"

    def uncovered(self) -> str:
        """The namespaces, and what this kernel leaves open (older Landlock, no PID
        namespace)."""
        pid = self.pid_namespace
        text = "a private mount and PID namespace" if pid else "a private mount namespace"
        gaps = []
        if not pid:
            signals = " and can signal them (Landlock ABI 6 is needed)" if self.landlock < 6 else ""
            gaps.append("no PID namespace: commands see the user's other processes" + signals)
        if self.landlock < 6:
            gaps.append(
                "abstract Unix sockets (X11's @/tmp/.X11-unix) stay reachable with the "
                "network on (Landlock ABI 6 is needed)"
            )
        return text + (" (" + "; ".join(gaps) + ")" if gaps else "")


def _probe_linux() -> SandboxSupport:
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", LANDLOCK_SCRIPT],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxSupport("linux", reasons=(f"the probe could not run: {exc}",))
    lines = [*done.stdout.split("\n"), "", "", ""]
    version = int(lines[0]) if lines[0].isdigit() else 0
    reasons: list[str] = []
    if not version:
        reasons.append("this kernel has no Landlock (Linux 5.13+ with landlock in lsm=)")
    if lines[1]:
        reasons.append(lines[1])
    namespace = not lines[1]
    return SandboxSupport(
        "linux", version, namespace, reasons=tuple(reasons), pid_namespace=lines[2] == "1"
    )


class _Probe:
    """The kernel asked once per process: on a thread when `start` comes first (the
    child interpreter then runs while the session opens), else when `result` asks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._support: SandboxSupport | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None and self._support is None:
                self._thread = threading.Thread(target=self._run, name="sandbox-probe")
                self._thread.daemon = True
                self._thread.start()

    def _run(self) -> None:
        support = _probe_linux()
        with self._lock:
            self._support = support

    def result(self) -> SandboxSupport:
        self.start()
        thread = self._thread
        if thread is not None:
            thread.join()
        support = self._support
        assert support is not None  # (set by the thread just joined)
        return support


_PROBE = _Probe()


def probe_soon() -> None:
    """Start asking the kernel what it offers, so a later `probe()` need not wait for
    it: a session calls this as it starts, before its imports and its store."""
    if sys.platform.startswith("linux") and os.environ.get(PROBE_ENV) != "fail":
        _PROBE.start()


def probe() -> SandboxSupport:
    """What the sandbox can use here (the kernel is asked once per process).
    ``BASTION_SANDBOX_PROBE=fail`` makes it report nothing, for tests and for
    seeing what bastion does on a machine without a sandbox."""
    if os.environ.get(PROBE_ENV) == "fail":
        return SandboxSupport(sys.platform, reasons=(f"{PROBE_ENV}=fail is set",))
    if sys.platform.startswith("linux"):
        found = _PROBE.result()
        if os.environ.get(PROBE_ENV) == "no-namespace":
            why = (*found.reasons, f"{PROBE_ENV}=no-namespace is set")
            return replace(found, namespace=False, pid_namespace=False, reasons=why)
        return found
    if sys.platform == "darwin":
        found = shutil.which("sandbox-exec") is not None
        why = () if found else ("sandbox-exec is not on this Mac",)
        return SandboxSupport("darwin", seatbelt=found, reasons=why)
    return SandboxSupport(sys.platform, reasons=(f"no sandbox is implemented for {sys.platform}",))


def unavailable_notice(policy: SandboxPolicy, support: SandboxSupport) -> str | None:
    """The one line the user is told when a sandboxed mode cannot be honoured: no
    sandbox at all, or one without walls (then commands ask before they run)."""
    if not policy.sandboxed or support.walls:
        return None
    if support.available:
        return (
            "commands ask before they run, whatever the approval mode: the sandbox here "
            "cannot hide bastion's own sockets and folders, or other programs' sockets, "
            "from them (" + "; ".join(support.reasons or ("no private mount namespace",))
            + "); `bastion doctor` says more"
        )  # fmt: skip
    return (
        f"commands will run WITHOUT a sandbox ({policy.mode.value} was asked for) and ask "
        "before they run: "
        + "; ".join(support.reasons or ("no sandbox here",))
        + "; `bastion doctor` says more"
    )


# -- the spec the supervisor applies ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """The supervisor's spec (``key:value`` strings, see ``tools/landlock.py``) and
    what the command's result should say about it."""

    entries: tuple[str, ...]
    writable: tuple[str, ...]
    notes: tuple[str, ...] = ()
    walls: Walls | None = None  # (tools/walls.py) why each walled path is walled


def plan(
    policy: SandboxPolicy, root: str, tmpdir: str, support: SandboxSupport, git: Scan | None = None
) -> Plan:
    """What the supervisor should apply for ``policy`` in workspace ``root`` (``git``:
    its git control files, if already scanned; see tools/gitguard.py)."""
    mode = policy.mode
    entries = [f"mode:{mode.value}", f"net:{int(policy.network)}"]
    if not policy.sandboxed:
        return Plan(tuple(entries), ())
    writable: list[str] = []
    if mode is SandboxMode.WORKSPACE_WRITE:
        writable = [root, tmpdir, *SHARED_WRITABLE, *(expand(p) for p in policy.writable)]
        writable = [os.path.realpath(p) for p in writable]
    entries += [f"w:{p}" for p in writable]
    entries.append(f"tmp:{tmpdir}")
    entries += [f"f:{p}" for p in WRITABLE_FILES if os.path.exists(p)]
    notes: list[str] = []
    walls = None
    if support.namespace:
        entries.append("ns:1")
        entries += [f"ro:{p}" for p in protected_paths(root)]
        entries += git_entries(root, tuple(writable), git, notes)
        entries.append(f"empty:{empty_file(tmpdir)}")
        walls = build_walls(root, writable, policy.private)  # bastion's, sockets, $HOME's
        entries += walls.entries()
        notes += walls.notes
        hidden, complete = DenyList(root, policy.deny).targets()
        for path in hidden:
            real = os.path.realpath(path)
            entries.append(("hd:" if os.path.isdir(real) else "hf:") + real)
        if not complete:
            notes.append(
                "the workspace has too many folders: deny-listed names were looked for "
                "in the first few thousand only"
            )
    return Plan(tuple(entries), tuple(writable), tuple(notes), walls)


def build_walls(root: str, writable: list[str], private: tuple[str, ...]) -> Walls:
    from tools.walls import build

    return build(root, writable, private)


def empty_file(tmpdir: str) -> str:
    """An empty file to bind over deny-listed files and sockets (in the call's temp
    dir, which goes with the call)."""
    path = os.path.join(tmpdir, ".bastion-denied")
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444))
    return path


def protected_paths(root: str) -> list[str]:
    """The protected paths that exist, but git's (``git_entries`` binds those)."""
    return [
        os.path.realpath(p)
        for p in (os.path.join(root, rel) for rel in PROTECTED if not rel.startswith(".git/"))
        if os.path.exists(p)
    ]


def git_entries(
    root: str, writable: tuple[str, ...], git: Scan | None, notes: list[str]
) -> list[str]:
    """``pin:``/``ro:`` entries for git's control files beneath the writable folders."""
    from tools.gitguard import mount_entries, scan

    entries, said = mount_entries(git if git is not None else scan(root), writable)
    notes += said
    return entries
