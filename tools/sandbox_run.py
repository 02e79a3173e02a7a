"""run_command's side of the sandbox: prepare a command's sandbox (its temp dir,
the supervisor's spec or the macOS wrapper), and afterwards say what the sandbox
denied, so the model and the user can act.

A denial is recognised in the command's output: a line saying ``Permission
denied``, ``Read-only file system`` or ``Operation not permitted`` that names a
path the policy does not let the command write (outside the writable roots, or
protected, or deny-listed), and, with the network off, a failed connection or
name resolution. The result names each one and how to allow it.

Git's control files (``tools/gitguard.py``) are scanned before a sandboxed command
and after it (its whole process tree gone, in ``Prepared.cleanup``); what it made
dangerous is moved aside and named in the result (``git_quarantined``).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from tools.bridge import NO_PROXY_VARS, PROXY_VARS
from tools.denylist import DenyList
from tools.netrules import NOT_LISTED
from tools.sandbox import (
    PROTECTED,
    SandboxMode,
    SandboxPolicy,
    SandboxSupport,
    plan,
    probe,
    unavailable_notice,
)
from tools.walls import SEALED_HINT, Walls, is_socket, why_walled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tools.gitguard import Scan
    from tools.netproxy import Channel, NetProxy

# EBUSY: renaming over a read-only bound file (how git writes .git/config)
MARKERS = "Permission denied|Read-only file system|Operation not permitted|Device or resource busy"
DENIED = re.compile(MARKERS + "|EACCES|EROFS")
PATHS = re.compile(  # quoted ('', "", or coreutils' ‘’ in a UTF-8 locale), or bare
    r"""(?:'([^'\n]+)'|"([^"\n]+)"|‘([^’\n]+)’|(?<![\w.])((?:~|\.\.?)?/[^\s'":,;)]*)"""
    rf"""|([^\s:'"]+)(?=: (?:{MARKERS})))"""
)
NETWORK = re.compile(r"(?i)connect|network|resolv|getaddrinfo|not known|socket|host")
FAILED = re.compile(
    r"(?i)fail|denied|couldn't|could not|cannot|refused|unreachable|not known|error"
)
ADDRESS = re.compile(
    r"(?:(?:https?|ftp|ssh|git)://[^\s'\"]+)"
    r"|(?:\d{1,3}(?:\.\d{1,3}){3}(?:(?::| port |['\"]?, ?)\d+)?)"
    r"|(?:resolve host:? '?[\w.-]+)"
)
MAX_DENIALS = 5
UNREACHED = re.compile(r"Connection refused|No such file or directory|ECONNREFUSED|ENOENT")
SOCKET_PATH = re.compile(r"(?<![\w.~])/[^\s'\":,;)\]]+")
WALLED = (
    "commands never reach sockets that act for the user (bastion's own among them); "
    "if the task needs one, say so to the user"
)
HOW_TO_ALLOW_WRITE = (
    "if the task needs that path, the user can add its folder to writable_paths in their "
    "config.toml or approve this command outside the sandbox"
)
HOW_TO_USE_PROXY = (
    "only the hosts of network_hosts are reachable, through the proxy the command's "
    "HTTP_PROXY/HTTPS_PROXY name; the user can add a host to network_hosts in their "
    "config.toml or approve this command with network"
)
HOW_TO_ALLOW_NETWORK = (
    "if the task needs the network, the user can allow it (--network, or network = true in "
    "their config.toml) or approve this command with network"
)


@dataclass(slots=True)
class GitGuard:
    """The git control files before a command, judged against those after it: what
    the command made dangerous beneath ``writable`` is moved aside (once)."""

    root: str
    writable: tuple[str, ...]
    before: Scan
    moved: list[dict[str, str]] | None = None

    @classmethod
    def start(cls, root: str, writable: tuple[str, ...]) -> GitGuard:
        from tools.gitguard import scan

        return cls(root, writable, scan(root))

    def settle(self) -> list[dict[str, str]]:
        """Judge and quarantine (the first call does; later ones return its report)."""
        if self.moved is None:
            from tools.gitguard import judge, quarantine, scan

            self.moved = []  # not retried if what follows fails
            found = judge(self.before, scan(self.root), self.writable)
            self.moved = quarantine(found, self.before.root)
        return self.moved


@dataclass(slots=True)
class Prepared:
    """A command about to run: its argv (wrapped on macOS), the supervisor's spec,
    its temp dir, and what its result will say about the sandbox."""

    argv: tuple[str, ...]
    entries: tuple[str, ...] = ()
    tmpdir: str | None = None
    writable: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)
    before: dict[str, tuple[int, int] | None] = field(default_factory=dict)  # protected paths
    git: GitGuard | None = None
    walls: Walls | None = None  # (tools/walls.py) what else is walled, and why
    proxy: NetProxy | None = None  # the allow-list's, with this command's channel
    channel: Channel | None = None
    refused: list[dict[str, object]] = field(default_factory=list)  # by the proxy

    def cleanup(self) -> None:
        """After the command's process tree is gone: its proxy channel closed (what it
        refused kept), git's control files judged, the temp dir removed."""
        if self.proxy is not None and self.channel is not None:
            self.refused = self.proxy.close_channel(self.channel)
            self.channel = None
        if self.git is not None:
            self.git.settle()
        if self.tmpdir is not None:
            try:
                shutil.rmtree(self.tmpdir)
            except FileNotFoundError:
                pass  # the supervisor removed it first
            except OSError as exc:
                self.info.setdefault("notes", []).append(f"temp dir left: {exc.strerror}")
            self.tmpdir = None


def prepare(
    policy: SandboxPolicy | None,
    root: str,
    argv: tuple[str, ...],
    env: dict[str, str],
    proxy: NetProxy | None = None,
) -> Prepared:
    """The sandbox for one command; in workspace-write, sets ``TMPDIR`` in ``env`` to its
    temp dir (read-only gets one too, unwritable, for the empty file deny-listed files
    are covered with). With the allow-list (``policy.hosts``) and ``proxy``, the command
    gets a channel to it (see ``proxy_channel``)."""
    if policy is None:
        return Prepared(argv)
    info: dict[str, Any] = {"mode": policy.mode.value, "network": policy.network}
    if not policy.sandboxed:
        return Prepared(argv, info={**info, "network": True, "applied": False})
    support = probe()
    if not support.available:
        info.update(applied=False, warning=unavailable_notice(policy, support))
        return Prepared(argv, info=info, git=GitGuard.start(root, ("/",)))
    tmpdir = tempfile.mkdtemp(prefix="bastion-cmd-")
    try:
        before = protected_identities(root)
        guard = None
        if policy.mode is SandboxMode.WORKSPACE_WRITE:
            guard = GitGuard.start(root, ())
        made = plan(policy, root, tmpdir, support, None if guard is None else guard.before)
        if guard is not None:
            guard.writable = made.writable
        notes = list(made.notes)
        channel, entries = proxy_channel(policy, proxy, support, env, notes)
        if support.seatbelt:
            from tools.seatbelt import wrap

            hidden, _ = DenyList(root, policy.deny).targets()
            port = channel.port if channel is not None else 0
            argv = wrap(policy, argv, made.writable, hidden, root, port)
    except BaseException:
        shutil.rmtree(tmpdir, ignore_errors=True)  # the error that got here is what counts
        if "channel" in locals() and channel is not None and proxy is not None:
            proxy.close_channel(channel)
        raise
    if policy.mode is SandboxMode.WORKSPACE_WRITE:  # read-only: no writes at all
        env["TMPDIR"] = tmpdir
    if channel is not None:
        info["hosts"] = list(policy.hosts)
    info.update(applied=True, notes=notes)
    # sandbox-exec, not the supervisor
    entries = () if support.seatbelt else (*made.entries, *entries)
    return Prepared(
        argv, entries, tmpdir, made.writable, info, before, guard, made.walls, proxy, channel
    )


def proxy_channel(
    policy: SandboxPolicy,
    proxy: NetProxy | None,
    support: SandboxSupport,
    env: dict[str, str],
    notes: list[str],
) -> tuple[Channel | None, tuple[str, ...]]:
    """With the allow-list: a channel to the proxy and the supervisor's ``proxy:`` entry
    (its bridge sets the proxy variables); on macOS a loopback port, named in ``env``
    here. Where neither can be made, a note: the network stays off."""
    if not policy.proxied or proxy is None:
        return None, ()
    if support.seatbelt:
        channel = proxy.channel(tcp=True)
        url = f"http://127.0.0.1:{channel.port}"
        for name in PROXY_VARS:
            env[name] = url
        for name in NO_PROXY_VARS:
            env.pop(name, None)
        return channel, ()
    if not support.namespace:
        notes.append(
            "network_hosts needs a network namespace, which this machine does not allow: "
            "the network is off"
        )
        return None, ()
    channel = proxy.channel()
    return channel, (f"proxy:{channel.path}",)


def protected_identities(root: str) -> dict[str, tuple[int, int] | None]:
    """(device, inode) of each protected path but git's (None: absent), to tell
    afterwards whether the command created or replaced one (by moving an ancestor
    aside, say), which the read-only mounts cannot prevent. Git's control files are
    the GitGuard's."""
    found: dict[str, tuple[int, int] | None] = {}
    for rel in PROTECTED:
        if rel.startswith(".git/"):
            continue
        try:
            st = os.lstat(os.path.join(root, rel))
        except OSError:
            found[rel] = None
        else:
            found[rel] = (st.st_dev, st.st_ino)
    return found


def applied(prep: Prepared, report: dict[str, Any] | None, platform: str = sys.platform) -> None:
    """Merge what the supervisor reported it applied into the result's sandbox info."""
    if report:
        prep.info["landlock_abi"] = report.get("landlock", 0)
        prep.info["namespace"] = bool(report.get("namespace"))
        prep.info["pid_namespace"] = bool(report.get("pid_namespace"))
        prep.info.setdefault("notes", []).extend(report.get("notes") or ())
    elif prep.info.get("applied") and platform == "darwin":
        prep.info["seatbelt"] = True


def findings(
    prep: Prepared, policy: SandboxPolicy | None, root: str, cwd: str, output: str
) -> dict[str, Any]:
    """What the result says about the sandbox: ``sandbox`` (what applied),
    ``sandbox_denials`` (each denied path or connection, and how to allow it)."""
    data: dict[str, Any] = {}
    if not prep.info:
        return data
    notes = prep.info.get("notes")
    if notes == []:
        del prep.info["notes"]
    data["sandbox"] = prep.info
    if prep.git is not None and (moved := prep.git.settle()):
        data["git_quarantined"] = moved
    if policy is None or not prep.info.get("applied"):
        return data
    denials = write_denials(output, policy, root, cwd, prep)
    walled, output = socket_denials(output, prep.walls)
    denials += walled
    if prep.refused:
        data["network_refused"] = prep.refused
    elif not policy.network:
        denials += network_denials(output, " ".join(prep.argv), policy.proxied)
    if changed := protected_changed(root, prep.before):
        data["protected_changed"] = changed
    if denials:
        data["sandbox_denials"] = denials[:MAX_DENIALS]
    return data


def protected_changed(root: str, before: dict[str, tuple[int, int] | None]) -> list[str]:
    """Protected paths the command replaced or created (a new `.bastion/`); git's are
    judged by the GitGuard."""
    if not before:
        return []
    after = protected_identities(root)
    return [rel for rel, was in before.items() if after.get(rel) not in (None, was)]


def write_denials(
    output: str, policy: SandboxPolicy, root: str, cwd: str, prep: Prepared
) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    seen: set[str] = set()
    deny = DenyList(root, policy.deny)
    for line in output.splitlines():
        if not DENIED.search(line):
            continue
        for match in PATHS.finditer(line):
            raw = next(g for g in match.groups() if g is not None)
            path = os.path.normpath(os.path.join(cwd, os.path.expanduser(raw)))
            real = resolved(path)
            if real is None:
                continue
            why = why_denied(path, root, prep.writable, deny, prep.walls)
            if why and real not in seen:
                seen.add(real)
                denial = {"path": real, "why": why, "allow": allow_hint(why)}
                if real != path:
                    denial["written_as"] = raw
                found.append(denial)
    return found


def resolved(path: str) -> str | None:
    """`path` with its symlinks resolved as bastion sees them (to tell a symlink in the
    workspace from where it leads); None when it names no file (a NUL in it).

    Under /proc (and /dev/fd, /dev/stdin…, links into it) nothing is resolved: those
    links describe the process that follows them, bastion and not the command, and
    some cannot be read at all (`/proc/1/root` is EACCES even for root). A link that
    cannot be read leaves the path as printed."""
    if "\0" in path:
        return None
    if path == "/proc" or path.startswith(("/proc/", "/dev/fd/", "/dev/std")):
        return path
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def why_denied(
    path: str, root: str, writable: tuple[str, ...], deny: DenyList, walls: Walls | None = None
) -> str:
    """Why the sandbox would refuse writing ``path`` ('' if it would not)."""
    real = resolved(path) or path
    if walls is not None and (walled := why_walled(real, walls)):
        return walled
    rel = os.path.relpath(real, os.path.realpath(root))
    if not rel.startswith(".."):
        entry = deny.match(rel)
        if entry is not None:
            return f"deny-listed ({entry})"
        for protected in PROTECTED:
            if rel == protected or rel.startswith(protected + "/"):
                return f"protected ({protected} is never writable by commands)"
        if is_git_control(rel):
            return "protected (git's control files are never writable by commands)"
    if any(real == w or real.startswith(w.rstrip("/") + "/") for w in writable):
        return ""
    if real in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty"):
        return ""
    return "outside the sandbox's writable folders"


def is_git_control(rel: str) -> bool:
    """Whether workspace-relative ``rel`` is a git control file ``tools.gitguard`` binds
    read-only or pins: a ``.git``, or a config, pointer or hook inside one."""
    from tools.gitguard import CONFIGS, POINTERS

    parts = rel.split("/")
    if ".git" not in parts:
        return False
    inside = parts[parts.index(".git") + 1 :]
    return not inside or "hooks" in inside or inside[-1] in (*CONFIGS, *POINTERS)


def allow_hint(why: str) -> str:
    if why.startswith("commands cannot create entries directly"):
        return SEALED_HINT
    if why.startswith("deny-listed"):
        return "only the user can take it out of deny_paths in their config.toml"
    if why.startswith("protected"):
        return "only the user changes it; say what you would change"
    return HOW_TO_ALLOW_WRITE


def denial_line(denial: dict[str, str], failed: bool) -> str:
    """One denial, in words that claim only what bastion knows: the command's output
    reports it, what the policy says of that path or of the network, whether the
    command failed, and how the user could allow it (a path outside the writable
    folders or the network: only when the command failed)."""
    why = denial["why"]
    if "path" in denial:
        said = f"the command's output reports a refused write to {denial['path']}"
        starts = ("outside", "protected", "deny-listed", "hidden", "inside")
        checked = f"that path is {why}" if why.startswith(starts) else why
        # deny-listed or protected: that only the user changes it is said either way
        hint = denial["allow"] if failed or not why.startswith("outside") else ""
    elif why != "network is off":  # a Unix socket the walls keep out of reach
        said = f"the command's output reports a failed connection to {denial['connection']}"
        checked = f"that socket is {why}" if not why.startswith("a Unix") else f"it is {why}"
        hint = denial["allow"]  # (only that the user decides: never an escalation)
    else:
        said = f"the command's output reports a failed connection ({denial['connection']})"
        checked = "the network is off for commands here"
        hint = denial["allow"] if failed else ""
    ended = "the command failed" if failed else "the command still succeeded"
    line = f"[{said}; {checked}, so the sandbox may be why; {ended}"
    return line + (f"; {hint}]" if hint else "]")


def socket_denials(output: str, walls: Walls | None) -> tuple[list[dict[str, str]], str]:
    """Connections to Unix sockets the walls keep out of reach (a folder hidden, or a
    socket covered, by name or because it listened when the command started), and
    the output without the lines that named them (they are not the network's)."""
    if walls is None:
        return [], output
    found: list[dict[str, str]] = []
    kept: list[str] = []
    for line in output.splitlines():
        why = ""
        if UNREACHED.search(line):
            for match in SOCKET_PATH.finditer(line):
                why = walled_socket(match.group(0), walls)
                if why:
                    if all(d["connection"] != match.group(0) for d in found):
                        found.append({"connection": match.group(0), "why": why, "allow": WALLED})
                    break
        if not why:
            kept.append(line)
    return found, "\n".join(kept)


def walled_socket(path: str, walls: Walls) -> str:
    real = os.path.realpath(path)
    for folder in walls.hidden:
        if real == folder or real.startswith(folder.rstrip("/") + "/"):
            return walls.reasons.get(folder, "hidden from commands")
    if real in walls.sockets or is_socket(real):
        return "a Unix socket outside the sandbox, which commands cannot reach"
    return ""


def network_denials(output: str, command: str, proxied: bool = False) -> list[dict[str, str]]:
    """With the network off, a failed connection or name lookup is the sandbox's
    (TCP connect and bind are denied; with a namespace nothing else is reachable).
    With the allow-list (``proxied``), what the proxy refused is said instead; this
    is a connection that did not go through it."""
    denied = bool(DENIED.search(output))
    for line in output.splitlines():
        if NETWORK.search(line) and (FAILED.search(line) or denied):
            address = ADDRESS.search(output) or ADDRESS.search(command)
            shown = re.sub(r"['\"]?, ?", ":", address.group(0)) if address else line.strip()[:120]
            hint = HOW_TO_USE_PROXY if proxied else HOW_TO_ALLOW_NETWORK
            return [{"connection": shown, "why": "network is off", "allow": hint}]
    return []


def describe(data: dict[str, Any]) -> str:
    """The lines run_command's text adds about the sandbox.

    A denial is all bastion knows of it: what the command printed, whether it
    failed, and what the policy allows. The kernel does not say what it refused,
    and a command can print anything. So a denial's line never says the sandbox
    denied something: it says the command's output reports a refused write (or a
    failed connection), what bastion checked of that path (outside the writable
    folders, protected, deny-listed), and, only when the command failed and the
    user could change it, how the user could. It never tells the model to ask for
    more on the strength of printed text alone (`denial_line`).
    """
    lines: list[str] = []
    info = data.get("sandbox") or {}
    if info.get("warning"):
        lines.append(f"[{info['warning']}]")
    failed = bool(data.get("timed_out")) or data.get("exit_code") != 0
    for denial in data.get("sandbox_denials") or ():
        lines.append(denial_line(denial, failed))
    lines += [refused_line(r) for r in data.get("network_refused") or ()]
    for made in data.get("protected_changed") or ():
        lines.append(
            f"[the command created or replaced {made}, which bastion protects: tell the user]"
        )
    lines += [quarantine_line(moved) for moved in data.get("git_quarantined") or ()]
    return "\n".join(lines)


def refused_line(refused: dict[str, Any]) -> str:
    """One line for a host the allow-list's proxy refused (bastion knows it did)."""
    if not refused.get("host"):
        return f"[network: {refused.get('why')}]"
    times = int(refused.get("times") or 1)
    again = f", {times} times" if times > 1 else ""
    why = str(refused.get("why"))
    hint = "; only the user can add it to network_hosts" if why == NOT_LISTED else ""
    return f"[network: bastion's proxy refused {refused['host']} ({why}{again}){hint}]"


def quarantine_line(moved: dict[str, str]) -> str:
    """One line for a git control file the command made dangerous."""
    what = f"{moved['path']}: {moved['key']} {moved['why']}"
    if "moved_to" in moved:
        return (
            f"[bastion moved {moved['path']} aside to {moved['moved_to']} ({moved['key']} "
            f"{moved['why']}); tell the user, who decides whether to keep it]"
        )
    return (
        f"[{what}, and bastion could not move it aside ({moved.get('error')}): tell the "
        "user not to run git here until it is removed]"
    )
