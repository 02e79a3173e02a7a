"""What the app's own keys and the approval line do: Shift+Tab (the next approval
mode), an approval answered or its rules proposed, a task row opened, Esc (interrupt,
or cancel a compaction), Ctrl+C twice (quit). A part of `tui.app.BastionApp` (a mixin,
as `tui.app_prompt` is), kept apart so the app reads in one sitting.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from textual import work
from textual.app import App
from textual.css.query import NoMatches

from runtime.model.errors import BastionError
from tui.widgets.prompt import PromptInput
from tui.widgets.status import StatusBar

if TYPE_CHECKING:
    from runtime import HarnessClient
    from runtime.model.records import SessionSettings
    from runtime.model.views import ConversationView
    from tui.widgets.approval import ApprovalPrompt
    from tui.widgets.command_panel import CommandOutput
    from tui.widgets.completion import FileCompletion
    from tui.widgets.entries import ToolCallLine

__all__ = ["QUIT_WINDOW", "KeyActions"]

QUIT_WINDOW = 2.0  # seconds in which a second Ctrl+C quits


class KeyActions(App[int]):
    """The keys' side of the app (see the module). What it uses of the rest of the app
    is declared here; `BastionApp` defines it."""

    harness: HarnessClient | None
    conversation_id: str
    view: ConversationView | None
    settings: SessionSettings | None
    parts_ready: asyncio.Event
    _mode_lock: asyncio.Lock
    _quit_armed: bool

    @property
    def approval(self) -> ApprovalPrompt:
        raise NotImplementedError  # (BastionApp's)

    @property
    def completion(self) -> FileCompletion:
        raise NotImplementedError  # (BastionApp's)

    @property
    def command_output(self) -> CommandOutput:
        raise NotImplementedError  # (BastionApp's)

    def use_settings(self, settings: SessionSettings) -> None:
        raise NotImplementedError  # (BastionApp's)

    async def jump_to_entry(self, entry_id: str) -> None:
        """The transcript at entry `entry_id` (/goto)."""
        from tui.widgets.transcript import Transcript

        transcript = self.query_one(Transcript)
        index = transcript.index_of(entry_id)
        if index is not None:
            await transcript.jump_to(index)

    async def on_prompt_input_jump(self, event: PromptInput.Jump) -> None:
        """Ctrl+Home / Ctrl+End: the transcript's first turn, or its last (following)."""
        from tui.widgets.transcript import Transcript

        transcript = self.query_one(Transcript)
        await (transcript.jump_home() if event.where == "home" else transcript.jump_end())

    def _disarm_quit(self) -> None:
        raise NotImplementedError  # (BastionApp's)

    @work(group="mode", exclusive=False)
    async def action_cycle_mode(self) -> None:
        """Shift+Tab: the next approval mode, shown on the status line; the prompt keeps
        its focus and its draft."""
        async with self._mode_lock:  # presses in quick succession step one mode each
            if self.harness is None or self.settings is None:
                return  # (still opening)
            from tui.slash import MODES as modes

            current = self.settings.approval_mode if self.settings else ""
            at = modes.index(current) if current in modes else -1
            try:
                settings = await self.harness.set_approval_mode(
                    self.conversation_id, modes[(at + 1) % len(modes)]
                )
            except BastionError as exc:
                self.notify(str(exc), title="approval mode", severity="error")
                return
            self.use_settings(settings)

    def on_tool_call_line_open_subagent(self, event: ToolCallLine.OpenSubagent) -> None:
        """A task row: its subagent's transcript, live, on a screen of its own."""
        from tui.subagent import SubagentScreen

        if self.harness is None:
            return
        self.push_screen(SubagentScreen(self.harness, event.conversation_id, event.label))

    def on_approval_prompt_answered(self, event: ApprovalPrompt.Answered) -> None:
        self.query_one(PromptInput).focus()
        self.run_worker(self._respond(event), group="input")

    async def _respond(self, answer: ApprovalPrompt.Answered) -> None:
        assert self.harness is not None
        try:
            saved = await self.harness.respond(
                self.conversation_id,
                answer.tool_call_id,
                answer.approve,
                always=answer.always,
                message=answer.message,
                sandbox=answer.sandbox,
            )
        except BastionError as exc:
            self.notify(str(exc), title="approval", severity="error")
            return
        if saved:
            where = "this session" if answer.always == "session" else ".bastion/settings.toml"
            names = ", ".join(rule.describe() for rule in saved)
            self.notify(f"saved to {where}: {names}", title="always allowed")

    def on_approval_prompt_shown(self, event: ApprovalPrompt.Shown) -> None:
        self.run_worker(self._propose(event.tool_call_id), group="rules")

    async def _propose(self, tool_call_id: str) -> None:
        """Ask the runtime which rules `a` would save, and show them in the prompt."""
        assert self.harness is not None
        try:
            rules = await self.harness.proposed_rules(self.conversation_id, tool_call_id)
        except BastionError as exc:
            self.notify(str(exc), title="approval", severity="error")
            return
        with contextlib.suppress(NoMatches):  # (the app closed meanwhile: nothing to show)
            self.approval.set_rules(tool_call_id, rules)

    def action_interrupt(self) -> None:
        from tui.subagent import SubagentScreen

        if isinstance(self.screen, SubagentScreen):  # Esc there is that subagent's
            self.screen.escape_pressed()
            return
        if self.parts_ready.is_set() and (
            self.completion.take_key("escape") or self.approval.back()
        ):
            return  # Esc closes the @file list, or leaves an approval's scope or message
        view = self.view
        if self.harness is not None and view is not None and view.active_run is not None:
            compacting = view.compacting.get(view.active_run.id)
            if compacting is not None and not compacting.background:  # the summary, not the run
                self.run_worker(self._cancel_compaction(), group="input")
            else:
                self.run_worker(self._interrupt(), group="input")
        elif self.parts_ready.is_set():
            self.command_output.close()

    async def _cancel_compaction(self) -> None:
        assert self.harness is not None
        try:
            cancelled = await self.harness.cancel_compaction(self.conversation_id)
        except BastionError as exc:  # (a session followed through the store: DrivenElsewhere)
            self.notify(str(exc), title="compaction", severity="error")
            return
        if cancelled:
            self.notify("the run goes on uncompacted", title="compaction cancelled")

    async def _interrupt(self) -> None:
        """Interrupt the run; queued steers and follow-ups come back to the prompt."""
        assert self.harness is not None
        done = await self.harness.interrupt(self.conversation_id)
        if done.withdrawn:
            prompt = self.query_one(PromptInput)
            from runtime import split_attachments

            texts = [split_attachments(item.text)[0] for item in done.withdrawn]
            if prompt.text.strip():
                texts.append(prompt.text)
            prompt.set_value("\n".join(texts))

    def _copy_selection(self) -> bool:
        """Ctrl+C with text selected (dragged with the mouse over the transcript, or
        marked in the prompt) copies it, through OSC 52 as /copy does, instead of
        arming the quit; False when nothing is selected."""
        text = self.screen.get_selected_text()
        if text:
            self.screen.clear_selection()
        else:
            prompt = self.query(PromptInput)
            text = prompt.first().selected_text if prompt and prompt.first().has_focus else ""
        if not text:
            return False
        self.copy_to_clipboard(text)
        lines = text.count("\n") + 1
        what = f"{len(text):,} characters" + (f" ({lines} lines)" if lines > 1 else "")
        self.query_one(StatusBar).notice(f"copied {what}")
        return True

    async def action_quit_twice(self) -> None:
        """First press warns; a second within QUIT_WINDOW interrupts any run and quits.
        With text selected, it copies that instead (`_copy_selection`).

        Quitting on purpose ends the run as interrupted (committed), so the next
        `bastion -c` does not pick it up again; a crash, by contrast, leaves it to resume.
        """
        if self._copy_selection():
            self._quit_armed = False
            return
        if self._quit_armed:
            # attached to another process's session, leaving: the session goes on
            attached = self.harness is not None and self.harness.guest
            if (
                self.harness is not None
                and self.view is not None
                and self.view.active_run
                and not attached
            ):
                await self.harness.interrupt(self.conversation_id)
            self.exit(0)
            return
        self._quit_armed = True
        self.query_one(StatusBar).notice("[b $warning]press Ctrl+C again to quit[/]")
        self.set_timer(QUIT_WINDOW, self._disarm_quit)
