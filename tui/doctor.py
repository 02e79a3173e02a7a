"""`bastion doctor`: one line per check of what this machine and setup will use.

Each check is a function returning a `Check`; `CHECKS` lists them in the order
printed. A check reports; it never changes anything (the store is opened
read-only). The exit code is 1 if a check failed, else 0: the Python search path
and a platform that tracks only process groups are reported, not failures. A
check's line quotes files and servers (a hook's command, a folder's name, a
server's error): it is printed with its control characters shown
(`runtime.visible`), on one line.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    line: str


def search_path() -> Check:
    from tools import native

    if native.NATIVE is not None:
        return Check("search", True, "native search path (tools._native, the system's RE2)")
    return Check("search", True, f"python search path ({native.REASON})")


def commands() -> Check:
    from tools import reaper

    if reaper.subreaper(become=False):
        return Check(
            "commands",
            True,
            "every process a command starts is tracked (Linux child subreaper) and "
            "killed with it, even after setsid or a double fork",
        )
    return Check("commands", True, f"process group only: {reaper.UNTRACKED}")


def sandbox() -> Check:
    """What commands run in here: the mode a session would use and what the kernel
    offers. A sandboxed mode this machine cannot honour is a failure."""
    import os

    from runtime import ConfigError, load_config, sandbox_report

    try:
        config = load_config(os.getcwd())
    except ConfigError as exc:
        return Check("sandbox", False, str(exc))
    ok, line = sandbox_report(config, config.approval_mode.value)
    return Check("sandbox", ok, line)


def network() -> Check:
    """What commands may reach: nothing, everything, or the hosts of `network_hosts`
    through bastion's proxy (started here once, and asked for a host it must refuse)."""
    import os

    from runtime import ConfigError, load_config, network_report

    try:
        config = load_config(os.getcwd())
    except ConfigError as exc:
        return Check("network", False, str(exc))
    ok, line = network_report(config, config.approval_mode.value)
    return Check("network", ok, line)


def hooks() -> Check:
    """The hooks a session here would run: the user's and a trusted project's."""
    import os

    from runtime import ConfigError, hooks_report

    try:
        return Check("hooks", True, hooks_report(os.getcwd()))
    except ConfigError as exc:
        return Check("hooks", False, str(exc))


def store() -> Check:
    from runtime import (
        ConfigError,
        configured_store,
        default_home,
        kept_bytes,
        schema_version,
        store_report,
    )

    try:
        url = configured_store()
    except ConfigError as exc:
        return Check("store", False, str(exc))
    if url is not None:  # sessions kept in PostgreSQL (`store`, BASTION_STORE)
        return Check("store", *store_report(url))
    path = default_home() / "bastion.sqlite"
    if not path.exists():
        return Check("store", True, f"{path} (not created yet; the first session creates it)")
    kept = ""
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row and 7 <= int(row[0]) <= schema_version():  # bytes kept for /rewind
                kept = "; " + kept_bytes(db).line()
        finally:
            db.close()
    except sqlite3.Error as exc:
        return Check("store", False, f"{path} cannot be read: {exc}")
    version = int(row[0]) if row else 0
    latest = schema_version()
    if version > latest:
        return Check(
            "store", False, f"{path} has schema {version}, newer than this bastion's {latest}"
        )
    state = "current" if version == latest else f"migrates to {latest} when opened"
    return Check("store", True, f"{path} (schema version {version}, {state}){kept}")


def instructions() -> Check:
    """Which AGENTS.md / CLAUDE.md files a session started here would read."""
    import os

    from runtime import load_instructions

    found = load_instructions(os.getcwd())
    ok = not any(f.error for f in found.files)
    return Check("agents", ok, found.describe())


def model() -> Check:
    """The configured model and what the catalog knows of it (a guess is flagged)."""
    import os

    from runtime import ConfigError, load_config

    try:
        config = load_config(os.getcwd())
    except ConfigError as exc:
        return Check("model", False, str(exc))
    info = config.model_info(config.model)
    cap = config.output_cap(config.model)
    line = (
        f"{config.model}: {info.context_window:,}-token window, output cap {cap:,}, "
        f"images {'yes' if info.images else 'no'}, "
        + (
            f"${info.input_price}/${info.output_price} per 1M in/out"
            if info.priced
            else "no prices"
        )
    )
    if not info.known:
        line += (
            " (unknown model: conservative defaults; set its numbers in a "
            f'[models."{config.model}"] table of config.toml)'
        )
    return Check("model", True, line)


def privacy() -> Check:
    """The store's folder 0700 and its files 0600 (another local user reads nothing)."""
    from runtime import default_home, store_modes

    path = default_home() / "bastion.sqlite"
    found = store_modes(path)
    loose = [(f, mode, most) for f, mode, most in found if mode & ~most]
    if not found:
        return Check("private", True, f"{path.parent} (not created yet; made 0700)")
    if loose:
        shown = ", ".join(f"{f} is {mode:o} (should be {most:o})" for f, mode, most in loose)
        return Check("private", False, f"{shown}: opening the store fixes it")
    return Check("private", True, f"{path.parent} is 0700, its database files 0600")


def trust() -> Check:
    """Whether this folder's project files apply, and what of them was ignored."""
    import os

    from runtime import ConfigError, load_config, recorded_trust, trust_of

    folder = trust_of(os.getcwd())
    try:
        recorded_trust()  # a trust file that cannot be read counts as no decision: say so
        notes = load_config(os.getcwd()).notes
    except ConfigError as exc:
        return Check("trust", False, str(exc))
    if folder.trusted:
        how = "for this run (--trust)" if folder.once else f"(bastion trust {folder.decided_by})"
        line = f"{folder.folder} is trusted {how}: its project files apply"
    else:
        line = f"{folder.folder} is not trusted: its project files are ignored"
    return Check("trust", True, "; ".join([line, *notes]))


def mcp_servers() -> Check:
    """Each [mcp_servers.NAME] of the config: started, its tools listed, then stopped.
    A server that does not start is a failure (a session goes on without it)."""
    import os

    from runtime import ConfigError, default_home, load_config

    try:
        config = load_config(os.getcwd())
    except ConfigError as exc:
        return Check("mcp", False, str(exc))
    if not config.mcp_servers:  # (without asyncio or the SDK: doctor stays light)
        return Check("mcp", True, "no MCP servers configured ([mcp_servers.NAME] in your config)")
    import asyncio

    from runtime import probe_mcp_servers

    statuses = asyncio.run(probe_mcp_servers(config.mcp_servers, default_home()))
    lines = []
    for status in statuses:
        tools = ", ".join(status.tools[:8]) + (", …" if len(status.tools) > 8 else "")
        lines.append(status.line() + (f" ({tools})" if tools else ""))
    return Check("mcp", all(s.state == "ready" for s in statuses), "; ".join(lines))


CHECKS: list[Callable[[], Check]] = [
    search_path, commands, sandbox, network, hooks, store, privacy, trust, model, instructions, mcp_servers,
]  # fmt: skip


HELP = """usage: bastion doctor

Check what this machine and setup will use, one line per check, changing nothing:

  search        the native search path (RE2) or the slower Python one, and why
  commands      how a command's processes are tracked and ended
  sandbox       the command sandbox (Landlock, namespaces; Seatbelt on macOS)
  network       what commands may reach: nothing, everything, or network_hosts
                through bastion's proxy (started once and checked)
  hooks         the hooks a session here would run
  store         the session store ($BASTION_HOME), read-only
  private       the store's files and folder: this user's alone (0600, 0700)
  trust         whether this folder's project files apply
  model         the configured model and its key
  agents        the instruction files (AGENTS.md and the like) a session here reads
  mcp           the MCP servers from your config, started and listed

Exit code: 0 when every check is ok, 1 when one failed, 2 for bad usage."""


def run(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(HELP)
        return 0
    if argv:
        print(f"bastion doctor: unknown argument {argv[0]!r} (it takes none; --help says more)",
              file=sys.stderr)  # fmt: skip
        return 2
    from runtime import probe_sandbox_soon

    probe_sandbox_soon()  # (the kernel is asked on a thread while the checks before it run)
    from runtime import visible

    failed = False
    for check in CHECKS:
        result = check()
        failed |= not result.ok
        mark = "ok  " if result.ok else "FAIL"
        print(f"{mark} {result.name:<9} {visible(result.line, lines=False)}")
    return 1 if failed else 0
