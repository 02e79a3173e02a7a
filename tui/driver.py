"""The terminal driver Textual picks, noting when a key or paste is read.

New output waits while the user types (`tui.pacing.hold`), from the moment of their
last key. The app handles a key a few turns of its event loop after the
driver's thread reads it (more while a frame is drawn), and a frame of held
output started in between would make that key wait for all of it. So the
driver sets the app's `typed_at` as it reads the key, on its own thread (one
float, written whole), before passing it on as Textual does.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from textual import events
from textual.driver import Driver

__all__ = ["noting_keys"]


@functools.cache
def noting_keys(base: type[Driver]) -> type[Driver]:
    """`base` (a Textual driver class), setting its app's `typed_at` as each key or
    paste is read."""

    class NotingKeys(base):  # type: ignore[valid-type,misc]
        def process_message(self, message: Any) -> None:
            if isinstance(message, (events.Key, events.Paste)):
                self._app.typed_at = time.monotonic()
            super().process_message(message)

    NotingKeys.__name__ = NotingKeys.__qualname__ = f"NotingKeys{base.__name__}"
    return NotingKeys
