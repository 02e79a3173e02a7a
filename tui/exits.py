"""The command line's exit codes, its usage error and its one-line error: what every
front end (print mode, --plain, the app, the subcommands) ends with. The command
line (tui.cli) dispatches to those front ends; they take these from here, so none
of them imports the command line back."""

from __future__ import annotations

import sys
from typing import Any

__all__ = [
    "EXIT_BUDGET",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "UsageError",
    "close_and_say",
    "error_line",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_BUDGET = 4  # stopped by --max-turns, --max-cost or --time-limit (or the config's)


class UsageError(Exception):
    """Bad command-line usage; the message says what to do instead."""


async def close_and_say(harness: Any) -> None:
    """Close `harness` (a HarnessClient, its owner) and say on stderr, in one line, if a
    session did not settle within the close's bound (runtime's CloseReport)."""
    report = await harness.close()
    if report is not None and (line := report.line()) is not None:
        error_line(line)


def error_line(message: str) -> None:
    """`bastion: MESSAGE` on stderr. A message quotes what it is about (a path, a
    server's or a model's words), so its control characters are shown, not obeyed."""
    from runtime import visible

    print(f"bastion: {visible(message)}", file=sys.stderr)
