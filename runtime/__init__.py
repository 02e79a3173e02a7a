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
    "ConfigChange": "runtime.config_watch",
    "ConfigWatcher": "runtime.config_watch",
    "CompactionFailed": "runtime.errors",
    "compacted_through": "runtime.compaction",
    "ConversationBusy": "runtime.errors",
    "LeaseLost": "runtime.errors",
    "SchemaTooNew": "runtime.errors",
    "StoreError": "runtime.errors",
    "UnknownConversation": "runtime.errors",
    "UnknownEntry": "runtime.errors",
    "RestorePlan": "runtime.effects",
    "RestoreReport": "runtime.effects",
    "SearchHit": "runtime.fulltext",
    "SearchQueryError": "runtime.fulltext",
    "Rewound": "runtime.sessions",
    "ImportRefused": "runtime.transfer",
    "export_markdown": "runtime.transfer",
    "Driver": "runtime.driver",
    "Follower": "runtime.attach",
    "ModelInfo": "runtime.catalog",
    "load_config": "runtime.config",
    "LoopSettings": "runtime.loop",
    "ProjectInstructions": "runtime.instructions",
    "load_instructions": "runtime.instructions",
    "schema_version": "runtime.migrations",
    "EmptyInput": "runtime.errors",
    "Harness": "runtime.harness",
    "SessionSettings": "runtime.harness",
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
    "ConfigChange",
    "ConfigError",
    "ConfigWatcher",
    "ConversationBusy",
    "ConversationView",
    "Driver",
    "EmptyInput",
    "Follower",
    "Harness",
    "ImportRefused",
    "LeaseLost",
    "LoopSettings",
    "ModelInfo",
    "ProjectInstructions",
    "RestorePlan",
    "RestoreReport",
    "Rewound",
    "Rule",
    "RuleKind",
    "SchemaTooNew",
    "Scope",
    "SearchHit",
    "SearchQueryError",
    "SessionSettings",
    "StoreError",
    "Subscription",
    "UnknownConversation",
    "UnknownEntry",
    "UsageSummary",
    "UsageTotals",
    "compacted_through",
    "default_home",
    "export_markdown",
    "load_config",
    "load_instructions",
    "reduce",
    "schema_version",
    "usage_summary",
    "view_from_snapshot",
]

if TYPE_CHECKING:
    from runtime.attach import Follower
    from runtime.catalog import ModelInfo
    from runtime.compaction import compacted_through
    from runtime.config import load_config
    from runtime.config_watch import ConfigChange, ConfigWatcher
    from runtime.driver import Driver
    from runtime.effects import RestorePlan, RestoreReport
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
        UnknownEntry,
    )
    from runtime.fulltext import SearchHit, SearchQueryError
    from runtime.harness import Harness, SessionSettings, Subscription, default_home
    from runtime.instructions import ProjectInstructions, load_instructions
    from runtime.loop import LoopSettings
    from runtime.migrations import schema_version
    from runtime.rules import BadRule, Rule, RuleKind, Scope
    from runtime.sessions import Rewound
    from runtime.transfer import ImportRefused, export_markdown
    from runtime.usage import UsageSummary, UsageTotals, usage_summary
    from runtime.views import ConversationView, reduce, view_from_snapshot


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
