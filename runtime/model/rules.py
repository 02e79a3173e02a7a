"""Approval rules as values: what a rule allows and where it lives. The matching (which
calls a rule allows, the rule an answer would save) is `runtime.config.rules`'s."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from runtime.model.errors import ConfigError

__all__ = [
    "COMMAND_TOOLS",
    "EDIT_TOOLS",
    "GUARDED",
    "TOOL_SEPARATOR",
    "BadRule",
    "Rule",
    "RuleKind",
    "Scope",
]

TOOL_SEPARATOR = "__"  # runtime.mcp's namespace: NAME__tool


class RuleKind(StrEnum):
    COMMAND = "command"
    EDITS = "edits"
    TOOL = "tool"  # an MCP tool by name (`github__create_issue`) or a server's (`github__*`)


class Scope(StrEnum):
    SESSION = "session"
    PROJECT = "project"
    INVOCATION = "invocation"


class BadRule(ConfigError):
    code = "bad_rule"


COMMAND_TOOLS = frozenset({"run_command"})
EDIT_TOOLS = frozenset({"write_file", "edit_file"})
# Never allowed by a rule: the project's remembered rules themselves.
GUARDED = ".bastion"


class Rule(msgspec.Struct, frozen=True):
    kind: str
    pattern: str  # command: words joined by one space; edits: folder ("" = the workspace)
    scope: str = Scope.SESSION

    def describe(self) -> str:
        if self.kind == RuleKind.TOOL:
            server, _, tool = self.pattern.partition(TOOL_SEPARATOR)
            return (
                f"every tool of MCP server {server}" if tool == "*" else f"MCP tool {self.pattern}"
            )
        if self.kind == RuleKind.COMMAND:
            return f"commands starting with `{self.pattern}`"
        return f"edits under {self.pattern}/" if self.pattern else "edits anywhere in the workspace"

    def to_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rule:
        return cls(str(data["kind"]), str(data["pattern"]), str(data.get("scope", Scope.SESSION)))

    def but(self, **changes: Any) -> Rule:
        return Rule(**{**self.to_dict(), **changes})
