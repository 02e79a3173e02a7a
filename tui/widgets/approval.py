"""The approval prompt, answered from the keyboard.

    Allow edit_file src/config.py?
    --- a/src/config.py                          (a write's or edit's diff, coloured)
    +++ b/src/config.py
    ...
    a saves: edits under src/
    [y] once  [a] always  [n] deny  [e] deny with a message

A command (`run_command`) also offers `o` (run it outside the sandbox, this once)
and `w` (this once with the network allowed). `a` then asks where the rule goes ([s] this session, [p] the project's
`.bastion/settings.toml`, [c] back); `e` opens a line for the message the model
is told. It shows the first pending approval of the view (approvals are
committed records, so this is just a reading of the store) and posts `Answered`;
the app commits the decision through `Harness.respond`. The rule shown is the
runtime's proposal (`Harness.proposed_rules`), the one `a` saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.widgets import Input, Static

from runtime import ConversationView, Rule
from runtime.model.records import Approval, ToolCallRecord, ToolCallState
from runtime.model.views import background_note, call_summary, child_label
from tui.diffs import call_diff
from tui.markup import escape
from tui.widgets.review import diff_markup

__all__ = ["ApprovalPrompt", "pending_approval"]

PROMPT_DIFF_LINES = 200  # the prompt scrolls; the diff kept with the call is bounded too

KEYS_ASK = (
    "[b $warning]\\[y][/] once  [b $warning]\\[a][/] always  "
    "[b $warning]\\[n][/] deny  [b $warning]\\[e][/] deny with a message"
)
KEYS_ONCE = (
    "[b $warning]\\[y][/] once  [b $warning]\\[n][/] deny  [b $warning]\\[e][/] deny with a message"
)
KEYS_SANDBOX = (
    "  [b $warning]\\[o][/] outside the sandbox once  [b $warning]\\[w][/] with network once"
)
SANDBOX_TOOLS = frozenset({"run_command"})
KEYS_SCOPE = (
    "save for [b $warning]\\[s][/] this session  [b $warning]\\[p][/] the project "
    "(.bastion/settings.toml)  [b $warning]\\[c][/] or [b $warning]esc[/] back"
)
KEYS_MESSAGE = (
    "[$foreground-muted]Enter denies and tells the model this; an empty line denies; "
    "esc goes back[/]"
)


def pending_approval(view: ConversationView) -> ToolCallRecord | None:
    """The first tool call waiting for the user's decision, if any."""
    for call in view.tool_calls:
        if call.approval == Approval.PENDING and call.state == ToolCallState.PENDING:
            return call
    return view.child_calls[0] if view.child_calls else None  # a subagent's, named


def describe_call(call: ToolCallRecord) -> str:
    """What the call would do, in a few words: the command, the path, else its arguments."""
    return call_summary(call.name, call.arguments)


class ApprovalPrompt(Vertical, can_focus=True):
    """Asks for a decision. Focused while shown, so its keys reach it."""

    DEFAULT_CSS = """
    ApprovalPrompt {
        height: auto;
        max-height: 60%;
        padding: 0 1;
        border-left: outer $warning;
        background: $warning 12%;
        color: $foreground;
        display: none;
    }
    ApprovalPrompt.-shown {
        display: block;
    }
    ApprovalPrompt #approval-question {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    ApprovalPrompt #approval-diff {
        height: auto;
        max-height: 16;
        display: none;
    }
    ApprovalPrompt #approval-diff.-shown {
        display: block;
    }
    ApprovalPrompt #approval-diff Static {
        text-wrap: nowrap;
    }
    ApprovalPrompt #approval-rule {
        display: none;
    }
    ApprovalPrompt #approval-rule.-shown {
        display: block;
    }
    ApprovalPrompt #approval-message {
        display: none;
        height: 1;
        border: none;
        padding: 0;
        background: $warning 6%;
    }
    ApprovalPrompt.-message #approval-message {
        display: block;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('once')", "Allow once", show=False),
        Binding("a", "answer('always')", "Always allow", show=False),
        Binding("n", "answer('deny')", "Deny", show=False),
        Binding("e", "answer('message')", "Deny with a message", show=False),
        Binding("o", "answer('outside')", "Outside the sandbox once", show=False),
        Binding("w", "answer('network')", "With network once", show=False),
        Binding("s", "scope('session')", "This session", show=False),
        Binding("p", "scope('project')", "The project", show=False),
        Binding("c", "scope('')", "Back", show=False),
    ]

    shown: var[bool] = var(False, toggle_class="-shown")

    @dataclass
    class Answered(Message):
        tool_call_id: str
        approve: bool
        always: str | None = None  # "session" | "project": save the rules shown
        message: str | None = None  # with a denial: what the model is told
        sandbox: str | None = None  # "outside" | "network": this command, once

    @dataclass
    class Shown(Message):
        """A new call is asking: the app fetches the rules `a` would save."""

        tool_call_id: str

    def __init__(self) -> None:
        super().__init__()
        self.call: ToolCallRecord | None = None
        self.rules: tuple[Rule, ...] = ()
        self.mode = "ask"  # ask | scope (after a) | message (after e)
        self._answered: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static(id="approval-question")
        with VerticalScroll(id="approval-diff"):
            yield Static(id="approval-diff-text")
        yield Static(id="approval-rule")
        yield Static(KEYS_ONCE, id="approval-keys")
        yield Input(placeholder="tell the model why…", id="approval-message")

    @property
    def question(self) -> str:
        """The question, the rule and the keys, as plain text (what the prompt says)."""
        parts = [self.query_one("#approval-question", Static).render()]
        rule = self.query_one("#approval-rule", Static)
        if rule.has_class("-shown"):
            parts.append(rule.render())
        parts.append(self.query_one("#approval-keys", Static).render())
        return "  ".join(str(p) for p in parts)

    def show(self, view: ConversationView) -> bool:
        """Show the first pending approval (or hide); true if the call shown changed."""
        call = pending_approval(view)
        if call is not None and call.id in self._answered:
            call = None  # answered; waiting for the decision's event
        changed = (call.id if call else None) != (self.call.id if self.call else None)
        self.call = call
        if changed and call is not None:
            self._draw(call, child_label(view, call))
            self.post_message(self.Shown(call.id))
        self.shown = call is not None
        return changed

    def _draw(self, call: ToolCallRecord, child: str = "") -> None:
        self.rules = ()
        self.mode = "ask"
        self.remove_class("-message")
        what = escape(describe_call(call))
        who = f"[b]subagent {escape(child)}[/b] asks: " if child else ""
        # (first, where the line's ellipsis cannot cut it off)
        keeps = "[b $warning](in the background: it keeps running)[/] " if background_note(
            call.name, call.arguments
        ) else ""  # fmt: skip
        self.query_one("#approval-question", Static).update(
            f"{who}[b $warning]Allow[/] [b]{escape(call.name)}[/b] {keeps}{what}[b $warning]?[/]"
        )
        diff, note = call_diff(call)
        box = self.query_one("#approval-diff", VerticalScroll)
        box.set_class(bool(diff or note), "-shown")
        self.query_one("#approval-diff-text", Static).update(
            diff_markup(diff, note, PROMPT_DIFF_LINES)
        )
        box.scroll_home(animate=False)
        self._draw_rules()

    def set_rules(self, tool_call_id: str, rules: Sequence[Rule]) -> None:
        """The rules `a` would save for the call shown (from `Harness.proposed_rules`)."""
        if self.call is not None and self.call.id == tool_call_id:
            self.rules = tuple(rules)
            self._draw_rules()

    def _draw_rules(self) -> None:
        line = self.query_one("#approval-rule", Static)
        names = ", ".join(r.describe() for r in self.rules)
        line.update(f"[$foreground-muted]a saves:[/] [b]{escape(names)}[/]" if names else "")
        line.set_class(bool(self.rules), "-shown")
        ask = KEYS_ASK if self.rules else KEYS_ONCE
        if self.call is not None and self.call.name in SANDBOX_TOOLS:
            ask += KEYS_SANDBOX
        keys = {"ask": ask, "scope": KEYS_SCOPE}
        self.query_one("#approval-keys", Static).update(keys.get(self.mode, KEYS_MESSAGE))

    def _set_mode(self, mode: str) -> None:
        self.mode = mode
        self.set_class(mode == "message", "-message")
        self._draw_rules()

    def action_answer(self, how: str) -> None:
        if self.call is None or self.mode != "ask":
            return
        if how == "always":
            if self.rules:
                self._set_mode("scope")
            return
        if how == "message":
            self._set_mode("message")
            field = self.query_one("#approval-message", Input)
            field.value = ""
            field.focus()
            return
        if how in ("outside", "network"):
            if self.call.name in SANDBOX_TOOLS:
                self._post(True, sandbox=how)
            return
        self._post(how == "once")

    def action_scope(self, scope: str) -> None:
        if self.call is None or self.mode != "scope":
            return
        if not scope:
            self._set_mode("ask")
            return
        self._post(True, always=scope)

    def back(self) -> bool:
        """Esc: from the scope choice or the message line back to the question (true),
        else nothing to go back from (false: Esc then interrupts the run)."""
        if self.call is None or self.mode == "ask":
            return False
        self._set_mode("ask")
        self.focus()
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # the message is the prompt's, never a new request
        if self.call is not None and self.mode == "message":
            self._post(False, message=event.value.strip() or None)

    def _post(
        self,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
        sandbox: str | None = None,
    ) -> None:
        assert self.call is not None
        self._answered.add(self.call.id)
        self.post_message(self.Answered(self.call.id, approve, always, message, sandbox))
        self.call = None
        self.mode = "ask"
        self.remove_class("-message")
        self.shown = False
