"""`@` file completion: a list above the prompt, filtered as you type.

It attaches to whatever prompt widget the app has, an `Input` or a `TextArea`,
through `PromptText` (read the text and cursor, replace a span) and by watching
the prompt's `selection`, so the prompt needs nothing of its own. Keys reach it
through the app (`handle_key`): while the list is open, Up/Down move, Tab or
Enter choose (Enter sends when the path is already typed out), Esc closes;
otherwise they go on to the prompt.

The files come from `runtime.WorkspaceFiles` (the glob tool: workspace path
rules, ignores honoured, bounded) listed on a thread and cached; a listing older
than a few seconds is refreshed in the background when `@` is typed again.
Filtering runs on a thread too, so a big tree never delays a key. The resources
the MCP servers list (`SERVER:URI`, set in `resources` once they have started) are
offered first among the candidates, so `@` is also the resource picker.
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.widget import Widget
from textual.widgets import Input, OptionList, TextArea
from textual.widgets.option_list import Option
from textual.widgets.text_area import Document

from runtime import WorkspaceFiles, fuzzy_filter, mention_at

__all__ = ["FileCompletion", "PromptText"]

SHOWN = 50  # matches listed at most


class PromptText:
    """The small interface completion needs from a prompt: Input or TextArea."""

    def __init__(self, widget: Widget) -> None:
        if not isinstance(widget, Input | TextArea):
            raise TypeError(f"cannot complete in a {type(widget).__name__}")
        self.widget = widget

    def text_and_cursor(self) -> tuple[str, int]:
        widget = self.widget
        if isinstance(widget, Input):
            return widget.value, widget.cursor_position
        assert isinstance(widget, TextArea)
        return widget.text, _document(widget).get_index_from_location(widget.cursor_location)

    def replace(self, start: int, end: int, text: str) -> None:
        """Put `text` in place of characters start..end and the cursor after it."""
        widget = self.widget
        if isinstance(widget, Input):
            widget.replace(text, start, end)
            widget.cursor_position = start + len(text)
            return
        assert isinstance(widget, TextArea)
        document = _document(widget)
        widget.replace(
            text, document.get_location_from_index(start), document.get_location_from_index(end)
        )
        widget.cursor_location = document.get_location_from_index(start + len(text))


class FileCompletion(OptionList):
    """The workspace's files matching the `@word` at the prompt's cursor."""

    can_focus = False
    DEFAULT_CSS = """
    FileCompletion {
        display: none;
        height: auto;
        max-height: 10;
        margin: 0 1;
        border: round $primary 40%;
        background: $surface;
        padding: 0 1;
    }
    FileCompletion.-open {
        display: block;
    }
    """
    KEYS: ClassVar[dict[str, str]] = {"down": "cursor_down", "up": "cursor_up"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.files: WorkspaceFiles | None = None
        self.resources: tuple[str, ...] = ()  # `SERVER:URI` of the MCP servers' resources
        self.prompt: PromptText | None = None
        self._span: tuple[int, int] | None = None  # the @word being completed
        self._dismissed: int | None = None  # the @ whose list Esc closed
        self._query: str | None = None

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def attach(self, prompt: Widget, root: str) -> None:
        """Complete in `prompt` over the files under `root` (the conversation's directory)."""
        self.prompt = PromptText(prompt)
        if self.files is None or self.files.root != root:
            self.files = WorkspaceFiles(root)
        self.watch(prompt, "selection", self._prompt_moved, init=False)

    # --- following the prompt -------------------------------------------------

    def _prompt_moved(self) -> None:
        if self.prompt is None or self.files is None:
            return
        text, cursor = self.prompt.text_and_cursor()
        found = mention_at(text, cursor)
        if found is None:
            self._dismissed = None
            self.close()
            return
        start, query = found
        if start == self._dismissed:
            return
        self._span = (start, cursor)
        if query != self._query or not self.is_open:
            self._query = query
            self._search(query)

    @work(thread=True, exclusive=True, group="file-completion")
    def _search(self, query: str) -> None:
        files = self.files
        assert files is not None
        if not files.paths() or files.stale:
            files.refresh()
        matches = fuzzy_filter(query, [*self.resources, *files.paths()], SHOWN)
        self.app.call_from_thread(self._show, query, matches, files.complete)

    def _show(self, query: str, matches: list[str], complete: bool) -> None:
        if query != self._query or self._span is None:
            return  # typed on meanwhile: a newer search follows
        self.clear_options()
        if not matches:
            self.add_option(Option(f"no file matches {query!r}", disabled=True))
        else:
            self.add_options([Option(path, id=path) for path in matches])
            self.highlighted = 0
        if not complete:
            self.add_option(Option("(the listing was cut: type more of the name)", disabled=True))
        self.add_class("-open")

    def close(self) -> None:
        self.remove_class("-open")
        self._span = None
        self._query = None

    # --- keys (the app forwards them while the list is open) ----------------------

    def take_key(self, key: str) -> bool:
        """Act on `key` if the list is open; False lets the key go on to the prompt."""
        if not self.is_open:
            return False
        if key == "escape":
            if self._span is not None:
                self._dismissed = self._span[0]
            self.close()
            return True
        if key == "enter" and self._complete_already():
            self.close()  # the path is typed out: Enter sends
            return False
        if key in ("tab", "enter"):
            return self.choose()
        action = self.KEYS.get(key)
        if action is None:
            return False
        getattr(self, f"action_{action}")()
        return True

    def _complete_already(self) -> bool:
        index = self.highlighted
        if index is None or self._query is None:
            return False
        return self.get_option_at_index(index).id == self._query

    def choose(self) -> bool:
        """Put the highlighted path in place of the @word; False when nothing is highlighted."""
        index = self.highlighted
        if index is None or self.prompt is None or self._span is None:
            return False
        option = self.get_option_at_index(index)
        if option.id is None:
            return False
        path = option.id
        mention = f'@"{path}" ' if " " in path else f"@{path} "
        start, end = self._span
        self.close()
        self.prompt.replace(start, end, mention)
        return True

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # a click: choose it
        self.highlighted = event.option_index
        self.choose()


def _document(widget: TextArea) -> Document:
    """The prompt's document: a plain `Document` (the prompt sets no language), which
    maps between offsets and (row, column) locations."""
    document = widget.document
    assert isinstance(document, Document)
    return document
