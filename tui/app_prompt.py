"""What the app does with what is typed in its prompt: a prompt, a steer or a follow-up
sent, a `/command` run, interrupt-and-redirect, the queued input pulled back, the
command hints' keys, the editor (Ctrl+G) and a pasted image (Ctrl+V). A part of
`tui.app.BastionApp` (a mixin, as the Harness is put together from its parts), kept
apart so the app reads in one sitting.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from textual.app import App

from runtime.model.errors import BastionError, EmptyInput
from tui.markup import escape
from tui.pacing import MAX_HOLD
from tui.widgets.prompt import PromptInput

if TYPE_CHECKING:
    from runtime import HarnessClient
    from runtime.model.views import ConversationView
    from tui import slash
    from tui.parking import Parking
    from tui.widgets.command_panel import CommandHints, CommandOutput

__all__ = ["PromptActions"]


class PromptActions(App[int]):
    """The prompt's side of the app (see the module). What it uses of the rest of the
    app is declared here; `BastionApp` defines it."""

    harness: HarnessClient | None
    parking: Parking | None
    conversation_id: str
    view: ConversationView | None
    kept_draft: str | None
    typed_at: float
    ready: asyncio.Event
    parts_ready: asyncio.Event

    @property
    def command_output(self) -> CommandOutput:
        raise NotImplementedError  # (BastionApp's)

    @property
    def hints(self) -> CommandHints:
        raise NotImplementedError  # (BastionApp's)

    def say(self, markup: str, *, error: bool = False) -> None:
        raise NotImplementedError  # (BastionApp's)

    def set_draft(self, text: str) -> None:
        raise NotImplementedError  # (BastionApp's)

    def run_slash(self, command: slash.SlashCommand, arg: str) -> Any:
        raise NotImplementedError  # (BastionApp's)

    def _offer_commands(self, text: str) -> None:
        raise NotImplementedError  # (BastionApp's)

    async def send_prompt(self, text: str) -> None:
        """A command file's prompt, sent as if typed (runtime.setup.commands)."""
        await self.send(text)

    async def send(self, text: str, *, follow_up: bool = False, redirect: bool = False) -> None:
        """Submit `text`: a new run when idle, a steer while a run is going; a follow-up
        (the next run once this one answers) when asked for; with `redirect`, the run's
        current step is cut and `text` is the next prompt (Harness.redirect)."""
        await self.ready.wait()  # sent before the session opened: it goes once it has
        assert self.view is not None
        from tui.widgets.transcript import Transcript

        transcript = self.query_one(Transcript)
        if not transcript.following:  # sent from up the transcript: back to its end
            await transcript.jump_end()
        if redirect and self.view.active_run is not None and self.harness is not None:
            await self._redirect(text)
            return
        await self._submit(text, self.view, follow_up=follow_up)

    async def _redirect(self, text: str) -> None:
        """Interrupt and redirect in one action; queued inputs come back to the prompt,
        as with Esc."""
        from runtime import expand_prompt, split_attachments

        assert self.harness is not None and self.view is not None
        expansion = await expand_prompt(text, self.view.conversation.cwd, self.harness)
        try:
            cut = await self.harness.redirect(self.conversation_id, expansion.text)
        except BastionError as exc:
            self.notify(str(exc), title="not sent", severity="error")
            return
        if cut.withdrawn:
            prompt = self.query_one(PromptInput)
            texts = [split_attachments(item.text)[0] for item in cut.withdrawn]
            if prompt.text.strip():
                texts.append(prompt.text)
            prompt.set_value("\n".join(texts))

    async def _submit(self, text: str, view: ConversationView, *, follow_up: bool = False) -> None:
        """`send` with `view` the session as last seen."""
        from runtime import expand_prompt
        from runtime.model.records import InboxMode

        assert self.harness is not None
        mode = InboxMode.STEER if view.active_run is not None else InboxMode.PROMPT
        typed = text
        if text.strip():  # @path and @SERVER:URI mentions become attachments
            expansion = await expand_prompt(text, view.conversation.cwd, self.harness)
            text = expansion.text
        try:
            await self.harness.submit(
                self.conversation_id, text, mode=InboxMode.FOLLOW_UP if follow_up else mode
            )
        except EmptyInput:
            pass
        except BastionError as exc:
            self.notify(str(exc), title="not sent", severity="error")
            self._give_back(typed)

    def _give_back(self, typed: str) -> None:
        """What the user typed, back in the prompt when it was not sent (before anything
        typed since): the prompt was emptied as it was sent, and a toast goes."""
        prompt = self.query_one(PromptInput)
        prompt.set_value("\n".join(t for t in (typed, prompt.text) if t.strip()))

    def _sent(self) -> list[str]:
        """What the user sent in this conversation, oldest first (the prompt's history)."""
        if self.view is None:
            return []
        from runtime import split_attachments
        from runtime.model.records import EntryKind

        return [
            split_attachments(e.text)[0]
            for e in self.view.settled
            if e.kind == EntryKind.USER and not e.data.get("from_agent")
        ]

    def on_prompt_input_sent(self, event: PromptInput.Sent) -> None:
        from tui import slash

        self.typed_at = -MAX_HOLD  # sent: the user has stopped typing (see `hold`)
        text, kept, self.kept_draft = event.text, self.kept_draft, None
        typed = slash.after_draft(text, kept)
        try:
            command = slash.parse(typed or text)
        except slash.UnknownCommand as exc:
            self.say(f"{escape(exc.message)}  [$foreground-muted]{exc.hint}[/]", error=True)
            if typed is not None:  # the draft comes back as it was
                event.prompt.set_value(kept or "")
                self.kept_draft = kept
            else:
                self.kept_draft = text  # it stays, to fix
            return
        event.prompt.clear()
        event.prompt.forget_position()
        if self.parts_ready.is_set():
            self.command_output.close()
        if command is not None:
            if typed is not None and kept is not None and not slash.is_command(kept):
                self.set_draft(kept)  # /rewind's message stays in the prompt to edit
            self.run_slash(*command)
            return
        if text.startswith("//"):
            text = text[1:]
        self.run_worker(
            self.send(text, follow_up=event.follow_up, redirect=event.redirect), group="input"
        )

    def on_text_area_changed(self, event: PromptInput.Changed) -> None:
        if isinstance(event.text_area, PromptInput):
            if self.parking is not None:  # (typing starts a parked harness: tui.parking)
                self.parking.wake_soon()
            self._offer_commands(event.text_area.text)

    def on_prompt_input_edit_externally(self, event: PromptInput.EditExternally) -> None:
        """Ctrl+G: the prompt's text in $VISUAL / $EDITOR (tui.editor); back in the prompt."""
        from tui.editor import EditorFailed, edit

        try:
            text = edit(self, event.prompt.text)
        except EditorFailed as exc:
            self.notify(str(exc), title="editor", severity="warning")
            return
        event.prompt.set_value(text)
        event.prompt.focus()

    async def on_prompt_input_paste_image(self, event: PromptInput.PasteImage) -> None:
        """Ctrl+V: the clipboard's image saved and named in the prompt as `@PATH`."""
        from runtime import default_home
        from tui.clipboard import ClipboardEmpty, paste_image

        try:
            path = await asyncio.to_thread(paste_image, default_home())
        except ClipboardEmpty as exc:
            self.notify(str(exc), title="paste an image", severity="warning")
            return
        row, column = event.prompt.cursor_location
        before = event.prompt.document.get_line(row)[:column]
        # A mention only counts after whitespace (runtime.context.mentions): keep it apart
        # from a word the cursor is at the end of.
        space = " " if before and not before[-1].isspace() else ""
        event.prompt.insert(f"{space}@{path} ")

    def on_prompt_input_completion_key(self, event: PromptInput.CompletionKey) -> None:
        from tui import slash

        hints = self.hints
        chosen = hints.chosen
        if event.key in ("up", "down"):
            hints.move(-1 if event.key == "up" else 1)
        elif chosen is not None:
            if event.key == "enter" and slash.find(event.prompt.text.strip()[1:]):
                hints.offer([])  # a whole command name: Enter runs it as typed
                event.prompt.post_message(PromptInput.Sent(event.prompt, event.prompt.text, False))
                return
            event.prompt.set_value(f"/{chosen.name}" + (" " if chosen.args else ""))
            if event.key == "enter" and not chosen.args:
                event.prompt.post_message(PromptInput.Sent(event.prompt, event.prompt.text, False))

    def on_prompt_input_pull_queued(self, event: PromptInput.PullQueued) -> None:
        self.run_worker(self._pull_queued(event.prompt), group="input")

    async def _pull_queued(self, prompt: PromptInput) -> None:
        """The newest queued item back into the prompt, withdrawn from the queue."""
        assert self.harness is not None
        queued = self.view.queued_inbox if self.view else ()
        if not queued:
            return
        item = queued[-1]
        if await self.harness.withdraw(self.conversation_id, item.id):
            if not prompt.text:
                prompt.set_value(item.text)
        else:
            self.notify("that message was already taken by the run", title="not withdrawn")
