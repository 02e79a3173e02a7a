"""The prompt: a multi-line text area. Enter sends, Shift+Enter or Ctrl+J breaks the line.

It grows with its text up to a few lines and then scrolls. A bracketed paste
arrives whole, newlines included. Up on the first line (Down on the last) walks
the history, which is read from the view when a key asks for it (the user
entries of the conversation), so the prompt keeps no list of its own. Up on an
empty prompt first asks for the newest queued inbox item back (the app
withdraws it). Tab (or Alt+Enter, where the terminal reports it) sends the text
as a follow-up; Ctrl+Enter (where reported) or Ctrl+S cuts the run's current step
and sends the text as the next prompt. While a `/command` is being typed, the command hints above the
prompt take Up/Down/Tab to choose and complete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from tui.textual_compat import KeysFirst

__all__ = ["PromptInput"]

NEWLINE_KEYS = frozenset({"shift+enter", "ctrl+j"})
FOLLOW_UP_KEYS = frozenset({"tab", "alt+enter"})
#: Interrupt and redirect: cut the run's current step and send the text as the next
#: prompt. Ctrl+Enter where the terminal reports it (kitty keyboard protocol); Ctrl+S
#: everywhere ("send now": elsewhere Ctrl+Enter arrives as Enter, which steers). Ctrl+G
#: is the editor, as Claude Code users know it.
REDIRECT_KEYS = frozenset({"ctrl+enter", "ctrl+s"})
EDITOR_KEY = "ctrl+g"
IMAGE_KEY = "ctrl+v"  # an image from the system clipboard (terminals paste only text)
#: The transcript's first or last turn (Home/End only while the prompt is empty).
JUMP_KEYS = {"ctrl+home": "home", "ctrl+end": "end", "home": "home", "end": "end"}
#: TextArea's editing and cursor actions, run as their key arrives. Left to its bindings,
#: a key runs when it bubbles back up, after the keys read with it: `BSpace Q` in one
#: read inserted Q, and then the backspace deleted it.
EDITING = frozenset({
    "delete_left", "delete_word_left", "delete_right", "delete_word_right",
    "delete_to_start_of_line", "delete_to_end_of_line_or_delete_line",
    "cursor_left", "cursor_right", "cursor_word_left", "cursor_word_right",
    "cursor_line_start", "cursor_line_end",
})  # fmt: skip


def _editing_keys() -> dict[str, str]:
    """key -> TextArea action, for the EDITING actions (as TextArea binds them)."""
    found: dict[str, str] = {}
    for binding in TextArea.BINDINGS:
        keys, action = (
            (binding.key, binding.action) if isinstance(binding, Binding) else binding[:2]
        )
        if action.split("(")[0] in EDITING:
            for key in keys.split(","):
                found.setdefault(key.strip(), action)
    return found


EDITING_KEYS = _editing_keys()


class PromptInput(KeysFirst):
    """What the user writes. The app decides what a send means (a run, a steer, a command)."""

    DEFAULT_CSS = """
    PromptInput {
        height: auto;
        min-height: 3;
        max-height: 8;
    }
    """

    @dataclass
    class Sent(Message):
        """Enter (follow_up False) or Tab / Alt+Enter (follow_up True) with text to send;
        `redirect`: Ctrl+Enter / Ctrl+S, cut the run's current step for it."""

        prompt: PromptInput
        text: str
        follow_up: bool
        redirect: bool = False

    @dataclass
    class EditExternally(Message):
        """Ctrl+G: the app opens the prompt's text in the user's $VISUAL or $EDITOR."""

        prompt: PromptInput

    @dataclass
    class Jump(Message):
        """Ctrl+Home / Ctrl+End (Home / End on an empty prompt): the transcript's first
        turn ("home") or its last, following it again ("end")."""

        prompt: PromptInput
        where: str

    @dataclass
    class PasteImage(Message):
        """Ctrl+V: the app attaches the system clipboard's image (tui.clipboard)."""

        prompt: PromptInput

    @dataclass
    class PullQueued(Message):
        """Up on an empty prompt: the app may hand back the newest queued item."""

        prompt: PromptInput

    @dataclass
    class CompletionKey(Message):
        """Up, Down, Tab or Enter while the command hints are open: theirs to handle."""

        prompt: PromptInput
        key: str

    def __init__(
        self,
        history: Callable[[], Sequence[str]],
        *,
        has_queued: Callable[[], bool] = lambda: False,
        completing: Callable[[], bool] = lambda: False,
        placeholder: str = "",
        id: str | None = None,
    ) -> None:
        super().__init__(
            "",
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            compact=True,
            highlight_cursor_line=False,
            placeholder=placeholder,
            id=id,
        )
        self._history = history
        self._has_queued = has_queued
        self._completing = completing
        self._index: int | None = None  # position in the history; None: the draft
        self._draft = ""

    @property
    def value(self) -> str:
        return self.text

    def set_value(self, text: str) -> None:
        """Replace the text and put the cursor at its end."""
        self.load_text(text)
        self.move_cursor(self.document.end)

    async def take_key(self, event: events.Key) -> bool:
        key = event.key
        handled = True
        if self._completing() and key in {"up", "down", "tab", "enter"}:
            self.post_message(self.CompletionKey(self, key))
        elif key == "enter":
            self._send(follow_up=False)
        elif key in FOLLOW_UP_KEYS:
            self._send(follow_up=True)
        elif key in REDIRECT_KEYS:
            self._send(follow_up=False, redirect=True)
        elif key == EDITOR_KEY:
            self.post_message(self.EditExternally(self))
        elif key == IMAGE_KEY:
            self.post_message(self.PasteImage(self))
        elif key in JUMP_KEYS and (key.startswith("ctrl+") or not self.text):
            self.post_message(self.Jump(self, JUMP_KEYS[key]))  # (Home/End: the prompt's own
            # cursor keys while it has text)
        elif key in NEWLINE_KEYS:
            self.insert("\n")
        elif key == "up" and self.cursor_at_first_line:
            if not self.text and self._index is None and self._has_queued():
                self.post_message(self.PullQueued(self))
            else:
                self.recall(-1)
        elif key == "down" and self.cursor_at_last_line and self._index is not None:
            self.recall(1)
        elif key in EDITING_KEYS:  # in key order (see EDITING)
            await self.run_action(EDITING_KEYS[key])
        else:
            handled = False
        return handled

    def _send(self, *, follow_up: bool, redirect: bool = False) -> None:
        if self.text.strip():
            self.post_message(self.Sent(self, self.text, follow_up, redirect))

    def recall(self, step: int) -> None:
        history = self._history()
        if not history:
            return
        if self._index is None:
            if step > 0:
                return
            self._draft = self.text
            index = len(history)
        else:
            index = self._index
        index = max(0, min(len(history), index + step))
        self._index = None if index == len(history) else index
        self.set_value(self._draft if self._index is None else history[index])

    def forget_position(self) -> None:
        """Back to a fresh draft (after a send)."""
        self._index = None
        self._draft = ""
