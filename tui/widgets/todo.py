"""The model's todo list (runtime.plan), pinned above the prompt."""

from __future__ import annotations

from textual.reactive import var
from textual.widgets import Static

from runtime import TodoItem
from runtime.model.views import ConversationView
from tui.markup import escape
from tui.plan_lines import plan_header, plan_rows

__all__ = ["TodoList"]

_STYLES = {
    "done": "[$foreground-muted strike]{}[/]",
    "in_progress": "[b $accent]{}[/]",
    "pending": "{}",
    "more": "[$foreground-muted]{}[/]",
}


class TodoList(Static):
    """The list as the model's last `todo` call left it: a header with how much is done,
    then one line per item. Shown while something is left to do or a run is going on;
    hidden once every item is done and the run has ended (or there is no list)."""

    DEFAULT_CSS = """
    TodoList {
        height: auto;
        max-height: 12;
        padding: 0 2;
        display: none;
    }
    TodoList.-shown {
        display: block;
    }
    """

    shown: var[bool] = var(False, toggle_class="-shown")
    _drawn: tuple[tuple[TodoItem, ...], bool] | None = None  # what the last `show` drew

    def show(self, view: ConversationView) -> None:
        items = view.todos
        busy = view.active_run is not None
        if self._drawn == (items, busy):
            return
        self._drawn = (items, busy)
        self.shown = bool(items) and (busy or any(i.status != "done" for i in items))
        if not self.shown:
            return
        lines = [f"[$primary]{escape(plan_header(items))}[/]"]
        for status, mark, content in plan_rows(items):
            lines.append(_STYLES[status].format(f"{mark} {escape(content)}"))
        self.update("\n".join(lines))
