"""Opening a session the way every front end does: config, model, store, conversation."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from runtime import (
    Budget,
    Config,
    Driver,
    Harness,
    Listeners,
    LoopSettings,
    NoModelConfigured,
    Toolbox,
    choose_sandbox,
    default_home,
    load_config,
    model_resolver,
    new_conversation,
    parse_uuid,
    sandbox_notice,
    trust_once,
    typed_prefix,
    uuid7,
)
from runtime.model.errors import BastionError, ConfigError, ConversationBusy, UnknownConversation
from runtime.model.records import Conversation


class SessionUsageError(BastionError):
    code = "usage"


class Session(msgspec.Struct):
    harness: Harness
    conversation: Conversation
    config: Config
    created: bool  # new: committed only with its first prompt (harness.prepare)
    approval_mode: str = "ask"  # this invocation's: flag, then config, then ask
    model: str = ""
    driver: Driver | None = None
    allow: tuple[str, ...] = ()  # `--allow` rules, for this invocation only
    sandbox: Any = None  # the commands' SandboxPolicy (flags, then the user's config)
    by_request_key: bool = False  # found as the conversation its request key admitted

    def sandbox_notice(self) -> str | None:
        """The one line to tell the user when commands cannot be sandboxed here."""
        return sandbox_notice(self.sandbox) if self.sandbox is not None else None


def toolbox_factory(home: Path, sandbox: Any = None) -> Any:
    def make(conversation: Conversation) -> Toolbox | None:
        from runtime import WorkspaceToolbox

        return WorkspaceToolbox(conversation.cwd, home / "artifacts" / conversation.id, sandbox)

    return make


def loop_settings(env: Any, budget: Budget | None = None, effort: str = "") -> LoopSettings:
    """Loop settings from the environment (BASTION_MAX_RETRIES, default 4) and the
    run budget (the config's, with -p's flags applied)."""
    budget = budget or Budget()
    raw = env.get("BASTION_MAX_RETRIES")
    if raw is None:
        return LoopSettings(budget=budget, reasoning_effort=effort)
    try:
        retries = int(raw)
        if not 0 <= retries <= 20:
            raise ValueError
    except ValueError:
        raise SessionUsageError(
            f"BASTION_MAX_RETRIES={raw!r} is not a whole number from 0 to 20"
        ) from None
    return LoopSettings(max_retries=retries, budget=budget, reasoning_effort=effort)


def run_budget(config: Config, opts: Any) -> Budget:
    """Every run's limits: the config's (a project's only lowered them), then the flags."""
    return config.budget.but(
        max_turns=getattr(opts, "max_turns", None),
        max_cost=getattr(opts, "max_cost", None),
        time_limit=getattr(opts, "time_limit", None),
        session_max_cost=getattr(opts, "session_max_cost", None),
    )


def _session_id(opts: Any) -> str | None:
    """`--session-id`'s UUID (exactly: it may name a new session); `--resume`'s id or
    prefix is found in the store once it is open (`Harness.resolve_id`)."""
    if opts.resume == "":  # -r without an id: the front end picks one first
        raise SessionUsageError(
            "--resume needs a session id here", hint="list them with `bastion sessions --all`"
        )
    if opts.resume:  # found once the store is open; what cannot be an id fails here
        typed_prefix(opts.resume)
    raw = opts.session_id
    if raw is None:
        return None
    try:
        return parse_uuid(raw)
    except ValueError:
        raise SessionUsageError(
            f"--session-id {raw!r} is not a session id",
            hint="ids look like 0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e; list them with `bastion sessions`",
        ) from None


async def open_session(opts: Any, cwd: str | None = None, *, check_model: bool = True) -> Session:
    """Resolve config and model, open the store, find the conversation or prepare a new one.

    Nothing is written here: a new conversation is committed with its first prompt,
    so bad input (and quitting before a prompt) leaves the store as it was. A flag
    applies to its own invocation: `--approval-mode` and `--model` are not stored.
    """
    cwd = cwd or os.getcwd()
    if getattr(opts, "trust", False):  # --trust: this invocation only (the harness process too)
        trust_once(cwd)
    config = load_config(cwd)
    session_id = _session_id(opts)
    resolver = model_resolver(config)
    approval = opts.approval_mode or config.approval_mode.value
    sandbox = choose_sandbox(
        config, approval, getattr(opts, "sandbox", None), getattr(opts, "network", None)
    )
    harness = await Harness.open(
        resolve_model=resolver,
        config=config,
        toolbox_factory=toolbox_factory(default_home(), sandbox),
        loop_settings=loop_settings(os.environ, run_budget(config, opts), config.reasoning_effort),
    )
    harness.serving = Listeners(harness)  # each conversation it drives, on its attach socket
    try:
        if opts.resume:  # a full id, or any unique start of one
            session_id = await harness.resolve_id(opts.resume)
        request_key, by_key = getattr(opts, "request_key", None), False
        if request_key and session_id is None and not getattr(opts, "continue_", False):
            admitted = await harness.admitted(request_key)
            if admitted is not None:  # a retried script: the same session, not a second one
                session_id, by_key = admitted[0], True
        conversation, created = await _find_conversation(harness, opts, cwd, session_id)
        stored = conversation.agent
        model = opts.model or stored.model or config.model
        if check_model:  # ConfigError now, before anything is written
            _check_model(
                harness, model, chosen=bool(opts.model or stored.model or config.model_set)
            )
        if created:
            conversation = _prepare_new(harness, config, cwd, model, session_id)
        allow = tuple(getattr(opts, "allow", None) or ())
        return Session(
            harness,
            conversation,
            config,
            created,
            approval,
            model,
            allow=allow,
            sandbox=sandbox,
            by_request_key=by_key,
        )
    except BaseException:
        await harness.close()
        raise


def _check_model(harness: Harness, model: str, *, chosen: bool) -> None:
    """ConfigError for a model no provider answers; NoModelConfigured when nothing
    chose one (the first run)."""
    try:
        harness.resolve_model(model)
    except ConfigError as exc:
        if chosen:
            raise
        raise NoModelConfigured(
            "no model is configured",
            hint=f"{exc.message}; pass --model PROVIDER/NAME or set BASTION_MODEL",
        ) from exc


def _prepare_new(
    harness: Harness, config: Config, cwd: str, model: str, session_id: str | None
) -> Conversation:
    """A new conversation, prepared (not stored: it is committed with its first prompt)."""
    settings: dict[str, Any] = {"model": model}
    if config.instructions:
        settings["instructions"] = config.instructions
    if config.reasoning_effort:
        settings["reasoning_effort"] = config.reasoning_effort
    conversation = new_conversation(cwd, settings=settings, conversation_id=session_id or uuid7())
    harness.prepare(conversation)
    return conversation


async def start_session(
    opts: Any, *, interactive: bool, on_refusal: Callable[[str, str], None] | None = None
) -> Session:
    """`open_session`, then drive the conversation (take its lease, resume its work; a new
    one is driven once its first prompt commits it).

    Every front end starts this way; on a BastionError nothing is left open and
    the caller prints the one line and exits 2.
    """
    session = await open_session(opts)
    return await drive_session(session, interactive=interactive, on_refusal=on_refusal)


async def drive_session(
    session: Session, *, interactive: bool, on_refusal: Callable[[str, str], None] | None = None
) -> Session:
    """Resolve the session's model and drive its conversation; on a BastionError the
    harness is closed (nothing is left open) and the error raised."""
    try:
        session.harness.resolve_model(session.model)
        try:
            session.driver = await session.harness.drive(
                session.conversation.id,
                interactive=interactive,
                on_refusal=on_refusal,
                approval_mode=session.approval_mode,
                model=session.model,
                allow=session.allow,
            )
        except ConversationBusy:
            if interactive or not session.by_request_key:
                raise
            # The process that admitted this request key drives its run: follow the run
            # in the store (`Harness.wait` polls it) rather than fail a retried script.
    except BaseException:
        await session.harness.close()
        raise
    return session


async def _find_conversation(
    harness: Harness, opts: Any, cwd: str, session_id: str | None
) -> tuple[Conversation, bool]:
    placeholder = Conversation("", "", cwd, {}, 0.0, 0.0)
    if getattr(opts, "continue_", False):
        found = await harness.list_conversations(cwd, with_entries=True)
        if not found:
            raise SessionUsageError(
                "no conversation in this directory to continue",
                hint="start one with `bastion -p PROMPT` or pick one from `bastion sessions --all`",
            )
        return found[0], False
    if session_id is None:
        return placeholder, True
    try:
        return await harness.get_conversation(session_id), False
    except UnknownConversation:
        if await harness.was_deleted(session_id):
            raise SessionUsageError(
                f"conversation {session_id} was deleted; its id is not used again",
                hint="start a new session without --session-id, or pick another id",
            ) from None
        if opts.resume:
            raise UnknownConversation(
                f"no conversation {session_id}", hint="list them with `bastion sessions --all`"
            ) from None
        return placeholder, True
