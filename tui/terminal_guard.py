"""Put the terminal back when the app dies without doing it (`kill -9`).

The app sets its terminal raw, on the alternate screen, with mouse reporting and
bracketed paste on, and undoes it all when it exits. Killed, it cannot: the shell
is left raw (`Killed` glued to a stale screen, no echo) until `reset`. So before
the app starts, `capture()` notes the terminal's name and its settings; the
harness process (`tui.child`), which outlives the app by a moment, calls
`restore()` when the app's end of their socket closes without the app having
closed the harness first (it died). Textual-free; errors are ignored (the
terminal may be gone too).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

__all__ = ["RESET", "capture", "restore"]

#: Mouse reporting (1000/1002/1003/1006/1015), focus events (1004) and bracketed paste
#: (2004) off, the kitty keyboard protocol popped, the cursor shown, the normal screen.
RESET = (
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2004l"
    "\x1b[<u\x1b[?25h\x1b[?1049l"
)

Saved = tuple[str, list[Any]]


def capture() -> Saved | None:
    """The terminal on stdin (its device path) and its settings now; None if not one."""
    try:
        import termios

        if not sys.stdin.isatty():
            return None
        fd = sys.stdin.fileno()
        return os.ttyname(fd), termios.tcgetattr(fd)
    except (OSError, ValueError, ImportError, AttributeError):
        return None


def restore(saved: Saved | None) -> str | None:
    """Set the terminal `capture()` noted back as it was, and end what the app turned on:
    None once done (or with nothing noted), else why it could not be."""
    if saved is None:
        return None
    import termios

    path, attrs = saved
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
            with contextlib.suppress(BlockingIOError):  # (its output queue full: settings first)
                os.write(fd, RESET.encode())
        finally:
            os.close(fd)
    except (OSError, termios.error) as exc:  # the terminal may be gone too
        return f"{path}: {exc}"
    return None
