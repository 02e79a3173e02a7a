"""The Harness's driving: models and their providers, drivers (start, release),
compaction and usage, and the model and approval mode this process runs each
conversation with (which never leak into another invocation). A mixin over
`HarnessCore`; `Harness` is the public face."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import msgspec

from runtime import agents
from runtime.config.approvals import ApprovalMode
from runtime.config.rules import allow_rule, folder_parts
from runtime.config.settings import ProjectRules, RuleBook
from runtime.config.trust import trust_of
from runtime.context.catalog import ModelInfo
from runtime.context.compaction import DEFAULT_RESERVE, CompactionSettings, Compactor
from runtime.context.usage import usage_summary
from runtime.harness.core import HarnessCore
from runtime.hooks import hooks_for
from runtime.model.errors import BastionError, McpUnavailable, UnfinishedWork
from runtime.model.events import SettingsChanged
from runtime.model.llm import Provider
from runtime.model.records import Conversation, Entry, SessionSettings
from runtime.model.results import (
    McpPrompt,
    McpResource,
    McpServerStatus,
    UsageSummary,
    UsageTotals,
)
from runtime.model.rules import Rule, Scope
from runtime.plan.todo import PlanToolbox
from runtime.run.admission import new_conversation
from runtime.run.driver import Driver, DriverConfig
from runtime.run.reasoning import parse_effort
from runtime.run.sandboxing import choose_sandbox
from runtime.setup.skills import SkillToolbox, load_skills
from runtime.store.sessions import descendants
from runtime.store.tx import Tx

log = logging.getLogger(__name__)


def drive_options(
    interactive: bool,
    on_refusal: Callable[[str, str], None] | None,
    approval_mode: str | None,
    model: str | None,
    allow: Sequence[str],
) -> dict[str, Any]:
    """`drive`'s options as its driver starts with them (kept for a deferred start, or
    by a follower that takes the session over): `allow` as this invocation's rules."""
    return {
        "interactive": interactive,
        "on_refusal": on_refusal,
        "approval_mode": approval_mode,
        "model": model,
        "allow": tuple(allow_rule(a, Scope.INVOCATION) for a in allow),
    }


class DrivingOps(HarnessCore):
    # --- MCP servers (runtime.mcp) ------------------------------------------

    def start_mcp(self) -> None:
        """Start the config's MCP servers, each connecting in its own task (the SDK is
        imported here, never when no server is configured)."""
        from runtime.mcp.config import server_specs
        from runtime.mcp.hub import McpHub

        specs = server_specs(self.config.mcp_servers)
        if specs and self.mcp is None:
            self.mcp = McpHub(specs, self.home / "mcp")
            self.mcp.start()

    async def mcp_servers(self, *, wait: bool = False) -> tuple[McpServerStatus, ...]:
        """Each configured MCP server: its transport, state and tools (`/mcp`); with
        `wait`, once every server has started or failed."""
        if self.mcp is None:
            return ()
        if wait:
            await self.mcp.ready()
        return self.mcp.status()

    async def mcp_prompts(self) -> tuple[McpPrompt, ...]:
        """The prompts the MCP servers offer (the `/mcp__SERVER__NAME` commands)."""
        from runtime.mcp.extras import prompts

        return prompts(self.mcp) if self.mcp is not None else ()

    async def mcp_resources(self) -> tuple[McpResource, ...]:
        """The resources the MCP servers list (what `@SERVER:URI` can attach), once each
        server has started or failed (a prompt sent as the session opens finds them)."""
        from runtime.mcp.extras import resources

        if self.mcp is None:
            return ()
        await self.mcp.ready()
        return resources(self.mcp)

    async def mcp_prompt(self, server: str, name: str, arguments: dict[str, str]) -> str:
        """A server's prompt as the text of a user message; McpUnavailable if it cannot."""
        from runtime.mcp.extras import prompt_text

        if self.mcp is None:
            raise McpUnavailable("no MCP server is configured", hint="see [mcp_servers]")
        return await prompt_text(self.mcp, server, name, arguments)

    async def mcp_resource(self, server: str, uri: str) -> tuple[str, str]:
        """A listed resource's text and a note (why it was cut, or empty)."""
        from runtime.mcp.extras import resource_text

        if self.mcp is None:
            raise McpUnavailable("no MCP server is configured", hint="see [mcp_servers]")
        return await resource_text(self.mcp, server, uri)

    def resolve_model(self, spec: str) -> tuple[Provider, str]:
        """Provider and model name for `spec` (cached); raises ConfigError."""
        if spec not in self._providers:
            if self._resolve_model is None:
                raise BastionError("this harness was opened without a model resolver")
            self._providers[spec] = self._resolve_model(spec)
        return self._providers[spec]

    async def usage(self, conversation_id: str) -> UsageSummary:
        """Token counts (with provenance) and cost per run, per model and in total,
        and how full the context window was at the newest request. The subagents'
        conversations count too (`children`, and in the total and per model): what
        the session's work cost, not its top conversation's alone."""
        summary = usage_summary(await self.snapshot(conversation_id))
        below = await self.store.read(lambda db: descendants(db, conversation_id))
        if not below:
            return summary
        total, per_model, children = summary.total, dict(summary.per_model), {}
        for child_id in below:
            child = usage_summary(await self.snapshot(child_id))
            children[child_id] = child.total
            total = total.merge(child.total)
            for model, part in child.per_model.items():
                per_model[model] = per_model.get(model, UsageTotals()).merge(part)
        return msgspec.structs.replace(summary, total=total, per_model=per_model, children=children)

    def compaction_settings(self) -> CompactionSettings:
        """The reserve from config, and the `compact_model`'s provider when one is set."""
        settings = CompactionSettings(
            reserve_tokens=self.config.compact_reserve_tokens or DEFAULT_RESERVE
        )
        spec = self.config.compact_model
        if spec:
            provider, model = self.resolve_model(spec)
            settings = msgspec.structs.replace(
                settings, summary_provider=provider, summary_model=model, summary_spec=spec
            )
        return settings

    async def cancel_compaction(self, conversation_id: str) -> bool:
        """Stop the compaction the active run is doing (it then goes on uncompacted:
        runtime.run.compacting); False when this process drives no such compaction."""
        self._needs_driver(conversation_id, "cancelling a compaction")
        driver = self._drivers.get(conversation_id)
        return driver is not None and driver.cancel_compaction()

    async def compact(self, conversation_id: str, instructions: str | None = None) -> Entry | None:
        """Summarise the conversation's older whole turns now (keeping roughly the last
        20k tokens verbatim); the summary entry, or None when there is nothing whole to
        compact yet (a new conversation not stored until its first prompt included).
        Raises CompactionFailed (the conversation is then as it was)."""
        self._check_open()
        self._needs_driver(conversation_id, "/compact")
        if conversation_id in self._prepared and not await self.store.exists(conversation_id):
            return None  # prepared, never prompted: no turn at all
        conv = await self.store.get_conversation(conversation_id)
        driver = self._drivers.get(conversation_id)
        spec = driver.config.model_info.spec if driver is not None else conv.agent.model
        provider, model = self.resolve_model(spec)
        info = self.model_info(spec)
        token = driver.token if driver is not None else None

        async def commit(build: Callable[[Tx], Any], after: Any = None) -> Any:
            return await self.store.transact(
                conversation_id, build, token=token, publish=self._publish, after=after
            )

        hooks = driver.config.hooks if driver is not None else None
        if hooks is not None:  # PreCompact, trigger "manual" (runtime.hooks.points)
            snap = await self.store.snapshot(conversation_id)
            outside = OutsideRun(conversation_id, snap.entries, self.store, commit)
            instructions = await hooks.manual_compact(outside, instructions or "")
        latest = await self.store.latest_run(conversation_id)
        active = latest.id if latest is not None and not latest.terminal else None
        compactor = Compactor(
            self.store, conversation_id, commit, provider, model, info,
            info.context_window, self.compaction_settings(),
        )  # fmt: skip
        return await compactor.compact(instructions or None, active_run_id=active)

    def model_info(self, spec: str) -> ModelInfo:
        """What is known of model `spec` ("PROVIDER/NAME"): context window, output limit,
        prices, images, tools; `known` is False when these are conservative guesses."""
        return self.config.model_info(spec)

    def output_cap(self, spec: str) -> int:
        """The `max_tokens` every request to `spec` carries (config, catalog, 8192)."""
        return self.config.output_cap(spec)

    async def drive(
        self,
        conversation_id: str,
        *,
        interactive: bool = True,
        on_refusal: Callable[[str, str], None] | None = None,
        approval_mode: str | None = None,
        model: str | None = None,
        allow: Sequence[str] = (),
    ) -> Driver | None:
        """Become this conversation's driver: take the lease, recover, run its work.

        `approval_mode` and `model` hold for this process only (a flag applies to its
        own invocation); without them, the conversation's stored settings. `allow`
        holds command prefixes that run without asking, for this process only. A
        conversation not created yet is driven as soon as `submit(create=...)`
        commits it; this returns None then."""
        self._check_open()
        if conversation_id in self._drivers:
            return self._drivers[conversation_id]
        options = drive_options(interactive, on_refusal, approval_mode, model, allow)
        if not await self.store.exists(conversation_id):
            self._deferred[conversation_id] = options
            prepared = self._prepared.get(conversation_id)
            agent = prepared.agent if prepared is not None else None
            self._settings[conversation_id] = SessionSettings(
                model or (agent.model if agent else ""),
                ApprovalMode.parse(
                    approval_mode or (agent.approval_mode if agent else "") or "ask"
                ).value,
            )
            return None
        return await self._start_driver(conversation_id, **options)

    async def _equip(self, conv: Conversation, mode: ApprovalMode) -> tuple[Any, Any]:
        """The driver's toolbox, each layer adding its tools: the built-in ones, the
        model's `todo` list (runtime.plan), the MCP servers' tools, then `task` for a
        top-level conversation or a child's cut to its agent's (runtime.agents); and
        the hooks (runtime.hooks), set for the toolbox's command sandbox."""
        toolbox = self._toolbox_factory(conv) if self._toolbox_factory else None
        if toolbox is not None:
            toolbox = PlanToolbox(toolbox)
        trusted = trust_of(conv.cwd).trusted
        if toolbox is not None:  # the user's and a trusted project's skills (runtime.setup)
            skills, _ = await asyncio.to_thread(load_skills, conv.cwd, trusted, os.environ)
            toolbox = SkillToolbox(toolbox, skills) if skills else toolbox
        policy = getattr(toolbox, "sandbox", None) or choose_sandbox(self.config, mode.value)
        try:
            hooks = hooks_for(self.config, conv.cwd, trusted, policy)
        except BaseException:  # a project's [hooks] that cannot be used: one line, no driver
            if toolbox is not None:
                toolbox.close()
            raise
        if self.mcp is not None:
            from runtime.mcp.catalog import loaded_tools
            from runtime.mcp.toolbox import McpToolbox

            spill = getattr(toolbox, "artifacts_dir", None) or self.home / "artifacts" / conv.id
            toolbox = McpToolbox(
                toolbox, self.mcp, Path(spill), tool_search=self.config.mcp_tool_search,
                loaded=lambda: self.store.read(lambda db: loaded_tools(db, conv.id)),
            )  # fmt: skip
        if toolbox is not None:
            catalog = await asyncio.to_thread(agents.load_agents, conv.cwd)
            # (the Harness this mixin is part of has the rest of ChildHost: `wait`)
            toolbox = agents.equip(cast(agents.ChildHost, self), conv, toolbox, catalog)
        return toolbox, hooks

    async def _start_driver(
        self,
        conversation_id: str,
        *,
        interactive: bool,
        on_refusal: Callable[[str, str], None] | None,
        approval_mode: str | None,
        model: str | None,
        allow: tuple[Rule, ...] = (),
    ) -> Driver:
        conv = await self.store.get_conversation(conversation_id)
        agent = conv.agent
        settings = self._settings.get(conversation_id)
        spec = (settings.model if settings else "") or model or agent.model
        mode = ApprovalMode.parse(
            settings.approval_mode if settings else approval_mode or agent.approval_mode or "ask"
        )
        provider, model_name = self.resolve_model(spec)
        toolbox, hooks = await self._equip(conv, mode)
        parent = agents.subagent_of(conv).get("parent")
        if isinstance(parent, str):
            self._parents[conv.id] = parent
        config = DriverConfig(
            provider=provider,
            model=model_name,
            model_info=self.model_info(spec),
            output_cap=self.output_cap(spec),
            toolbox=toolbox,
            approval_mode=mode,
            interactive=interactive,
            loop=self.loop_settings,
            lease_ttl=self.lease_ttl,
            on_refusal=on_refusal,
            compaction=self.compaction_settings(),
            hooks=hooks,
            rules=RuleBook(
                ProjectRules(conv.cwd) if trust_of(conv.cwd).trusted else None,
                allow,
                getattr(toolbox, "resolve_path", None) or folder_parts,
            ),
        )
        if isinstance(toolbox, agents.TaskToolbox):  # (children a crash left untold)
            try:
                await toolbox.agents.tell_ended()
            except BastionError as exc:
                log.warning("background agents of %s not told: %s", conversation_id, exc)
        driver = Driver(
            self.store, conversation_id, self.owner, self.epoch, self._publish, config,
            parked=self.parked,
        )  # fmt: skip
        try:
            await driver.start()
        except BaseException:
            if toolbox is not None:
                toolbox.close()
            raise
        self._drivers[conversation_id] = driver
        if self.serving is not None:
            await self.serving.start(conversation_id)
        self._settings[conversation_id] = SessionSettings(spec, mode.value)
        if isinstance(toolbox, agents.TaskToolbox):
            # Background children a crash left running go on with their parent.
            try:
                await toolbox.agents.resume()
            except BastionError as exc:
                log.warning("background agents of %s not resumed: %s", conversation_id, exc)
        return driver

    # --- this process's settings ------------------------------------------

    async def session_settings(self, conversation_id: str) -> SessionSettings:
        """The model and approval mode this process runs `conversation_id` with (the
        stored ones when it does not drive it)."""
        settings = self._settings.get(conversation_id)
        if settings is not None:
            return settings
        conv = self._prepared.get(conversation_id)
        if conv is None:
            conv = await self.store.get_conversation(conversation_id)
        return SessionSettings(conv.agent.model, conv.agent.approval_mode or "ask")

    async def set_approval_mode(self, conversation_id: str, mode: str) -> SessionSettings:
        """Switch the approval mode for this process (never stored: a mode holds only
        where it was chosen). Holds from the next tool call. ConfigError if unknown."""
        self._needs_driver(conversation_id, "the approval mode")
        parsed = ApprovalMode.parse(mode)
        current = await self.session_settings(conversation_id)
        settings = SessionSettings(current.model, parsed.value)
        self._settings[conversation_id] = settings
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.reconfigure(approval_mode=parsed)
        self._publish(SettingsChanged(conversation_id, settings.model, settings.approval_mode))
        return settings

    async def set_model(self, conversation_id: str, spec: str) -> SessionSettings:
        """Switch the conversation's model (stored with it, so a resume keeps it); holds
        from the next run. ConfigError, with nothing changed, if `spec` does not resolve."""
        self._needs_driver(conversation_id, "a change of model")
        provider, model_name = self.resolve_model(spec)
        current = await self.session_settings(conversation_id)
        prepared = self._prepared.get(conversation_id)
        if prepared is not None:
            self._prepared[conversation_id] = prepared.but(
                settings={**prepared.settings, "model": spec}
            )
        elif await self.store.exists(conversation_id):
            await self.update_settings(conversation_id, model=spec)
        settings = SessionSettings(spec, current.approval_mode)
        self._settings[conversation_id] = settings
        deferred = self._deferred.get(conversation_id)
        if deferred is not None:
            deferred["model"] = spec
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.reconfigure(provider=provider, model=model_name)
        self._publish(SettingsChanged(conversation_id, settings.model, settings.approval_mode))
        return settings

    async def set_reasoning_effort(self, conversation_id: str, effort: str) -> str:
        """Store the conversation's reasoning effort (runtime.run.reasoning; "" or `default`
        clears it); holds from the next run. ConfigError, nothing changed, if unknown."""
        value = parse_effort(effort)
        prepared = self._prepared.get(conversation_id)
        if prepared is not None:
            self._prepared[conversation_id] = prepared.but(
                settings={**prepared.settings, "reasoning_effort": value}
            )
        else:
            await self.update_settings(conversation_id, reasoning_effort=value)
        return value

    async def new_session(self, conversation_id: str, *, keep: bool = False) -> Conversation:
        """A new conversation like `conversation_id` (cwd, model, instructions), prepared
        (committed with its first prompt) and driven as this process drives that one
        (same approval mode and model); that one's driver is released unless `keep`
        (another client still follows it: runtime.ipc.server). Refused
        (UnfinishedWork, nothing changed) while it has a run or queued input."""
        self._check_open()
        like = self._prepared.get(conversation_id)
        if like is None:
            like = await self.store.get_conversation(conversation_id)
            if await self.store.unfinished(conversation_id):
                raise UnfinishedWork(
                    "this conversation still has work in progress",
                    hint="wait for it to finish, or press Esc to interrupt it first",
                )
        settings = await self.session_settings(conversation_id)
        driver = self._drivers.get(conversation_id)
        deferred = self._deferred.get(conversation_id)
        conv = new_conversation(like.cwd, settings={**like.settings, "model": settings.model})
        self.prepare(conv)
        if driver is not None:
            deferred = {"interactive": driver.config.interactive}
            deferred["on_refusal"] = driver.config.on_refusal
        if deferred is not None:
            await self.drive(
                conv.id,
                interactive=bool(deferred["interactive"]),
                on_refusal=deferred["on_refusal"],
                approval_mode=settings.approval_mode,
                model=settings.model,
            )
        if not keep:
            await self.release(conversation_id)
            self._deferred.pop(conversation_id, None)
            self._prepared.pop(conversation_id, None)
        return conv

    async def switch_session(
        self, conversation_id: str, to: str, *, keep: bool = False
    ) -> Conversation:
        """Drive stored conversation `to` as this process drives `conversation_id` (same
        interactivity), then release that one (unless `keep`: another client follows it). Refused (UnfinishedWork, nothing changed)
        while `conversation_id` has work in progress; ConversationBusy if another process
        drives `to`; UnknownConversation if there is no such conversation."""
        self._check_open()
        target = await self.store.get_conversation(to)
        if conversation_id not in self._prepared and await self.store.unfinished(conversation_id):
            raise UnfinishedWork(
                "this conversation still has work in progress",
                hint="wait for it to finish, or press Esc to interrupt it first",
            )
        driver = self._drivers.get(conversation_id)
        options = self._deferred.get(conversation_id) or {}
        interactive = driver.config.interactive if driver else options.get("interactive", True)
        on_refusal = driver.config.on_refusal if driver else options.get("on_refusal")
        if to != conversation_id:
            await self.drive(to, interactive=bool(interactive), on_refusal=on_refusal)
        if to != conversation_id and not keep:
            await self.release(conversation_id)
            self._deferred.pop(conversation_id, None)
            self._prepared.pop(conversation_id, None)
        return target

    async def set_defaults(
        self, conversation_id: str, *, model: str | None = None, approval_mode: str | None = None
    ) -> None:
        """Change the model and/or approval mode this process drives the conversation with,
        from its next run on (for a live config change; nothing is stored). A conversation
        not committed yet also gets `model` stored with its first prompt. ConfigError for an
        unknown model or mode, and then nothing changes."""
        self._check_open()
        self._needs_driver(conversation_id, "a change of model or approval mode")
        mode = ApprovalMode.parse(approval_mode) if approval_mode is not None else None
        resolved = self.resolve_model(model) if model is not None else None
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            if resolved is not None:
                driver.config.provider, driver.config.model = resolved
            if mode is not None:
                driver.config.approval_mode = mode
        deferred = self._deferred.get(conversation_id)
        if deferred is not None:
            if model is not None:
                deferred["model"] = model
            if mode is not None:
                deferred["approval_mode"] = mode.value
        prepared = self._prepared.get(conversation_id)
        if prepared is not None and model is not None:
            settings = {**prepared.settings, "model": model}
            self._prepared[conversation_id] = prepared.but(settings=settings)
        current = self._settings.get(conversation_id)
        if current is not None:  # what session_settings (the status line) reports
            self._settings[conversation_id] = SessionSettings(
                model if model is not None else current.model,
                mode.value if mode is not None else current.approval_mode,
            )

    def driver(self, conversation_id: str) -> Driver | None:
        return self._drivers.get(conversation_id)

    async def release(self, conversation_id: str) -> None:
        self._settings.pop(conversation_id, None)  # driven again: its own model and mode
        if self.serving is not None:
            await self.serving.stop(conversation_id)
        driver = self._drivers.pop(conversation_id, None)
        if driver is not None:
            await driver.stop()
            if driver.config.toolbox is not None:
                driver.config.toolbox.close()


class OutsideRun(msgspec.Struct):
    """What a hook outside any run (PreCompact for /compact) is given of the
    conversation (runtime.hooks.context.RunContext): its entries as read, the store,
    and a commit under the driver's lease."""

    conversation_id: str
    read: Sequence[Entry]
    store: Any
    commit: Any
    interrupting: bool = False

    @property
    def entries(self) -> Sequence[Entry]:
        return self.read

    def track(self, entry: Entry | None) -> None:
        """Nothing to keep: no run reads these entries back."""
