"""The prompt line: an Input whose Up/Down walk back through what the user sent.

The history is read from the view when a key asks for it (the user entries of
the conversation), so the prompt keeps no list of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input

__all__ = ["PromptInput"]


class PromptInput(Input):
    """Enter submits (the app decides: a new run, or a steer while one is going)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "Previous prompt", show=False),
        Binding("down", "history(1)", "Next prompt", show=False),
    ]

    def __init__(self, history: Callable[[], Sequence[str]], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._history = history
        self._index: int | None = None  # position in the history; None: the draft
        self._draft = ""

    def action_history(self, step: int) -> None:
        history = self._history()
        if not history:
            return
        if self._index is None:
            if step > 0:
                return
            self._draft = self.value
            index = len(history)
        else:
            index = self._index
        index = max(0, min(len(history), index + step))
        self._index = None if index == len(history) else index
        self.value = self._draft if self._index is None else history[index]
        self.cursor_position = len(self.value)

    def forget_position(self) -> None:
        """Back to a fresh draft (after a submit)."""
        self._index = None
        self._draft = ""
