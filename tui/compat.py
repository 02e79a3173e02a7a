"""Textual internals bastion depends on, in one place, each with the test that fails
when it stops working (tests/tui/test_compat.py).

- Alt+Enter as ESC CR. Terminals without the kitty keyboard protocol (tmux by
  default, most others) send Alt+Enter as ESC then CR. Textual's parser reads ESC
  as "alt" but applies it only to one-character key names, so the press arrives as
  plain Enter: a steer where the user asked for a follow-up. `install()` wraps
  `XTermParser._sequence_to_key_events` so that ESC CR is `alt+enter`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual import events
from textual._xterm_parser import XTermParser

__all__ = ["install"]

_ALT_NAMED = frozenset({"enter"})  # named keys whose alt form bastion binds


def install() -> None:
    """Patch once (idempotent)."""
    original: Any = XTermParser._sequence_to_key_events
    if getattr(original, "_bastion_alt", False):
        return

    def sequence_to_key_events(
        self: XTermParser, sequence: str, alt: bool = False
    ) -> Iterable[events.Key]:
        for event in original(self, sequence, alt):
            if alt and event.key in _ALT_NAMED:
                yield events.Key(f"alt+{event.key}", event.character)
            else:
                yield event

    sequence_to_key_events._bastion_alt = True  # type: ignore[attr-defined]
    XTermParser._sequence_to_key_events = sequence_to_key_events  # type: ignore[method-assign]
