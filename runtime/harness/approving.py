"""The Harness's approvals and rules: answering a pending approval (once, or always
with the rules it saves), the rules "always" would save, and every rule that applies
to a conversation. A mixin over `HarnessCore`; `Harness` is the public face."""

from __future__ import annotations

from runtime.agents.children import call_owner
from runtime.config.rules import propose, unique
from runtime.config.settings import load_project_rules
from runtime.config.trust import trust_of
from runtime.harness.core import HarnessCore
from runtime.model.errors import NotPending
from runtime.model.records import ToolCallRecord
from runtime.model.rules import BadRule, Rule, Scope
from runtime.model.tools import SANDBOX_OVERRIDES
from runtime.run.answers import Answer, answer_tx
from runtime.store.tx import Tx


class ApprovalOps(HarnessCore):
    async def respond(
        self,
        conversation_id: str,
        tool_call_id: str,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
        sandbox: str | None = None,
    ) -> tuple[Rule, ...]:
        """Answer a pending approval: committed, then the driver woken. NotPending if the
        approval was answered already or its call was settled (an interrupt won).

        `always` ("session" or "project") approves and saves the rules
        `proposed_rules` names, in the transaction that approves the call (a project
        rule goes to `.bastion/settings.toml` inside it: a failed write approves
        nothing); other pending calls those rules cover are approved with it.
        `message` goes with a denial to the model. `sandbox` ("outside" or "network")
        approves this call only, to run outside the command sandbox or with the
        network; it is committed with the answer. Returns the rules saved."""
        if always is not None and not approve:
            raise BadRule("a denial cannot save a rule", hint="answer always only to approve")
        if message is not None and approve:
            raise BadRule("a message goes with a denial", hint="deny with the message instead")
        check_sandbox_answer(approve, always, sandbox)
        # A subagent's call is answered in the subagent's conversation (runtime.agents).
        conversation_id = await self.store.read(
            lambda db: call_owner(db, conversation_id, tool_call_id)
        )
        scope = Scope(always) if always is not None else None
        if scope == Scope.INVOCATION:
            raise BadRule(
                "save a rule for the session or the project", hint="scope: session|project"
            )
        root = (await self.store.get_conversation(conversation_id)).cwd if scope else ""
        if scope == Scope.PROJECT and not trust_of(root).trusted:
            raise BadRule(
                f"{root} is not trusted, so its .bastion/settings.toml is not read",
                hint=f"save the rule for this session, or run `bastion trust {root}` first",
            )
        standing = self._standing_rules(conversation_id, root)

        def build(tx: Tx) -> tuple[list[ToolCallRecord], tuple[Rule, ...]]:
            return answer_tx(
                tx, tool_call_id, approve, Answer(scope, message, standing, root, sandbox)
            )

        answered, saved = await self.store.transact(conversation_id, build, publish=self._publish)
        if not answered:
            raise NotPending(
                f"tool call {tool_call_id} is not waiting for approval",
                hint="it was answered already, or the run was interrupted",
            )
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            for call in answered:
                driver.decided(call.id)
        return saved

    async def proposed_rules(
        self, conversation_id: str, tool_call_id: str, scope: str = "session"
    ) -> tuple[Rule, ...]:
        """The rules answering "always" would save for a pending call (what every front
        end shows before saving): () when no rule can cover it."""
        call = await self.store.tool_call(tool_call_id)
        conversation_id = await self.store.read(
            lambda db: call_owner(db, conversation_id, tool_call_id)
        )
        if call is None or call.conversation_id != conversation_id:
            return ()
        conv = await self.store.get_conversation(conversation_id)
        session = await self.store.session_rules(conversation_id)
        have = [*session, *self._standing_rules(conversation_id, conv.cwd)]
        return propose(call.name, call.arguments, Scope(scope), have)

    async def rules(self, conversation_id: str) -> tuple[Rule, ...]:
        """Every rule that applies to the conversation: its session rules, this
        process's `--allow` rules and the project's (`.bastion/settings.toml`)."""
        conv = await self.store.get_conversation(conversation_id)
        session = await self.store.session_rules(conversation_id)
        return unique([*session, *self._standing_rules(conversation_id, conv.cwd)])

    def _standing_rules(self, conversation_id: str, root: str) -> tuple[Rule, ...]:
        driver = self._drivers.get(conversation_id)
        if driver is not None and driver.config.rules is not None:
            return driver.config.rules.standing()
        return load_project_rules(root) if root and trust_of(root).trusted else ()


def check_sandbox_answer(approve: bool, always: str | None, sandbox: str | None) -> None:
    if sandbox is None:
        return
    if sandbox not in SANDBOX_OVERRIDES:
        raise BadRule(
            f"unknown sandbox answer {sandbox!r}",
            hint=f"use one of: {', '.join(SANDBOX_OVERRIDES)}",
        )
    if not approve or always is not None:
        raise BadRule(
            "running outside the sandbox (or with network) is approved once only",
            hint="approve this call once with it, without always",
        )
