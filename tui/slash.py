"""Slash commands: one registry for every front end's `/command`s (the app's prompt,
its completion and command palette, `tui.palette`; the line mode's prompt), with no
Textual here: `--plain` loads this without the app.

A line whose first word is `/name` (letters and dashes) is a command and never
goes to the model: a known one runs, an unknown one gets one message naming
`/help`. Text that only looks like a path (`/usr/bin is slow`) is sent as it
is, and `//text` sends `/text`.

Each command is an async function of a `CommandHost` (the app) and the rest of
the line. The host offers only what commands need; commands reach the runtime
through `host.harness`, its public methods only.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from runtime import visible_json
from runtime.model.errors import BastionError, DrivenElsewhere
from runtime.model.records import Entry, EntryKind
from tui import slash_context, slash_mcp
from tui.markup import escape
from tui.slash_agents import agents
from tui.usage import summary_label, totals_label

if TYPE_CHECKING:  # the harness's modules load after the first frame (see tui.launch)
    from runtime import HarnessClient, JobRecord
    from runtime.model.records import SessionSettings
    from runtime.model.views import ConversationView

__all__ = [
    "COMMANDS",
    "CommandHost",
    "SlashCommand",
    "UnknownCommand",
    "completions",
    "find",
    "parse",
]

MODES = ("read-only", "ask", "auto-edit", "full-auto", "plan")  # Shift+Tab's order
_COMMAND = re.compile(r"/([a-z][A-Za-z0-9_.-]*)(?:\s+(.*))?", re.DOTALL)


FRONT_ENDS = frozenset({"app", "plain"})
#: What works in `bastion attach` (a follower of a session another process drives):
#: everything else acts on the driving process's harness, so it says where to run it.


class CommandHost(Protocol):
    """What a command may use of its front end (the app, or the line mode)."""

    theme: str
    pending_restore: Any

    @property
    def front_end(self) -> str:
        """ "app" or "plain": a command runs only where its `fronts` say."""

    @property
    def harness(self) -> HarnessClient | None: ...

    @property
    def conversation_id(self) -> str: ...

    @property
    def view(self) -> ConversationView | None: ...

    @property
    def settings(self) -> SessionSettings | None: ...

    @property
    def available_themes(self) -> dict[str, Any]: ...

    def say(self, markup: str, *, error: bool = False) -> None: ...

    def use_settings(self, settings: SessionSettings) -> None: ...

    async def new_session(self) -> None: ...

    async def pick_session(self) -> str | None: ...

    async def resume_session(self, conversation_id: str) -> None: ...

    def set_draft(self, text: str) -> None: ...

    def copy_to_clipboard(self, text: str) -> None: ...

    async def send_prompt(self, text: str) -> None:
        """Send `text` as if typed (a command file's prompt)."""

    def exit(self, result: int | None = None) -> None: ...


Run = Callable[[CommandHost, str], Awaitable[None]]


class SlashCommand(msgspec.Struct, frozen=True):
    name: str
    summary: str
    run: Run
    args: str = ""
    aliases: tuple[str, ...] = ()
    fronts: frozenset[str] = FRONT_ENDS  # the front ends it works in

    @property
    def usage(self) -> str:
        return f"/{self.name}" + (f" {self.args}" if self.args else "")

    async def run_in(self, host: CommandHost, arg: str) -> None:
        """Run it, or say in one line that it needs the app."""
        if host.front_end not in self.fronts:
            host.say(f"/{self.name} needs the app: run `bastion` without --plain", error=True)
        else:
            try:
                await self.run(host, arg)
            except (NotOpenYet, DrivenElsewhere) as exc:  # (DrivenElsewhere: attach follows
                host.say(str(exc), error=True)  # the session through the store; it acts there)


class NotOpenYet(BastionError):
    code = "not_open"


def _harness(host: CommandHost) -> HarnessClient:
    """The host's harness; NotOpenYet while the app is still opening the session."""
    harness = host.harness
    if harness is None:
        raise NotOpenYet("the session is still opening", hint="try the command again in a moment")
    return harness


class UnknownCommand(BastionError):
    code = "usage"


def parse(text: str) -> tuple[SlashCommand, str] | None:
    """The command `text` names and its argument; None if `text` is not a command.
    UnknownCommand for `/name` that names none."""
    stripped = text.strip()
    match = _COMMAND.fullmatch(stripped)
    if match is None:
        return None
    command = find(match.group(1))
    if command is None:
        raise UnknownCommand(
            f"unknown command /{match.group(1)}",
            hint="/help lists the commands; //text sends /text",
        )
    return command, (match.group(2) or "").strip()


def is_command(text: str) -> bool:
    """Whether `text` has the form of a `/command` line (known or not)."""
    return _COMMAND.fullmatch(text.strip()) is not None


def after_draft(text: str, kept: str | None) -> str | None:
    """The command typed after a draft a command left in the prompt (the message /rewind
    hands back, an unknown command kept to fix): `text` is `kept` with a `/command`
    typed after it. None when it is not (the text is sent, or parsed, as it is)."""
    if not kept or not text.startswith(kept) or text == kept:
        return None
    typed = text[len(kept) :].strip()
    return typed if _COMMAND.fullmatch(typed) else None


#: The user's and a trusted project's command files (runtime.setup.commands), as
#: commands: installed once by the front end that runs (`install_files`).
FILE_COMMANDS: list[SlashCommand] = []


def install_files(files: Sequence[Any]) -> list[str]:
    """Make each command file a `/name` command; one note per file whose name a built-in
    command has (the built-in wins). Returns the notes."""
    notes = []
    FILE_COMMANDS.clear()
    slash_mcp.remember(())  # (a new session's servers: listed once they have started)
    for file in files:
        if find(file.name) is not None:
            notes.append(f"{file.path}: ignored: /{file.name} is a built-in command")
            continue
        summary = file.description or f"the prompt in {file.source} {file.name}.md"
        FILE_COMMANDS.append(
            SlashCommand(file.name, summary, _file_command(file), file.argument_hint)
        )
    return notes


def _file_command(file: Any) -> Run:
    async def run(host: CommandHost, arg: str) -> None:
        from runtime import expand_command

        await host.send_prompt(expand_command(file, arg))

    return run


def find(name: str) -> SlashCommand | None:
    for command in (*COMMANDS, *FILE_COMMANDS):
        if name == command.name or name in command.aliases:
            return command
    named = slash_mcp.split_name(name)
    if named is not None:  # an MCP server's prompt (tui.slash_mcp)
        return _prompt_command(name, *named)
    return None


def _prompt_command(name: str, server: str, prompt: str) -> SlashCommand:
    known = next((p for p in slash_mcp.known() if p.command == name), None)
    summary = (known.description if known else "") or f"the prompt {prompt} of MCP server {server}"
    args = " ".join(f"<{a}>" if known and a in known.required else f"[{a}]"
                    for a in (known.arguments if known else ()))  # fmt: skip

    async def run(host: CommandHost, arg: str) -> None:
        _harness(host)
        await slash_mcp.run_prompt(host, server, prompt, arg)

    return SlashCommand(name, summary, run, args)


def _mcp_commands() -> list[SlashCommand]:
    return [_prompt_command(p.command, p.server, p.name) for p in slash_mcp.known()]


def completions(text: str) -> list[SlashCommand]:
    """Commands whose name (or an alias) starts with what is typed after `/`; empty when
    `text` is not the start of a command word."""
    if not text.startswith("/") or text.startswith("//") or any(c.isspace() for c in text):
        return []
    typed = text[1:]
    every = (*COMMANDS, *FILE_COMMANDS, *_mcp_commands())
    return [c for c in every if any(n.startswith(typed) for n in (c.name, *c.aliases))]


def _cmd(name: str) -> str:
    return f"[b $accent]{name}[/]"


# --- the commands --------------------------------------------------------------


async def show_help(host: CommandHost, arg: str) -> None:
    width = max(len(c.usage) for c in (*COMMANDS, *FILE_COMMANDS, *_mcp_commands()))
    app = host.front_end == "app"
    about = "Tab completes; Ctrl+P searches them" if app else "//text sends /text"
    lines = [f"[b]commands[/]  [$foreground-muted]({about})[/]"]
    for c in COMMANDS:
        alias = f"  [$foreground-muted](also /{', /'.join(c.aliases)})[/]" if c.aliases else ""
        only = "" if host.front_end in c.fronts else "  [$foreground-muted](the app only)[/]"
        lines.append(f"  {_cmd(escape(c.usage.ljust(width)))}  {c.summary}{alias}{only}")
    if FILE_COMMANDS:
        lines.append("[b]your commands[/]  [$foreground-muted](command files)[/]")
        for c in FILE_COMMANDS:
            lines.append(f"  {_cmd(escape(c.usage.ljust(width)))}  {escape(c.summary)}")
    if slash_mcp.known():
        lines.append("[b]MCP prompts[/]  [$foreground-muted](sent as your message)[/]")
        for c in _mcp_commands():
            lines.append(f"  {_cmd(escape(c.usage.ljust(width)))}  {escape(c.summary)}")
    if app:  # lines each whole at 80 columns: never cut mid-phrase
        lines.append("[b]keys[/]  enter send · shift+enter/ctrl+j new line · tab follow-up")
        lines.append("\u00a0" * 6 + "shift+tab mode · esc interrupt · ctrl+c ctrl+c quit")
        lines.append("\u00a0" * 6 + "drag the mouse to select, then ctrl+c copies · /copy")
        lines.append("\u00a0" * 6 + "ctrl+s (ctrl+enter) cut the run's step, send this now")
        lines.append("\u00a0" * 6 + "ctrl+g edit in $VISUAL/$EDITOR · ctrl+v paste an image")
    else:
        lines.append(
            "[b]keys[/]  enter send · alt+enter/ctrl+j new line · ctrl+c interrupt · ctrl+d quit"
        )
        lines.append("\u00a0" * 6 + "ctrl+\\ supersede (a run going ends, its answer left out)")
    host.say("\n".join(lines))


async def model(host: CommandHost, arg: str) -> None:
    current = host.settings.model if host.settings else ""
    if not arg:
        host.say(
            f"model: {_cmd(escape(current or 'none'))}\n"
            f"switch with [b]/model PROVIDER/NAME[/]; providers: {', '.join(_providers(host))}"
        )
        return
    try:
        settings = await _harness(host).set_model(host.conversation_id, arg)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.use_settings(settings)
    host.say(f"model: {_cmd(escape(settings.model))} (from the next request on)")


async def effort(host: CommandHost, arg: str) -> None:
    """The conversation's reasoning effort (runtime.run.reasoning), for its next runs."""
    from runtime import EFFORTS

    current = host.view.conversation.agent.reasoning_effort if host.view else ""
    if not arg:
        choices = "|".join((*EFFORTS, "default"))
        host.say(
            f"reasoning effort: {_cmd(current or 'default')}\n"
            f"switch with [b]/effort {choices}[/] (models that reason: o-series, gpt-5, "
            "Claude's extended thinking)"
        )
        return
    try:
        value = await _harness(host).set_reasoning_effort(host.conversation_id, arg)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.say(f"reasoning effort: {_cmd(value or 'default')} (from the next run on)")


def _providers(host: CommandHost) -> list[str]:
    """The built-in providers and the [providers.NAME] tables of the config files."""
    from runtime import load_config

    builtin = ["openai", "anthropic", "ollama"]
    if host.view is None:
        return builtin
    try:
        configured = sorted(load_config(host.view.conversation.cwd).providers)
    except BastionError:
        configured = []  # a broken config is reported where it is read for a run
    return builtin + [escape(name) for name in configured if name not in builtin]


async def mode(host: CommandHost, arg: str) -> None:
    current = host.settings.approval_mode if host.settings else ""
    if not arg:
        listed = "  ".join(_cmd(m) if m == current else m for m in MODES)
        host.say(f"approval mode: {listed}\nswitch with [b]/mode MODE[/] or Shift+Tab")
        return
    try:
        settings = await _harness(host).set_approval_mode(host.conversation_id, arg)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.use_settings(settings)
    host.say(f"approval mode: {_cmd(settings.approval_mode)}")


APPROVED = "The plan is approved: carry it out, keeping the todo list current as you go."


async def approve(host: CommandHost, arg: str) -> None:
    """`/approve [MODE]`: in plan mode, approve the plan: leave plan mode (for `ask`, or
    MODE) and tell the model to carry the plan out."""
    current = host.settings.approval_mode if host.settings else ""
    if current != "plan":
        host.say("nothing to approve: /approve leaves plan mode (Shift+Tab or /mode plan "
                 "enters it)", error=True)  # fmt: skip
        return
    target = arg.strip() or "ask"
    if target not in MODES or target == "plan":
        host.say(f"approve into one of: {', '.join(m for m in MODES if m != 'plan')}", error=True)
        return
    harness = _harness(host)
    try:
        settings = await harness.set_approval_mode(host.conversation_id, target)
        host.use_settings(settings)
        await harness.submit(host.conversation_id, APPROVED)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.say(f"plan approved: approval mode {_cmd(target)}; the model carries it out")


async def new(host: CommandHost, arg: str) -> None:
    try:
        await host.new_session()
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)


async def resume(host: CommandHost, arg: str) -> None:
    """`/resume [ID]`: the session picker (or ID), then that conversation goes on here."""
    chosen = arg.strip() or await host.pick_session()
    if not chosen:
        return
    try:  # a full id, or any unique start of one
        await host.resume_session(await _harness(host).resolve_id(chosen))
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)


async def compact(host: CommandHost, arg: str) -> None:
    try:
        summary = await _harness(host).compact(host.conversation_id, arg or None)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    if summary is None:
        host.say("nothing to compact yet: no whole earlier turn to summarize")
        return
    host.say("compacted: the earlier conversation is summarized (every original is kept)")


async def export(host: CommandHost, arg: str) -> None:
    from runtime import export_markdown

    fmt = arg or "markdown"
    if fmt not in ("markdown", "json"):
        host.say(f"/export takes markdown or json, not {escape(fmt)!r}", error=True)
        return
    view = await _harness(host).snapshot(host.conversation_id)
    if not view.settled:
        host.say("nothing to export yet: send a prompt first")
        return
    suffix = "md" if fmt == "markdown" else "json"
    conv_id = view.conversation.id
    short = (await _harness(host).short_ids([conv_id]))[conv_id]  # unique among the sessions
    if fmt == "markdown":
        text = export_markdown(view)
    else:
        document = await _harness(host).export(host.conversation_id)  # with its ledger events
        text = visible_json(document, indent=2)
    try:
        path = write_new(Path(view.conversation.cwd), f"bastion-{short}", suffix, text + "\n")
    except OSError as exc:
        where = escape(f"{view.conversation.cwd}: {exc.strerror or exc}")
        host.say(f"cannot write the export in {where}", error=True)
        return
    host.say(f"exported to [b]{escape(str(path))}[/]")


def write_new(folder: Path, stem: str, suffix: str, text: str) -> Path:
    """Write `text` to `folder/stem.suffix`, or, when that exists, to the first of
    `stem-2.suffix`, `stem-3.suffix`, … that does not: an earlier file is never
    replaced (created exclusively, so a file made meanwhile is not either). Made 0600:
    a transcript is private, and the workspace may be shared (`tui.files`)."""
    from tui.files import write_private

    for n in range(1, 1000):
        path = folder / (f"{stem}.{suffix}" if n == 1 else f"{stem}-{n}.{suffix}")
        try:
            write_private(path, text, exclusive=True)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{stem}-999.{suffix} and every name before it exist")


async def theme(host: CommandHost, arg: str) -> None:
    names = sorted(host.available_themes)
    if not arg:
        listed = "  ".join(_cmd(n) if n == host.theme else n for n in names)
        host.say(f"themes: {listed}\nswitch with [b]/theme NAME[/]")
        return
    if arg not in host.available_themes:
        host.say(f"unknown theme {escape(arg)!r}; known: {', '.join(names)}", error=True)
        return
    host.theme = arg
    host.say(f"theme: {_cmd(escape(arg))}")


async def cost(host: CommandHost, arg: str) -> None:
    """`/cost`: the session's tokens and cost (its subagents' too), and the parts:
    this conversation and its runs (the newest SHOWN_RUNS), each subagent, each model."""
    view = host.view
    runs = len(view.runs) if view else 0
    if view is None or not runs:
        host.say("no usage yet: nothing has been sent in this conversation")
        return
    try:
        summary = await _harness(host).usage(host.conversation_id)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    lines = [f"this session: {summary_label(summary.total)}",
             f"  this conversation: {totals_label(view, long=True)} over {runs} run(s)"]  # fmt: skip
    per_run = list(summary.per_run.values())
    first = max(0, len(per_run) - SHOWN_RUNS)
    if first:
        lines.append(f"    (runs 1-{first} not shown)")
    lines += [f"    run {i}: {summary_label(t)}" for i, t in enumerate(per_run[first:], first + 1)]
    if summary.children:
        short = await _harness(host).short_ids(list(summary.children))
        for child_id, part in summary.children.items():
            lines.append(f"  subagent {short.get(child_id, child_id[:8])}: {summary_label(part)}")
    lines += [f"  {escape(m)}: {summary_label(t)}" for m, t in summary.per_model.items()]
    host.say("\n".join(lines))


SHOWN_RUNS = 10  # /cost's runs, the newest


_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)


async def copy(host: CommandHost, arg: str) -> None:
    """`/copy`: the last answer to the clipboard (OSC 52: over SSH and in tmux too);
    `/copy N`: its Nth code block."""
    view = host.view
    answers = [e for e in view.settled if e.kind == EntryKind.ASSISTANT] if view else []
    text = str(view.text_of(answers[-1])) if view is not None and answers else ""
    if not text.strip():
        host.say("nothing to copy yet: no answer in this conversation")
        return
    what = "the last answer"
    if arg.strip():
        blocks = [m.group(2) for m in _FENCE.finditer(text)]
        if not arg.strip().isdigit() or not 1 <= int(arg) <= len(blocks):
            count = f"{len(blocks)} code block{'s' if len(blocks) != 1 else ''}"
            host.say(f"the last answer has {count}: /copy 1 to /copy {len(blocks)}"
                     if blocks else "the last answer has no code block: /copy copies it all",
                     error=True)  # fmt: skip
            return
        text, what = blocks[int(arg) - 1], f"code block {int(arg)} of the last answer"
    host.copy_to_clipboard(text)
    host.say(f"copied {what} ({len(text):,} characters) to the clipboard")


def _yours(entry: Entry) -> bool:
    """A message you sent (not one a background agent sent its parent)."""
    return entry.kind == EntryKind.USER and not entry.data.get("from_agent")


async def goto(host: CommandHost, arg: str) -> None:
    """`/goto N`: the transcript at your Nth message (1 is the first; -1 the last)."""
    view = host.view
    asked = [e for e in view.settled if _yours(e)] if view else []
    text = arg.strip()
    if not asked or not text.lstrip("-").isdigit() or not 1 <= abs(int(text)) <= len(asked):
        host.say(f"/goto N with N from 1 to {len(asked)} (your messages; -1 is the last)"
                 if asked else "nothing to go to yet", error=True)  # fmt: skip
        return
    number = int(text) if int(text) > 0 else len(asked) + 1 + int(text)
    jump = getattr(host, "jump_to_entry", None)
    if jump is not None:
        await jump(asked[number - 1].id)
        host.say(f"message {number} of {len(asked)}: Ctrl+End goes back to the end")


async def fork(host: CommandHost, arg: str) -> None:
    """`/fork`: go on in a copy of this conversation (the original stays as it is)."""
    source = host.conversation_id
    try:
        copy = await _harness(host).fork(source)
        await host.resume_session(copy.id)
        short = await _harness(host).short_ids([copy.id, source])
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.say(f"forked: this is the copy [b]{short[copy.id]}[/]; [b]{short[source]}[/] is unchanged")


async def rewind(host: CommandHost, arg: str) -> None:
    """`/rewind` lists your messages; `/rewind N` goes back to just before message N: a
    fork without it, the message back in the prompt, and what /restore can undo."""
    view = host.view
    asked = [e for e in view.settled if _yours(e)] if view else []
    if not asked:
        host.say("nothing to rewind to yet")
        return
    if not arg.strip():
        rows = [f"[b]{i}[/] {escape(_first_line(e.text))}" for i, e in enumerate(asked, 1)]
        host.say("\n".join([*rows, "go back to before one with [b]/rewind N[/]"]))
        return
    if not arg.strip().isdigit() or not 1 <= int(arg) <= len(asked):
        host.say(f"/rewind takes a number from 1 to {len(asked)}", error=True)
        return
    entry, source = asked[int(arg) - 1], host.conversation_id
    try:
        back = await _harness(host).rewind(source, entry.id)
        plan = await _harness(host).restore_plan(source, entry.id)
        await host.resume_session(back.conversation.id)
        short = await _harness(host).short_ids([source])
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.set_draft(back.prompt)
    host.pending_restore = plan if plan.files else None
    lines = [f"rewound: before message {arg}, in a copy; [b]{short[source]}[/] is unchanged"]
    lines += [escape(line) for line in plan.lines()]
    if plan.files:
        lines.append("files are untouched until [b]/restore[/] puts them back as they were")
    host.say("\n".join(lines))


async def restore(host: CommandHost, arg: str) -> None:
    """`/restore`: put the files back as the last /rewind's plan says."""
    plan = host.pending_restore
    if plan is None:
        host.say("nothing to restore: /rewind first (it says what can be put back)")
        return
    try:
        report = await _harness(host).restore(plan)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    host.pending_restore = None
    lines = [f"restored {path}" for path in report.restored]
    lines += [f"removed {path} (it did not exist then)" for path in report.removed]
    lines += [f"could not restore {path}: {why}" for path, why in report.failed]
    lines += [f"left {path} alone: {why}" for path, why in report.left_alone]
    lines += [f"cannot undo: {why}" for why in report.cannot_undo]
    host.say("\n".join(escape(line) for line in lines) or "nothing needed restoring")


async def send_held(host: CommandHost, arg: str) -> None:
    """`/send` (Ctrl+R in the app): send what was held behind a failed run."""
    try:
        sent = await _harness(host).send_held(host.conversation_id)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    if not sent:
        host.say("nothing is held: only input queued behind a run that failed waits for /send")
        return
    host.say(f"sent {len(sent)} held message{'s' if len(sent) != 1 else ''}")


async def mcp(host: CommandHost, arg: str) -> None:
    """`/mcp`: each MCP server of the user's config, its state and its tools, and the
    prompts (`/mcp__SERVER__NAME`) and resources (`@SERVER:URI`) it offers."""
    try:
        harness = _harness(host)
        servers = await harness.mcp_servers()
        prompts, resources = await harness.mcp_prompts(), await harness.mcp_resources()
        slash_mcp.remember(prompts)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    if not servers:
        host.say(
            "no MCP servers: add "
            + escape("[mcp_servers.NAME]")
            + " tables to your own config (a project file cannot; see the README)"
        )
        return
    lines = []
    for server in servers:
        lines.append(f"[b]{escape(server.name)}[/] {escape(server.line().split(' ', 1)[1])}")
        if server.tools:
            lines.append("  " + escape(", ".join(server.tools)))
        named = [f"/{p.command}" for p in prompts if p.server == server.name]
        if named:
            lines.append("  prompts: " + escape(", ".join(named)))
        for res in (r for r in resources if r.server == server.name):
            about = " — ".join(x for x in (res.name, res.description) if x)
            lines.append(f"  @{escape(res.mention)}" + (f"  {escape(about)}" if about else ""))
    host.say("\n".join(lines))


async def jobs(host: CommandHost, arg: str) -> None:
    """`/jobs`: the session's background jobs (command, age, state, last line);
    `/jobs N` shows job N's output so far; `/jobs stop N` stops job N with its whole
    process tree."""
    import time

    from runtime import job_age

    words = arg.split()
    if words and words[0] == "stop":
        if len(words) != 2:
            host.say("usage: /jobs stop N  (N from /jobs)", error=True)
            return
        try:
            job = await _harness(host).stop_job(host.conversation_id, words[1])
        except BastionError as exc:
            host.say(escape(_message(exc)), error=True)
            return
        host.say(f"{job.id} {escape(job.words())}: {escape(_first_line(job.command))}")
        return
    if len(words) > 1 or (words and parse_id(words[0]) is None):
        host.say("usage: /jobs, /jobs N (its output), or /jobs stop N", error=True)
        return
    try:
        found = await _harness(host).jobs(host.conversation_id)
    except BastionError as exc:
        host.say(escape(_message(exc)), error=True)
        return
    if words:
        _job_output(host, found, words[0])
        return
    if not found:
        host.say("no background jobs: the model starts one with run_command background: true")
        return
    now, lines = time.time(), []
    for job in found:
        state = job.words()
        tone = "$success" if job.running else "$foreground-muted"
        age = job_age((job.ended_at if job.ended_at else now) - job.started_at)
        lines.append(
            f"  [b]{job.number}[/] [{tone}]{escape(state)}[/] {age}  "
            f"[b]{escape(_first_line(job.command, 50))}[/]"
        )
        if last := job.last_line(70):
            lines.append(f"      [$foreground-muted]{escape(last)}[/]")
    running = sum(job.running for job in found)
    hint = "  [$foreground-muted](/jobs stop N stops one)[/]" if running else ""
    host.say(f"[b]background jobs[/]{hint}\n" + "\n".join(lines))


def parse_id(text: str) -> int | None:
    """A job's number from `N` or `job_N` (as /jobs and the model name it), else None."""
    found = re.fullmatch(r"(?:job_)?([1-9][0-9]{0,5})", text.strip())
    return int(found[1]) if found else None


def _job_output(host: CommandHost, found: Sequence[JobRecord], asked: str) -> None:
    """`/jobs N`: job N's state and its last output (up to LAST_CHARS, as of now)."""
    number = parse_id(asked)
    job = next((j for j in found if j.number == number), None)
    if job is None:
        host.say(f"no job {escape(asked)} in this conversation: /jobs lists them", error=True)
        return
    tail = job.last_output.rstrip() or "(nothing printed yet)"
    head = f"[b]{job.id}[/] {escape(job.words())}: [b]{escape(_first_line(job.command))}[/]"
    host.say(f"{head}\n{escape(tail)}")


def _first_line(text: str, limit: int = 70) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


async def quit_app(host: CommandHost, arg: str) -> None:
    host.exit(0)


def _message(exc: BastionError) -> str:
    """The error's one line: its message and hint (`str` of a BastionError has both)."""
    return str(exc)


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "list the commands and keys", show_help),
    SlashCommand("model", "show or switch the model", model, "[NAME]"),
    SlashCommand("mode", "show or switch the approval mode", mode, "[MODE]"),
    SlashCommand("approve", "approve the plan and leave plan mode", approve, "[MODE]"),
    SlashCommand("effort", "show or set how hard the model reasons", effort, "[LEVEL]"),
    SlashCommand("new", "start a new, empty conversation", new, aliases=("clear",)),
    SlashCommand("resume", "continue another session (picker, or ID)", resume, "[ID]"),
    SlashCommand("fork", "go on in a copy of this conversation", fork),
    SlashCommand("rewind", "go back to before one of your messages", rewind, "[N]"),
    SlashCommand("restore", "put files back as the last /rewind says", restore),
    SlashCommand(
        "compact", "summarize older turns; recent ones stay as they are", compact, "[INSTRUCTIONS]"
    ),
    SlashCommand(
        "reset",
        "new context from the model's handoff note (same session)",
        slash_context.reset,
        "[INSTRUCTIONS]",
    ),
    SlashCommand(
        "supersede",
        "end the run, drop its unfinished answer from the context",
        slash_context.supersede,
        "[MESSAGE]",
    ),
    SlashCommand(
        "urgent",
        "stop the run after this step and run MESSAGE next",
        slash_context.urgent,
        "MESSAGE",
    ),
    SlashCommand("export", "write the conversation to a new file", export, "[markdown|json]"),
    SlashCommand("copy", "copy the last answer (or its Nth code block)", copy, "[N]"),
    SlashCommand(
        "goto", "show your Nth message in the transcript", goto, "N", fronts=frozenset({"app"})
    ),
    SlashCommand("theme", "show or switch the theme", theme, "[NAME]", fronts=frozenset({"app"})),
    SlashCommand("cost", "the session's tokens and cost: by run, subagent, model", cost),
    SlashCommand("send", "send the input held behind a failed run", send_held),
    SlashCommand("mcp", "the MCP servers: state, tools, prompts, resources", mcp),
    SlashCommand("jobs", "list the background jobs; show or stop one", jobs, "[N | stop N]"),
    SlashCommand("agents", "list the background subagents; stop one", agents, "[stop ID]"),
    SlashCommand("quit", "leave bastion", quit_app, aliases=("exit",)),
)
