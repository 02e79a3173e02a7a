"""Which sandbox commands run in: config keys, flags and approval modes, resolved
to a `tools.sandbox.SandboxPolicy` (the runtime adapts tools, never the reverse).

Config keys (checked here, read by runtime/config/load.py):

    sandbox_mode = "workspace-write"   # read-only | workspace-write | danger-full-access
    network = false                     # commands may open connections
    writable_paths = ["~/.cache/pip"]   # writable besides the workspace and temp
    deny_paths = ["~/.ssh", ".env"]     # replaces the default deny-list
    network_hosts = ["pypi.org", "*.npmjs.org", "host:8443"]  # with network off, these
                                        # only, through bastion's proxy (tools/netrules.py)

Only the user's own config file may set `network` and `writable_paths`, and
widen `sandbox_mode`; a trusted project's `.bastion/config.toml` may only narrow
the sandbox, narrow `network_hosts` (its entries the user's list covers are kept)
and add `deny_paths` entries, never remove one (runtime.setup.project ignores
anything else, with a note). Flags (`--sandbox MODE`, `--network`) win over the
user's file. Without either, commands run in `workspace-write`, or `read-only`
under the read-only approval mode.

Every policy names bastion's own folders (`own_folders`: the store and its
sockets, the config dir, the sockets' fallback folders): commands never see them
and the file tools never open them (tools/walls.py). Where the sandbox cannot
hide them (no private mount namespace, or no sandbox at all), a command could
reach outside it through them, or through other programs' sockets, so
`ask_without_walls` makes every command ask, whatever the approval mode.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.config.approvals import Decision
from runtime.model.errors import ConfigError

if TYPE_CHECKING:
    from tools.sandbox import SandboxPolicy

log = logging.getLogger(__name__)

COMMAND_TOOLS = frozenset({"run_command"})
UNWALLED_REFUSAL = (
    "REFUSED FORBIDDEN: {tool} needs the user's approval here, whatever the approval "
    "mode, and this session cannot ask: this machine's sandbox cannot hide bastion's own "
    "sockets and folders, or other programs' sockets, from commands ({why}).\n"
    "hint: tell the user the command you would run; they can approve it in an "
    "interactive session, allow it with --allow 'PREFIX', or enable user namespaces "
    "(`bastion doctor` says what is missing)."
)

MODES = ("read-only", "workspace-write", "danger-full-access")
KEYS = ("sandbox_mode", "network", "writable_paths", "deny_paths", "network_hosts")
EXAMPLES = {
    "network_hosts": 'network_hosts = ["pypi.org", "files.pythonhosted.org"]',
    "sandbox_mode": 'sandbox_mode = "workspace-write"',
    "network": "network = false",
    "writable_paths": 'writable_paths = ["~/.cache/pip"]',
    "deny_paths": 'deny_paths = ["~/.ssh", ".env"]',
}


def check_keys(path: Path, data: dict[str, Any]) -> None:
    """Refuse a wrongly typed sandbox key, naming the file and the key."""
    mode = data.get("sandbox_mode")
    if mode is not None and mode not in MODES:
        raise ConfigError(
            f"{path}: sandbox_mode must be one of {', '.join(MODES)}, not {mode!r}",
            hint=f"for example {EXAMPLES['sandbox_mode']}",
        )
    if "network" in data and type(data["network"]) is not bool:
        raise ConfigError(
            f"{path}: network must be true or false", hint=f"for example {EXAMPLES['network']}"
        )
    for key in ("writable_paths", "deny_paths"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(
                f"{path}: {key} must be an array of paths", hint=f"for example {EXAMPLES[key]}"
            )
    if "network_hosts" in data:
        host_rules(path, data["network_hosts"])


def host_rules(path: Path, value: Any) -> tuple[Any, ...]:
    """`network_hosts` parsed (tools.netrules.HostRule each); ConfigError naming the
    file and the first bad entry."""
    from tools.netrules import BadHost, parse_hosts

    try:
        return parse_hosts(value)
    except BadHost as exc:
        raise ConfigError(
            f"{path}: network_hosts: {exc}",
            hint=f"for example {EXAMPLES['network_hosts']} (a host, *.domain, an IP, :port)",
        ) from None


def config_fields(user: dict[str, Any], project: dict[str, Any]) -> dict[str, Any]:
    """The Config fields of the user's and the project's sandbox keys."""
    from tools.denylist import DEFAULT_DENY

    deny = tuple(user.get("deny_paths", DEFAULT_DENY))
    mode, narrower = user.get("sandbox_mode"), project.get("sandbox_mode")
    if narrower == "read-only" or (narrower == "workspace-write" and mode == MODES[2]):
        mode = narrower  # (runtime.setup.project let only a narrower mode through)
    return {
        "sandbox_mode": mode,
        "network": bool(user.get("network", False)),
        "writable_paths": tuple(user.get("writable_paths", ())),
        "deny_paths": deny + tuple(p for p in project.get("deny_paths", ()) if p not in deny),
        "network_hosts": network_hosts(user, project),
    }


def network_hosts(user: dict[str, Any], project: dict[str, Any]) -> tuple[str, ...]:
    """The allow-list: the user's entries, normalised; a project's list keeps only
    what the user's covers (a project may only narrow it)."""
    from tools.netrules import narrow

    mine = host_rules(Path("config.toml"), user.get("network_hosts", []))
    if "network_hosts" in project:
        mine = narrow(mine, host_rules(Path(".bastion/config.toml"), project["network_hosts"]))
    return tuple(str(rule) for rule in mine)


def choose_sandbox(
    config: Any, approval_mode: str, mode: str | None = None, network: bool | None = None
) -> SandboxPolicy:
    """The policy for a session: the flag, else the user's config, else the default
    for `approval_mode` (read-only under read-only, else workspace-write)."""
    from tools.sandbox import SandboxMode, SandboxPolicy

    if mode is not None and mode not in MODES:
        raise ConfigError(f"unknown sandbox mode {mode!r}", hint=f"use one of: {', '.join(MODES)}")
    default = "read-only" if approval_mode in ("read-only", "plan") else "workspace-write"
    chosen = mode or getattr(config, "sandbox_mode", None) or default
    return SandboxPolicy(
        mode=SandboxMode(chosen),
        network=bool(network) or bool(getattr(config, "network", False)),
        writable=tuple(getattr(config, "writable_paths", ())),
        deny=tuple(getattr(config, "deny_paths", SandboxPolicy().deny)),
        private=own_folders(),
        hosts=tuple(getattr(config, "network_hosts", ())),
    )


def proxy_folder() -> str:
    """Where this process's allow-list proxy keeps its channels' sockets: in the
    store's folder (`proxy/PID`), or, when that path is too long for a socket, in
    the attach sockets' fallback (`bastion-UID/proxy-PID` in $XDG_RUNTIME_DIR or the
    temp dir): bastion's own folders, which commands never see (`own_folders`)."""
    import tempfile

    from runtime.store.home import home_dir

    pid = os.getpid()
    preferred = os.path.join(home_dir(), "proxy", str(pid))
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = preferred
    for folder in (
        preferred,
        os.path.join(base, f"bastion-{os.getuid()}", f"proxy-{pid}"),
        os.path.join("/tmp", f"bastion-{os.getuid()}", f"proxy-{pid}"),  # (short: the last)
    ):
        if len(os.fsencode(folder)) <= 80:  # a socket's path is at most 107 bytes
            break
    private_parent(os.path.dirname(folder))
    sweep_stale(os.path.dirname(folder))
    return folder


def sweep_stale(parent: str) -> list[str]:
    """Remove the proxy folders (`PID`, `proxy-PID`) of bastion processes that are gone
    (a crash or kill -9 leaves them; their sockets answer nobody); the names removed.
    A folder whose pid is alive is kept, whoever that pid is now; links and anything
    not named so are never touched."""
    removed = []
    with os.scandir(parent) as entries:
        for entry in entries:
            digits = entry.name.removeprefix("proxy-")
            if not digits.isdigit() or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                os.kill(int(digits), 0)
                continue  # alive (or not ours to signal): kept
            except ProcessLookupError:
                pass
            except (PermissionError, OverflowError):
                continue
            try:
                with os.scandir(entry.path) as inside:
                    for item in inside:  # the channels' sockets
                        if not item.is_dir(follow_symlinks=False):
                            os.unlink(item.path)
                os.rmdir(entry.path)
            except FileNotFoundError:
                continue  # another bastion swept it first
            except OSError as exc:  # (something else in it: left for the user)
                log.warning("a stale proxy folder was left: %s", exc)
                continue
            removed.append(entry.name)
    return removed


def private_parent(path: str) -> None:
    """Make `path` a folder only this user can enter (created 0700; an existing one
    must be ours and not a link, and is tightened to 0700)."""
    from runtime.store.home import private_folder

    hint = "remove it (or set XDG_RUNTIME_DIR to a private folder) and start again"
    private_folder(path, lambda message: ConfigError(message, hint=hint))


def own_folders() -> tuple[str, ...]:
    """Bastion's own folders, absolute: the store's (`runtime.store.home`: the store,
    its sockets and artifacts), the config dir (config.toml, trusted.toml, themes,
    agents; `runtime.setup.load.user_config_path`'s) and the folders the attach
    sockets fall back to when the store's path is too long for one
    (`runtime.ipc.listen.socket_path`: `bastion-UID` in $XDG_RUNTIME_DIR, the temp dir
    and /tmp; tests/hostile/test_walls.py checks the two stay in step)."""
    import tempfile

    from runtime.store.home import home_dir

    env = os.environ
    config = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    name = f"bastion-{os.getuid()}"
    bases = (env.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp")
    found = [
        home_dir(),
        os.path.join(config, "bastion"),
        *(os.path.join(b, name) for b in bases if b),
    ]
    return tuple(dict.fromkeys(os.path.abspath(p) for p in found))


def ask_without_walls(
    decision: Decision, tool: str, toolbox: Any, interactive: bool
) -> tuple[Decision, dict[str, Any] | None]:
    """A command that would run unasked (full-auto) asks instead where the sandbox has
    no walls (tools.sandbox.SandboxSupport.walls), like a command the user lets out
    of the sandbox: nothing hides bastion's own sockets from it. Returns the decision
    and, for a session that cannot ask, the refusal the model is told (a rule the
    user saved, or `--allow`, still runs it)."""
    if decision is not Decision.RUN or tool not in COMMAND_TOOLS:
        return decision, None
    policy = getattr(toolbox, "sandbox", None)
    if policy is None or not policy.sandboxed:
        return decision, None
    from tools.sandbox import probe

    support = probe()
    if support.walls:
        return decision, None
    if interactive:
        return Decision.ASK, None
    why = "; ".join(support.reasons) or "no private mount namespace"
    return Decision.ASK, {"refusal": UNWALLED_REFUSAL.format(tool=tool, why=why)}


def sandbox_notice(policy: SandboxPolicy) -> str | None:
    """The one line a front end shows when a sandboxed mode cannot be honoured here."""
    from tools.sandbox import probe, unavailable_notice

    if not policy.sandboxed:
        return None
    return unavailable_notice(policy, probe())


def probe_sandbox_soon() -> None:
    """Start asking this machine what sandbox it offers (a child interpreter, ~20 ms)
    on a thread, so the session opening meanwhile need not wait for the answer."""
    from tools.sandbox import probe_soon

    probe_soon()


def sandbox_report(config: Any, approval_mode: str) -> tuple[bool, str]:
    """`bastion doctor`'s line: what a session started here would get (ok False when a
    sandboxed mode cannot be honoured and commands would run unsandboxed)."""
    from tools.sandbox import probe

    policy = choose_sandbox(config, approval_mode)
    support = probe()
    line = f"{policy.describe()}; this machine offers {support.describe()}"
    if policy.sandboxed and not support.available:
        return False, f"commands would run WITHOUT a sandbox and ask before each: {line}"
    if policy.sandboxed and not support.walls:
        return False, f"commands ask before each run, whatever the approval mode: {line}"
    return True, line


def network_report(config: Any, approval_mode: str) -> tuple[bool, str]:
    """`bastion doctor`'s network line: what commands may reach, and, with
    `network_hosts`, whether bastion's proxy starts and refuses an unlisted host."""
    import shutil
    import tempfile

    from tools.netrules import parse_hosts
    from tools.sandbox import probe

    policy = choose_sandbox(config, approval_mode)
    if not policy.sandboxed or policy.network:
        return True, "commands may use the whole network"
    if not policy.hosts:
        return True, "off for commands (network_hosts lets listed hosts through a proxy)"
    support = probe()
    shown = ", ".join(policy.hosts)
    if not (support.namespace or support.seatbelt):
        return False, (
            f"network_hosts ({shown}) needs a network namespace, which this machine does "
            "not allow: the network is off for commands"
        )
    from tools.netproxy import self_check  # (asyncio: only when there is a proxy to check)

    folder = tempfile.mkdtemp(prefix="bastion-doctor-")
    try:
        problem = self_check(parse_hosts(list(policy.hosts)), folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if problem:
        return False, f"bastion's proxy for network_hosts ({shown}) failed: {problem}"
    return True, (
        f"off for commands but for {shown}, through bastion's proxy (it starts with the "
        "first command and refused an unlisted host just now)"
    )
