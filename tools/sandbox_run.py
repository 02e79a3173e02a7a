"""run_command's side of the sandbox: prepare a command's sandbox (its temp dir,
the supervisor's spec or the macOS wrapper), and afterwards say what the sandbox
denied, so the model and the user can act.

A denial is recognised in the command's output: a line saying ``Permission
denied``, ``Read-only file system`` or ``Operation not permitted`` that names a
path the policy does not let the command write (outside the writable roots, or
protected, or deny-listed), and, with the network off, a failed connection or
name resolution. The result names each one and how to allow it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from tools.denylist import DenyList
from tools.sandbox import (
    PROTECTED,
    SandboxMode,
    SandboxPolicy,
    plan,
    probe,
    unavailable_notice,
)
from tools.walls import SEALED_HINT, Walls, is_socket, why_walled

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
    "to allow it: add the folder to writable_paths in your config.toml "
    "(~/.config/bastion/config.toml), run bastion with --sandbox danger-full-access, "
    "or ask the user to approve running this command outside the sandbox once"
)
HOW_TO_ALLOW_NETWORK = (
    "to allow it: run bastion with --network (or network = true in your config.toml), "
    "or ask the user to approve this command with network"
)


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
    walls: Walls | None = None  # (tools/walls.py) what else is walled, and why

    def cleanup(self) -> None:
        if self.tmpdir is not None:
            try:
                shutil.rmtree(self.tmpdir)
            except FileNotFoundError:
                pass  # the supervisor removed it first
            except OSError as exc:
                self.info.setdefault("notes", []).append(f"temp dir left: {exc.strerror}")
            self.tmpdir = None


def prepare(
    policy: SandboxPolicy | None, root: str, argv: tuple[str, ...], env: dict[str, str]
) -> Prepared:
    """The sandbox for one command; in workspace-write, sets ``TMPDIR`` in ``env`` to its
    temp dir (read-only gets one too, unwritable, for the empty file deny-listed files
    are covered with)."""
    if policy is None:
        return Prepared(argv)
    info: dict[str, Any] = {"mode": policy.mode.value, "network": policy.network}
    if not policy.sandboxed:
        return Prepared(argv, info={**info, "network": True, "applied": False})
    support = probe()
    if not support.available:
        info.update(applied=False, warning=unavailable_notice(policy, support))
        return Prepared(argv, info=info)
    tmpdir = tempfile.mkdtemp(prefix="bastion-cmd-")
    try:
        before = protected_identities(root)
        made = plan(policy, root, tmpdir, support)
        if support.seatbelt:
            from tools.seatbelt import wrap

            hidden, _ = DenyList(root, policy.deny).targets()
            argv = wrap(policy, argv, made.writable, hidden, root)
    except BaseException:
        shutil.rmtree(tmpdir, ignore_errors=True)  # the error that got here is what counts
        raise
    if policy.mode is SandboxMode.WORKSPACE_WRITE:  # read-only: no writes at all
        env["TMPDIR"] = tmpdir
    info.update(applied=True, notes=list(made.notes))
    entries = () if support.seatbelt else made.entries  # sandbox-exec, not the supervisor
    return Prepared(argv, entries, tmpdir, made.writable, info, before, made.walls)


def protected_identities(root: str) -> dict[str, tuple[int, int] | None]:
    """(device, inode) of each protected path (None: absent), to tell afterwards whether
    the command created or replaced one (by moving an ancestor aside, say), which the
    read-only mounts cannot prevent."""
    found: dict[str, tuple[int, int] | None] = {}
    for rel in PROTECTED:
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
    if policy is None or not prep.info.get("applied"):
        return data
    denials = write_denials(output, policy, root, cwd, prep)
    walled, output = socket_denials(output, prep.walls)
    denials += walled
    if not policy.network:
        denials += network_denials(output, " ".join(prep.argv))
    if changed := protected_changed(root, prep.before):
        data["protected_changed"] = changed
    if denials:
        data["sandbox_denials"] = denials[:MAX_DENIALS]
    return data


def protected_changed(root: str, before: dict[str, tuple[int, int] | None]) -> list[str]:
    """Protected paths the command replaced, or created with something in them that
    runs or rules (a new `.bastion/`, hooks that are not git's samples); a plain
    `git init` is not reported."""
    if not before:
        return []
    after = protected_identities(root)
    changed = []
    for rel, was in before.items():
        now = after[rel]
        if now is None or now == was:
            continue
        if was is not None or rel == ".bastion" or (rel == ".git/hooks" and live_hooks(root)):
            changed.append(rel)
    return changed


def live_hooks(root: str) -> bool:
    try:
        names = os.listdir(os.path.join(root, ".git", "hooks"))
    except OSError:
        return False
    return any(not name.endswith(".sample") for name in names)


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
            why = why_denied(path, root, prep.writable, deny, prep.walls)
            real = os.path.realpath(path)
            if why and real not in seen:
                seen.add(real)
                denial = {"path": real, "why": why, "allow": allow_hint(why)}
                if real != path:
                    denial["written_as"] = raw
                found.append(denial)
    return found


def why_denied(
    path: str, root: str, writable: tuple[str, ...], deny: DenyList, walls: Walls | None = None
) -> str:
    """Why the sandbox refuses writing ``path`` ('' if it would not)."""
    real = os.path.realpath(path)
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
    if any(real == w or real.startswith(w.rstrip("/") + "/") for w in writable):
        return ""
    if real in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty"):
        return ""
    return "outside the sandbox's writable folders"


def allow_hint(why: str) -> str:
    if why.startswith("commands cannot create entries directly"):
        return SEALED_HINT
    if why.startswith("deny-listed"):
        return "remove the entry from deny_paths in your config.toml, if the user agrees"
    if why.startswith("protected"):
        return "only the user changes it; say what you would change"
    return HOW_TO_ALLOW_WRITE


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


def network_denials(output: str, command: str) -> list[dict[str, str]]:
    """With the network off, a failed connection or name lookup is the sandbox's
    (TCP connect and bind are denied; with a namespace nothing else is reachable)."""
    denied = bool(DENIED.search(output))
    for line in output.splitlines():
        if NETWORK.search(line) and (FAILED.search(line) or denied):
            address = ADDRESS.search(output) or ADDRESS.search(command)
            shown = re.sub(r"['\"]?, ?", ":", address.group(0)) if address else line.strip()[:120]
            return [{"connection": shown, "why": "network is off", "allow": HOW_TO_ALLOW_NETWORK}]
    return []


def describe(data: dict[str, Any]) -> str:
    """The lines run_command's text adds about the sandbox."""
    lines: list[str] = []
    info = data.get("sandbox") or {}
    if info.get("warning"):
        lines.append(f"[{info['warning']}]")
    for denial in data.get("sandbox_denials") or ():
        what = denial.get("path") or denial.get("connection")
        verb = "writing" if "path" in denial else "connecting to"
        lines.append(f"[sandbox denied {verb} {what}: {denial['why']}; {denial['allow']}]")
    for made in data.get("protected_changed") or ():
        lines.append(
            f"[the command created or replaced {made}, which bastion protects: tell the user]"
        )
    return "\n".join(lines)
