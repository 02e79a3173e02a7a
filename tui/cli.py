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
    bastion acp [--approval-mode MODE] [--model SPEC]
                                           serve an editor over the Agent Client Protocol

Exit codes: 0 completed, 1 run failed, 2 bad usage or configuration, 3 (print mode) the
run completed but tool calls it needed were refused (-p cannot ask), 4 (print mode) the
run was stopped by its budget (--max-turns, --max-cost, --time-limit, --session-max-cost
or the config's max_turns, max_cost, time_limit, session_max_cost), 130 interrupted.
Imports stay light here: print mode never loads Textual.

Text the user gives (the prompt, as an argument or on stdin, and the options
that are stored or sent) must be UTF-8: anything else is refused here, in one
line, before a store is opened.
"""

from __future__ import annotations

import os
import sys


def _keep_workspace_off_path() -> None:
    """Drop `sys.path` entries a repository could fill (empty, relative, or inside
    the working directory: a `PYTHONPATH=.` from a project's .envrc) and a bytecode
    cache prefix there before anything else is imported, keeping where bastion itself
    is installed; the same rule as
    `runtime.ipc.pypath`, inline because importing that could itself be shadowed."""
    try:
        cwd: str | None = os.path.realpath(os.getcwd())
    except OSError:
        cwd = None  # (the working directory was removed: only relative entries go)
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    kept = {here, *(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))}

    def within(path: str, folder: str) -> bool:
        return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

    def unsafe(entry: str) -> bool:
        if not entry or not os.path.isabs(entry):
            return True
        real = os.path.realpath(entry)
        if any(within(real, k) for k in kept):
            return False  # bastion itself and the interpreter it runs on
        return cwd is not None and within(real, cwd)

    sys.path[:] = [entry for entry in sys.path if not unsafe(entry)]
    prefix = sys.pycache_prefix
    if prefix is not None and (not os.path.isabs(prefix) or unsafe(prefix)):
        # bytecode a repository ships under that folder would be loaded: from here on
        # modules are compiled beside bastion's own files instead (read each import)
        sys.pycache_prefix = None


_keep_workspace_off_path()

from tui.exits import (  # noqa: E402 (after the path is made safe) re-exported: scripts and tests take them from here too
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
    "require_utf8",
    "utf8_stdin",
]

TYPE_CHECKING = False  # (typing itself costs a session command ~5 ms to import)
if TYPE_CHECKING:
    import io
    from collections.abc import Sequence
    from typing import Any

SUBCOMMANDS = (
    "sessions", "export", "import", "attach", "compact", "doctor", "fork", "trust", "acp",
    "mcp",
)  # fmt: skip


def __getattr__(name: str) -> Any:
    """`main_parser`, from `tui.parsers`: argparse is loaded only when a command needs it."""
    if name == "main_parser":
        from tui.parsers import main_parser

        return main_parser
    raise AttributeError(f"module 'tui.cli' has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # the process is ours (not a test calling main in its own)
        from runtime import harden_process

        harden_process()  # keys out of /proc/<pid>/environ, memory closed to other processes
    if args == ["--version"]:  # the common case, answered before argparse is built
        from tui.version import installed_version

        print(f"bastion {installed_version()}")
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
    """UsageError naming `what` and the first byte that is not UTF-8, if there is one
    (a lone surrogate: how Python hands over argv bytes that are not UTF-8)."""
    try:
        value.encode("utf-8")
        return
    except UnicodeEncodeError as exc:
        start = exc.start
    char = ord(value[start])
    offset = len(value[:start].encode("utf-8", "surrogateescape"))
    byte = f"byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF else f"U+{char:04X}"
    raise UsageError(f"{what} is not valid UTF-8 ({byte} at offset {offset}): {_UTF8_HINT}")


def _check_text_options(opts: Any) -> None:
    for dest, what in _TEXT_OPTIONS.items():
        value = getattr(opts, dest, None)
        if isinstance(value, str):
            require_utf8(value, what)


def utf8_stdin(stdin: Any) -> io.StringIO:
    """All of stdin, decoded strictly as UTF-8 (a UsageError saying where it is not)."""
    import io

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
        return _subcommand(args[0], args[1:])
    from tui.parsers import main_parser

    opts = main_parser().parse_args(args)
    _check_text_options(opts)
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
        import gc

        # Start-up allocates much and frees little: the collector's passes over it are
        # ~10% of `bastion -p hi`'s CPU. Print mode turns it back on, frozen, once its
        # session is open (print_mode._main), as the app does once its view is drawn.
        gc.disable()
        try:
            from tui import print_mode

            return print_mode.run(opts)
        finally:
            gc.enable()
    if opts.output_format != "text":
        raise UsageError("--output-format goes with -p/--print")
    if opts.plain:
        from tui import plain

        return plain.run(opts)
    from tui import launch

    return launch.run(opts)


def _subcommand(name: str, rest: list[str]) -> int:
    """A session subcommand, read by its argparse parser. (A second parser for their
    usual forms saved 10 ms a command, 32 against 43 ms for `bastion sessions`
    measured 25 times each: not worth a parser to keep equal to argparse.)"""
    from tui.parsers import SUBCOMMAND_PARSERS

    opts: Any = SUBCOMMAND_PARSERS[name]().parse_args(rest)
    _check_text_options(opts)
    if name == "acp":  # (its own module: it needs the ACP SDK, an optional extra)
        from tui import acp

        return acp.run(opts)
    from tui import commands

    run: Any = getattr(commands, "import_" if name == "import" else name)
    return int(run(opts))


if __name__ == "__main__":
    sys.exit(main())
