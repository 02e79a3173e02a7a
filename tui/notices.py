"""Telling the user, when the terminal is not in front, that work ended or needs them.

When a run ends (completed, failed, interrupted) or a call waits for an approval
while the terminal is not focused, the app rings the bell and sends a desktop
notification (OSC 9, which iTerm2, WezTerm, kitty, Ghostty and Windows Terminal
show; OSC 777 for rxvt-unicode and foot). The terminal says when it gains or loses
focus (focus events; Textual asks for them): one that never says counts as focused,
so `notify = "auto"` (the default) stays quiet there; `"always"` notifies whatever
the focus, `"bell"` only rings, `"off"` never.

The text is bastion's own ("bastion: the run ended", "bastion: write_file needs your
approval"): nothing a model, command or repository wrote goes into an escape
sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from runtime import ConversationView

__all__ = ["MODES", "Notifier"]

MODES: Final = ("auto", "always", "bell", "off")
_ENDED = {"completed": "the run is done", "failed": "the run failed",
          "interrupted": "the run was interrupted", "cancelled": "the run was cancelled"}  # fmt: skip


class Notifier:
    """Watches the views the app shows and says, through `write` (raw terminal
    output) and `bell`, what ended or waits, per `mode` (MODES)."""

    def __init__(self, mode: str, write: Callable[[str], None], bell: Callable[[], None]) -> None:
        self.mode = mode if mode in MODES else "auto"
        self.write = write
        self.bell = bell
        self.focused = True  # until the terminal says otherwise
        self._asked: set[str] = set()  # calls whose approval was told
        self._ended: set[str] | None = None  # runs over (told, or over when first seen)
        self._conversation = ""  # whose runs those are (another session starts afresh)

    def show(self, view: ConversationView) -> None:
        """A new view: tell what ended or now waits since the last one. A run that
        started and ended between two views (a quick answer) is told too; the runs
        already over in the first view (a resumed session's) are not."""
        if self._ended is None or view.conversation.id != self._conversation:
            self._conversation = view.conversation.id
            self._ended = {r.id for r in view.runs if r.terminal}
        for run in reversed(view.runs):  # the newest first: a view's new runs are last
            if run.id in self._ended:
                break  # (so a long session's every view costs only its newest runs)
            if run.terminal:
                self._ended.add(run.id)
                self._tell(_ENDED.get(str(run.state), "the run ended"))
        for call in view.tool_calls:
            if (
                call.approval == "pending"
                and call.state == "pending"
                and call.id not in self._asked
            ):
                self._asked.add(call.id)
                self._tell(f"{call.name} needs your approval")

    def _tell(self, what: str) -> None:
        if self.mode == "off" or (self.mode == "auto" and self.focused):
            return
        self.bell()
        if self.mode != "bell":
            text = f"bastion: {what}"
            self.write(f"\x1b]9;{text}\x07\x1b]777;notify;bastion;{what}\x07")
