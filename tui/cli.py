"""The `bastion` command line. Its flags, output formats and exit codes are a contract.

    bastion [PROMPT]                       Textual app (PROMPT sent first if given)
    bastion -p/--print [PROMPT]            print mode; PROMPT or stdin (both: stdin
                                           follows the prompt as a fenced block)
    bastion sessions [--json] | sessions search QUERY | sessions rm ID
    bastion export ID [--format json|markdown] [-o FILE]
    bastion import FILE                    an exported JSON session under a new id
    bastion fork ID [--at ENTRY]           new session sharing history; prints its id
    bastion compact ID [INSTRUCTIONS]      summarise older turns now (originals kept)
    bastion doctor                         search path, process tracking, sandbox, store
    bastion trust [DIR] [--revoke|--list]  apply DIR's project files (.bastion/)

Exit codes: 0 completed, 1 run failed, 2 bad usage or configuration, 3 (print mode) the
run completed but tool calls it needed were refused (-p cannot ask), 4 (print mode) the
run was stopped by its budget (--max-turns, --max-cost, --time-limit or the config's
max_turns, max_cost, time_limit), 130 interrupted.
Imports stay light here: print mode never loads Textual.

Text the user gives (the prompt, as an argument or on stdin, and the options
that are stored or sent) must be UTF-8: anything else is refused here, in one
line, before a store is opened.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from tui.exits import (  # re-exported: scripts and tests take them from here too
    EXIT_BUDGET,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    UsageError,
    error_line,
)

__all__ = [
    "EXIT_BUDGET",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "UsageError",
    "error_line",
    "main",
    "main_parser",
    "require_utf8",
    "utf8_stdin",
]

SUBCOMMANDS = (
    "sessions", "export", "import", "attach", "compact", "doctor", "fork", "trust",
)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


class _Version(argparse.Action):
    """--version, reading package metadata only when asked (it costs ~60 ms to import)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"bastion {_version()}")
        parser.exit()


def _version() -> str:
    """The installed version, from the `bastion-VERSION.dist-info` folder on the import
    path (beside the package in a regular install, in site-packages in an editable one),
    else from importlib.metadata, which costs ~60 ms to import."""
    import os

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in (here, *sys.path):
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("bastion-") and name.endswith(".dist-info"):
                return name[len("bastion-") : -len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bastion")
    except PackageNotFoundError:
        return "0+unknown"


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
    They override the config's max_turns, max_cost and time_limit for this invocation."""
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


def main_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bastion",
        description="A terminal coding agent whose sessions survive a crash mid-turn.",
        epilog="Subcommands: bastion sessions [--json] | sessions search QUERY | sessions rm ID | "
        "export ID [--format json|markdown] [-o FILE] | import FILE | attach ID | "
        "fork ID [--at ENTRY] | compact ID | doctor | trust [DIR] [--revoke|--list]. "
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
    p.add_argument("--approval-mode", choices=("read-only", "ask", "auto-edit", "full-auto"))
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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # the common case, answered before argparse is built
        print(f"bastion {_version()}")
        return EXIT_OK
    try:
        code = _dispatch(args)
    except UsageError as exc:
        error_line(str(exc))
        code = EXIT_USAGE
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # Whoever read our output went away (`bastion -p ... | head`). The run's
        # work is committed regardless; say nothing more and exit non-zero.
        _silence_stdout()
        return EXIT_FAILED
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_FAILED
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# Lone surrogates: how Python hands over argv bytes that are not UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")
_UTF8_HINT = "pass UTF-8 text (convert it with `iconv -t UTF-8`)"
#: Options whose text is stored or sent to the model, by their flag.
_TEXT_OPTIONS = {
    "prompt": "the prompt",
    "model": "--model",
    "session_id": "--session-id",
    "resume": "--resume",
    "request_key": "--request-key",
    "query": "the search query",
}


def require_utf8(value: str, what: str) -> None:
    """UsageError naming `what` and the first byte that is not UTF-8, if there is one."""
    found = _SURROGATE.search(value)
    if found is None:
        return
    char = ord(found.group())
    offset = len(value[: found.start()].encode("utf-8", "surrogateescape"))
    byte = f"byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF else f"U+{char:04X}"
    raise UsageError(f"{what} is not valid UTF-8 ({byte} at offset {offset}): {_UTF8_HINT}")


def _check_text_options(opts: argparse.Namespace) -> None:
    for dest, what in _TEXT_OPTIONS.items():
        value = getattr(opts, dest, None)
        if isinstance(value, str):
            require_utf8(value, what)


def utf8_stdin(stdin: Any) -> io.StringIO:
    """All of stdin, decoded strictly as UTF-8 (a UsageError saying where it is not)."""
    raw = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
    if isinstance(raw, str):
        require_utf8(raw, "the prompt on stdin")
        return io.StringIO(raw)
    try:
        return io.StringIO(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"the prompt on stdin is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start}): {_UTF8_HINT}"
        ) from None


def _dispatch(args: list[str]) -> int:
    if args and args[0] == "doctor":
        from tui import doctor

        return doctor.run(args[1:])
    if args and args[0] in SUBCOMMANDS:
        from tui import commands

        name, rest = args[0], args[1:]
        if name == "sessions":
            sessions_opts = sessions_parser().parse_args(rest)
            _check_text_options(sessions_opts)
            return commands.sessions(sessions_opts)
        if name == "export":
            return commands.export(export_parser().parse_args(rest))
        if name == "import":
            return commands.import_(import_parser().parse_args(rest))
        if name == "trust":
            return commands.trust(trust_parser().parse_args(rest))
        if name == "fork":
            return commands.fork(fork_parser().parse_args(rest))
        if name == "compact":
            compact_opts = compact_parser().parse_args(rest)
            _check_text_options(compact_opts)
            return commands.compact(compact_opts)
        return commands.attach(attach_parser().parse_args(rest))
    opts = main_parser().parse_args(args)
    _check_text_options(opts)
    from runtime import install_method_cache

    install_method_cache()  # before the front end and the harness make their classes
    if opts.trust:
        from runtime import trust_once

        trust_once(os.getcwd())
    if opts.print_mode and opts.resume == "":
        raise UsageError(
            "-p/--print cannot show the session picker: give the id, `-r ID` "
            "(`bastion sessions --all` lists them), or `-c` for this directory's latest"
        )
    if opts.print_mode and opts.prompt is None and sys.stdin is not None and not sys.stdin.isatty():
        # Print mode reads its prompt from stdin: read and check it before anything
        # is opened, and hand print mode the decoded text.
        sys.stdin = utf8_stdin(sys.stdin)
    elif opts.print_mode and opts.prompt is not None:
        # A prompt and piped input: the prompt first, the input after it as a fenced block.
        from tui.piped import prompt_with_stdin

        opts.prompt = prompt_with_stdin(opts.prompt, sys.stdin)
    if opts.print_mode or opts.plain:
        from runtime import probe_sandbox_soon

        probe_sandbox_soon()  # (its child interpreter runs while the front end loads)
    if opts.print_mode:
        from tui import print_mode

        return print_mode.run(opts)
    if opts.output_format != "text":
        raise UsageError("--output-format goes with -p/--print")
    if opts.plain:
        from tui import plain

        return plain.run(opts)
    from tui import launch

    return launch.run(opts)


if __name__ == "__main__":
    sys.exit(main())
