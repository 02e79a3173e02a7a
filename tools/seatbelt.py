"""The macOS half of the command sandbox: a ``sandbox-exec`` profile (SBPL) with
the meaning of the Linux one (``tools/landlock.py``).

Everything is allowed but what the policy denies; in SBPL a later rule wins
over an earlier one, so the profile reads top to bottom as: writes are denied,
then allowed beneath the writable roots (and to ``/dev/null`` and the like),
then denied again in the protected paths; deny-listed paths can be neither read
nor written; with the network off, every socket but a local (unix) one is
denied, but a connection to the allow-list proxy's port on 127.0.0.1 (written to
Apple's documented SBPL, untested: bastion's CI has no Mac). ``sandbox-exec`` is deprecated by Apple but still shipped, and is what
Codex CLI uses too.
"""

from __future__ import annotations

import os

from tools.sandbox import PROTECTED, WRITABLE_FILES, SandboxMode, SandboxPolicy

SANDBOX_EXEC = "/usr/bin/sandbox-exec"


def quote(path: str) -> str:
    """An SBPL string literal."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def matcher(path: str) -> str:
    kind = "subpath" if os.path.isdir(path) else "literal"
    return f"({kind} {quote(path)})"


def profile(
    policy: SandboxPolicy,
    writable: tuple[str, ...],
    hidden: list[str],
    root: str,
    proxy_port: int = 0,
) -> str:
    """The SBPL profile for ``policy`` in workspace ``root``: ``writable`` are the
    writable roots (as ``tools.sandbox.plan`` made them), ``hidden`` the existing
    deny-listed paths; ``proxy_port``, the allow-list proxy's port on 127.0.0.1
    (``tools/netproxy.py``), the one TCP connection allowed with the network off."""
    lines = ["(version 1)", "(allow default)", "(deny file-write*)"]
    allowed = [f"(subpath {quote(p)})" for p in writable]
    allowed += [f"(literal {quote(p)})" for p in WRITABLE_FILES]
    lines.append("(allow file-write*\n    " + "\n    ".join(allowed) + ")")
    if policy.mode is SandboxMode.WORKSPACE_WRITE:
        real = os.path.realpath(root)
        protected = [
            f"({'literal' if p == '.git/config' else 'subpath'} {quote(os.path.join(real, p))})"
            for p in PROTECTED
        ]
        lines.append("(deny file-write*\n    " + "\n    ".join(protected) + ")")
    if hidden:
        denied = [matcher(os.path.realpath(p)) for p in hidden]
        lines.append("(deny file-read* file-write*\n    " + "\n    ".join(denied) + ")")
    if not policy.network:
        lines.append("(deny network*)")
        lines.append("(allow network* (remote unix-socket))")
        if proxy_port:
            lines.append(f'(allow network-outbound (remote ip "localhost:{int(proxy_port)}"))')
    return "\n".join(lines) + "\n"


def wrap(
    policy: SandboxPolicy,
    argv: tuple[str, ...],
    writable: tuple[str, ...],
    hidden: list[str],
    root: str,
    proxy_port: int = 0,
) -> tuple[str, ...]:
    """``argv`` run under ``sandbox-exec`` with the profile of ``policy``."""
    return (SANDBOX_EXEC, "-p", profile(policy, writable, hidden, root, proxy_port), *argv)
