"""Bastion's durable harness. Headless: never imports textual, prompt_toolkit or rich.

The names below load on first use (PEP 562), so importing one submodule, such
as `runtime.providers.openai` or `runtime.testing.server`, does not pay for
the whole harness.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

# `import httpx` loads httpx's own command-line tool (click, rich, pygments: ~40 ms)
# whenever click is installed, as it is with bastion[mcp] (uvicorn needs it). Bastion
# never runs that tool: with this, httpx keeps its stub `main` instead.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

_EXPORTS = {
    "AmbiguousId": "runtime.errors",
    "BastionError": "runtime.errors",
    "BUDGET_CODES": "runtime.budget",
    "Budget": "runtime.budget",
    "ConfigError": "runtime.errors",
    "ConfigChange": "runtime.config_watch",
    "ConfigWatcher": "runtime.config_watch",
    "CompactionFailed": "runtime.errors",
    "compacted_through": "runtime.compaction",
    "ConversationBusy": "runtime.errors",
    "LeaseLost": "runtime.errors",
    "SchemaTooNew": "runtime.errors",
    "SessionSummary": "runtime.records",
    "ReadOnlyStore": "runtime.readonly",
    "SessionHit": "runtime.readonly",
    "SessionRow": "runtime.readonly",
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
    "Trust": "runtime.trust",
    "TrustState": "runtime.trust",
    "trust_of": "runtime.trust",
    "trust_once": "runtime.trust",
    "project_files": "runtime.trust",
    "set_trust": "runtime.trust",
    "recorded_trust": "runtime.trust",
    "project_preview": "runtime.project_preview",
    "store_modes": "runtime.storefile",
    "choose_sandbox": "runtime.sandboxing",
    "sandbox_notice": "runtime.sandboxing",
    "sandbox_report": "runtime.sandboxing",
    "LoopSettings": "runtime.loop",
    "ProjectInstructions": "runtime.instructions",
    "load_instructions": "runtime.instructions",
    "schema_version": "runtime.migrations",
    "kept_bytes": "runtime.blobs",
    "EmptyInput": "runtime.errors",
    "Harness": "runtime.harness",
    "SessionSettings": "runtime.records",
    "Subscription": "runtime.harness",
    "default_home": "runtime.home",
    "BadRule": "runtime.rules",
    "command_rule": "runtime.rules",
    "Rule": "runtime.rules",
    "RuleKind": "runtime.rules",
    "Scope": "runtime.rules",
    "ConversationView": "runtime.views",
    "UsageSummary": "runtime.usage",
    "UsageTotals": "runtime.usage",
    "usage_summary": "runtime.usage",
    "reduce": "runtime.views",
    "view_from_snapshot": "runtime.views",
    "Attachment": "runtime.mentions",
    "LocalServer": "runtime.firstrun",
    "NoModelConfigured": "runtime.firstrun",
    "ProbeTarget": "runtime.firstrun",
    "default_targets": "runtime.firstrun",
    "first_run_report": "runtime.firstrun",
    "first_run_text": "runtime.firstrun",
    "probe_local_servers": "runtime.firstrun",
    "WorkspaceFiles": "runtime.mentions",
    "expand_mentions": "runtime.mentions",
    "fuzzy_filter": "runtime.mentions",
    "mention_at": "runtime.mentions",
    "split_attachments": "runtime.mentions",
    "short_ids": "runtime.shortids",
}

__all__ = [
    "BUDGET_CODES",
    "AmbiguousId",
    "Attachment",
    "BadRule",
    "BastionError",
    "Budget",
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
    "LocalServer",
    "LoopSettings",
    "ModelInfo",
    "NoModelConfigured",
    "ProbeTarget",
    "ProjectInstructions",
    "ReadOnlyStore",
    "RestorePlan",
    "RestoreReport",
    "Rewound",
    "Rule",
    "RuleKind",
    "SchemaTooNew",
    "Scope",
    "SearchHit",
    "SearchQueryError",
    "SessionHit",
    "SessionRow",
    "SessionSettings",
    "SessionSummary",
    "StoreError",
    "Subscription",
    "Trust",
    "TrustState",
    "UnknownConversation",
    "UnknownEntry",
    "UsageSummary",
    "UsageTotals",
    "WorkspaceFiles",
    "choose_sandbox",
    "command_rule",
    "compacted_through",
    "default_home",
    "default_targets",
    "expand_mentions",
    "export_markdown",
    "first_run_report",
    "first_run_text",
    "fuzzy_filter",
    "kept_bytes",
    "load_config",
    "load_instructions",
    "mention_at",
    "probe_local_servers",
    "project_files",
    "project_preview",
    "recorded_trust",
    "reduce",
    "sandbox_notice",
    "sandbox_report",
    "schema_version",
    "set_trust",
    "short_ids",
    "split_attachments",
    "store_modes",
    "trust_of",
    "trust_once",
    "usage_summary",
    "view_from_snapshot",
]

if TYPE_CHECKING:
    from runtime.attach import Follower
    from runtime.blobs import kept_bytes
    from runtime.budget import BUDGET_CODES, Budget
    from runtime.catalog import ModelInfo
    from runtime.compaction import compacted_through
    from runtime.config import load_config
    from runtime.config_watch import ConfigChange, ConfigWatcher
    from runtime.driver import Driver
    from runtime.effects import RestorePlan, RestoreReport
    from runtime.errors import (
        AmbiguousId,
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
    from runtime.firstrun import (
        LocalServer,
        NoModelConfigured,
        ProbeTarget,
        default_targets,
        first_run_report,
        first_run_text,
        probe_local_servers,
    )
    from runtime.fulltext import SearchHit, SearchQueryError
    from runtime.harness import Harness, Subscription
    from runtime.home import default_home
    from runtime.instructions import ProjectInstructions, load_instructions
    from runtime.loop import LoopSettings
    from runtime.mentions import (
        Attachment,
        WorkspaceFiles,
        expand_mentions,
        fuzzy_filter,
        mention_at,
        split_attachments,
    )
    from runtime.migrations import schema_version
    from runtime.project_preview import project_preview
    from runtime.readonly import ReadOnlyStore, SessionHit, SessionRow
    from runtime.records import SessionSettings, SessionSummary
    from runtime.rules import BadRule, Rule, RuleKind, Scope, command_rule
    from runtime.sandboxing import choose_sandbox, sandbox_notice, sandbox_report
    from runtime.sessions import Rewound
    from runtime.shortids import short_ids
    from runtime.storefile import store_modes
    from runtime.transfer import ImportRefused, export_markdown
    from runtime.trust import (
        Trust,
        TrustState,
        project_files,
        recorded_trust,
        set_trust,
        trust_of,
        trust_once,
    )
    from runtime.usage import UsageSummary, UsageTotals, usage_summary
    from runtime.views import ConversationView, reduce, view_from_snapshot


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
