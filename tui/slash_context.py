"""The commands that decide what the model's context holds from here on, for every
front end that has slash commands (the app, `--plain`): `/supersede`, `/urgent` and
`/reset` (the harness's `supersede`, a submit of mode `interrupt_next`, `reset`).
Each says in one line what it did, or why nothing changed. `tui.slash` lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.model.errors import BastionError
from tui.markup import escape

if TYPE_CHECKING:
    from runtime import HarnessClient

__all__ = ["reset", "supersede", "urgent"]


def _harness(host: Any) -> HarnessClient | None:
    if host.harness is None:
        host.say("the session is still opening: try the command again in a moment", error=True)
    return host.harness  # type: ignore[no-any-return]


async def _expanded(host: Any, text: str) -> str:
    """`text` with its @mentions attached, as a typed prompt is."""
    from runtime import expand_prompt

    cwd = host.view.conversation.cwd if host.view is not None else "."
    return (await expand_prompt(text, cwd, host.harness)).text


async def supersede(host: Any, arg: str) -> None:
    """`/supersede [MESSAGE]`: end the run; its unfinished answer and work leave the
    model's context (the transcript keeps them, marked); MESSAGE, if any, runs next."""
    from runtime import split_attachments

    harness = _harness(host)
    if harness is None:
        return
    try:
        text = await _expanded(host, arg) if arg.strip() else None
        done = await harness.supersede(host.conversation_id, text)
    except BastionError as exc:
        host.say(escape(str(exc)), error=True)
        return
    if done.withdrawn:  # queued input comes back to the prompt, as with Esc
        host.set_draft("\n".join(split_attachments(i.text)[0] for i in done.withdrawn))
    then = "; your message runs next" if text else ""
    host.say(
        "superseded: the unfinished answer and its work are left out of the model's "
        f"context (the transcript keeps them){then}"
    )


async def urgent(host: Any, arg: str) -> None:
    """`/urgent MESSAGE`: the run going stops at its next safe point (after the tool
    calls of its step; never mid-call) and MESSAGE runs next, before queued input."""
    from runtime.model.records import InboxMode, InboxState

    harness = _harness(host)
    if harness is None:
        return
    if not arg.strip():
        host.say("usage: /urgent MESSAGE  (runs next, before queued input)", error=True)
        return
    try:
        text = await _expanded(host, arg)
        item = await harness.submit(host.conversation_id, text, mode=InboxMode.INTERRUPT_NEXT)
    except BastionError as exc:
        host.say(escape(str(exc)), error=True)
        return
    if item.state == InboxState.PLACED:
        host.say("sent: nothing was running, so it runs now")
    else:
        host.say(
            "urgent: the run stops after its current step (a tool call going ends first) "
            "and this runs next; queued input waits"
        )


async def reset(host: Any, arg: str) -> None:
    """`/reset [INSTRUCTIONS]`: the model writes a handoff note; a new context in this
    session starts from it (the old one stays in the record)."""
    harness = _harness(host)
    if harness is None:
        return
    try:
        entry = await harness.reset(host.conversation_id, arg.strip() or None)
    except BastionError as exc:
        host.say(escape(str(exc)), error=True)
        return
    words = len(entry.text.split())
    host.say(
        f"reset: a new context starts from the model's handoff note ({words} words); "
        "the earlier conversation stays in the transcript, not in the model's context"
    )
