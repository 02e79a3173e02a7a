"""Bastion's durable harness. Headless: never imports textual, prompt_toolkit or rich.

The names below load on first use (PEP 562), so importing one submodule, such
as `runtime.providers.openai` or `runtime.testing.server`, does not pay for
the whole harness.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BastionError": "runtime.errors",
    "ConfigError": "runtime.errors",
    "CompactionFailed": "runtime.errors",
    "compacted_through": "runtime.compaction",
    "ConversationBusy": "runtime.errors",
    "LeaseLost": "runtime.errors",
    "SchemaTooNew": "runtime.errors",
    "StoreError": "runtime.errors",
    "UnknownConversation": "runtime.errors",
    "Driver": "runtime.driver",
    "ModelInfo": "runtime.catalog",
    "load_config": "runtime.config",
    "LoopSettings": "runtime.loop",
    "schema_version": "runtime.migrations",
    "EmptyInput": "runtime.errors",
    "Harness": "runtime.harness",
    "Subscription": "runtime.harness",
    "default_home": "runtime.harness",
    "BadRule": "runtime.rules",
    "Rule": "runtime.rules",
    "RuleKind": "runtime.rules",
    "Scope": "runtime.rules",
    "ConversationView": "runtime.views",
    "UsageSummary": "runtime.usage",
    "UsageTotals": "runtime.usage",
    "usage_summary": "runtime.usage",
    "reduce": "runtime.views",
    "view_from_snapshot": "runtime.views",
}

__all__ = [
    "BadRule",
    "BastionError",
    "CompactionFailed",
    "ConfigError",
    "ConversationBusy",
    "ConversationView",
    "Driver",
    "EmptyInput",
    "Harness",
    "LeaseLost",
    "LoopSettings",
    "ModelInfo",
    "Rule",
    "RuleKind",
    "SchemaTooNew",
    "Scope",
    "StoreError",
    "Subscription",
    "UnknownConversation",
    "UsageSummary",
    "UsageTotals",
    "compacted_through",
    "default_home",
    "load_config",
    "reduce",
    "schema_version",
    "usage_summary",
    "view_from_snapshot",
]

if TYPE_CHECKING:
    from runtime.catalog import ModelInfo
    from runtime.compaction import compacted_through
    from runtime.config import load_config
    from runtime.driver import Driver
    from runtime.errors import (
        BastionError,
        CompactionFailed,
        ConfigError,
        ConversationBusy,
        EmptyInput,
        LeaseLost,
        SchemaTooNew,
        StoreError,
        UnknownConversation,
    )
    from runtime.harness import Harness, Subscription, default_home
    from runtime.loop import LoopSettings
    from runtime.migrations import schema_version
    from runtime.rules import BadRule, Rule, RuleKind, Scope
    from runtime.usage import UsageSummary, UsageTotals, usage_summary
    from runtime.views import ConversationView, reduce, view_from_snapshot


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
