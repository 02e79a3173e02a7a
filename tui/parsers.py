"""The `bastion` command line's parsers (argparse): the main one and each subcommand's.

Loaded by `tui.cli` only when a command line needs one.
"""

from __future__ import annotations

import argparse
from typing import Any

from tui.exits import UsageError
from tui.version import installed_version


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


class _Version(argparse.Action):
    """--version, reading package metadata only when asked (it costs ~60 ms to import)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"bastion {installed_version()}")
        parser.exit()


def _positive(kind: type, what: str) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} above 0")
        return value

    return parse


def _budget_flags(p: argparse.ArgumentParser) -> None:
    """The run budget: each limit reached ends the run interrupted (exit 4 with -p).
    They override the config's max_turns, max_cost, time_limit and session_max_cost for
    this invocation."""
    p.add_argument(
        "--max-turns",
        type=_positive(int, "a whole number"),
        metavar="N",
        help="stop a run after N model requests (config: max_turns)",
    )
    p.add_argument(
        "--max-cost",
        type=_positive(float, "an amount in USD"),
        metavar="USD",
        help="stop a run once it has cost USD (the provider's figure, else the catalog's "
        "prices; when neither is known the run stops after its first request) "
        "(config: max_cost)",
    )
    p.add_argument(
        "--time-limit",
        type=_positive(float, "a number of seconds"),
        metavar="SECONDS",
        help="stop a run after SECONDS of wall time (config: time_limit)",
    )
    p.add_argument(
        "--session-max-cost",
        type=_positive(float, "an amount in USD"),
        metavar="USD",
        help="stop work once the whole session (every run, subagents included) has cost "
        "USD (config: session_max_cost)",
    )


def main_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion",
        description="A terminal coding agent whose sessions survive a crash mid-turn.",
        epilog="Subcommands: bastion sessions [--json] | sessions search QUERY | sessions rm ID | "
        "export ID [--format json|markdown] [-o FILE] | import FILE | attach ID | "
        "fork ID [--at ENTRY] | compact ID | doctor | trust [DIR] [--revoke|--list] | "
        "acp [--approval-mode MODE] [--model SPEC] | mcp login NAME | mcp logout NAME. "
        "Exit codes: 0 completed, 1 the run failed, 2 bad usage or configuration, "
        "3 (-p) completed but tool calls it needed were refused (-p cannot ask: allow them "
        "with --approval-mode or --allow), 4 (-p) stopped by its budget (--max-turns, "
        "--max-cost, --time-limit), 130 interrupted.",
    )
    p.add_argument("prompt", nargs="?", help="what to ask; with -p, read from stdin if omitted")
    p.add_argument(
        "-p",
        "--print",
        dest="print_mode",
        action="store_true",
        help="answer once and exit (no interface)",
    )
    p.add_argument(
        "--output-format",
        choices=("text", "json", "stream-json"),
        default="text",
        help="print mode output: text (answer on stdout), json, stream-json",
    )
    _model_and_safety_flags(p)
    _session_flags(p)
    p.add_argument(
        "--request-key",
        metavar="KEY",
        help="admit this prompt once: rerunning with the same KEY returns the same run",
    )
    _budget_flags(p)
    p.add_argument("--plain", action="store_true", help="line mode instead of the full-screen app")
    p.add_argument(
        "--theme",
        metavar="NAME",
        help="the app's theme: bastion-dark, bastion-light, bastion-high-contrast or a user theme",
    )
    p.add_argument(
        "--trust",
        action="store_true",
        help="apply this folder's project files (.bastion/) for this invocation only; "
        "`bastion trust` remembers it",
    )
    p.add_argument("--version", action=_Version)
    return p


def _model_and_safety_flags(p: argparse.ArgumentParser) -> None:
    """--model, the approval mode, the command sandbox and --allow."""
    p.add_argument(
        "--model",
        help="PROVIDER/NAME: openai/, openai-responses/, anthropic/, ollama/, llamacpp/ or a "
        "[providers.NAME] table, e.g. openai/gpt-4.1, ollama/llama3.2",
    )
    p.add_argument(
        "--approval-mode", choices=("read-only", "ask", "auto-edit", "full-auto", "plan")
    )
    p.add_argument(
        "--sandbox",
        choices=("read-only", "workspace-write", "danger-full-access"),
        help="where commands may write: read-only, workspace-write (default; read-only "
        "under --approval-mode read-only) or danger-full-access (no sandbox)",
    )
    p.add_argument(
        "--network",
        action="store_true",
        default=None,
        help="let sandboxed commands use the network (off by default)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PREFIX",
        help="run commands starting with PREFIX without asking, for this invocation "
        "(repeatable; e.g. --allow 'git status')",
    )


def _session_flags(p: argparse.ArgumentParser) -> None:
    """Which conversation: --session-id, -c or -r (one of them)."""
    session = p.add_mutually_exclusive_group()
    session.add_argument("--session-id", metavar="UUID", help="use (or create) this conversation")
    session.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the latest conversation in this directory",
    )
    session.add_argument(
        "-r",
        "--resume",
        metavar="ID",
        nargs="?",
        const="",
        help="resume conversation ID; without ID, pick one from a list",
    )


def trust_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion trust",
        description="Trust a folder: its project files (.bastion/config.toml, "
        ".bastion/settings.toml) apply to bastion run in it or beneath it. The decision is "
        "kept in your config dir, never in the repository.",
    )
    p.add_argument("dir", nargs="?", default=".", help="the folder (default: this one)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--revoke", action="store_true", help="forget the folder's decision")
    what.add_argument("--list", action="store_true", help="list every recorded decision")
    return p


def sessions_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bastion sessions", description="List, search or remove conversations.")
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
    p.add_argument("--all", action="store_true", help="every directory, not only this one")
    sub = p.add_subparsers(dest="action")
    search = sub.add_parser(
        "search", help="full-text search of every session (FTS5 syntax or plain words)"
    )
    search.add_argument("query")
    # SUPPRESS: `sessions --json search Q` keeps the --json given before the action.
    search.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    rm = sub.add_parser("rm", help="delete a conversation and everything stored for it")
    rm.add_argument("id")
    rm.add_argument(
        "--force", action="store_true", help="delete even with a run in progress or queued input"
    )
    return p


def export_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bastion export", description="Write a conversation out.")
    p.add_argument("id")
    p.add_argument("--format", choices=("json", "markdown"), default="json")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    return p


def compact_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion compact",
        description="Summarise a conversation's older turns; every original entry is kept.",
    )
    p.add_argument("id")
    p.add_argument("instructions", nargs="?", help="what the summary should focus on")
    return p


def attach_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion attach",
        description="A second terminal on a conversation another process drives.",
    )
    p.add_argument("id")
    p.add_argument(
        "--plain", action="store_true", help="line mode even on a terminal (typed lines act)"
    )
    return p


def acp_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion acp",
        description="Serve an editor (Zed, JetBrains, Neovim) over the Agent Client Protocol "
        "on stdin/stdout; each ACP session is a bastion session. Needs the acp extra: "
        "pip install 'bastion[acp]'.",
    )
    p.add_argument(
        "--model",
        help="PROVIDER/NAME its sessions run on (default: a session's own, else the config's)",
    )
    p.add_argument(
        "--approval-mode",
        choices=("read-only", "ask", "auto-edit", "full-auto", "plan"),
        help="what runs without asking the editor (default: the config's, else ask)",
    )
    return p


def import_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion import",
        description="Restore a conversation from `bastion export` JSON under a new id "
        "(printed last).",
    )
    p.add_argument("file", help="the exported JSON file, or - for stdin")
    p.add_argument(
        "--cwd",
        metavar="DIR",
        help="the folder the session works in (default: this one; the file's is never used)",
    )
    return p


def fork_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion fork",
        description="Start a new session sharing a session's history; prints the new id last.",
    )
    p.add_argument("id")
    p.add_argument("--at", metavar="ENTRY", help="share history up to this entry id (default: all)")
    return p


#: Each subcommand's parser, by name (`tui.cli` looks them up here).
def mcp_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion mcp",
        description="Sign in to an MCP server that uses OAuth (oauth = true in its "
        "[mcp_servers.NAME] table), or forget its sign-in.",
    )
    sub = p.add_subparsers(dest="action", required=True)
    login = sub.add_parser("login", help="sign in in the browser; the tokens are kept 0600")
    login.add_argument("name", help="the server's NAME in your config")
    logout = sub.add_parser("logout", help="delete the server's stored tokens")
    logout.add_argument("name", help="the server's NAME in your config")
    return p


SUBCOMMAND_PARSERS = {
    "sessions": sessions_parser,
    "export": export_parser,
    "import": import_parser,
    "trust": trust_parser,
    "fork": fork_parser,
    "compact": compact_parser,
    "attach": attach_parser,
    "acp": acp_parser,
    "mcp": mcp_parser,
}
