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
    "hooks_report": "runtime.hooks",
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
    "McpServerStatus": "runtime.mcp.status",
    "probe_mcp_servers": "runtime.mcp.hub",
    "WorkspaceFiles": "runtime.mentions",
    "expand_mentions": "runtime.mentions",
    "fuzzy_filter": "runtime.mentions",
    "mention_at": "runtime.mentions",
    "split_attachments": "runtime.mentions",
    "short_ids": "runtime.shortids",
    "Config": "runtime.config",
    "EFFORTS": "runtime.reasoning",
    "EventChannel": "runtime.threaded",
    "HarnessGone": "runtime.frames",
    "HarnessProxy": "runtime.threaded",
    "PROBE_TIMEOUT": "runtime.firstrun",
    "RemoteHarness": "runtime.remote",
    "Toolbox": "runtime.toolbox",
    "URGENT": "runtime.threaded",
    "WorkspaceToolbox": "runtime.toolbox",
    "channel_for": "runtime.threaded",
    "end_pair": "runtime.frames",
    "frame": "runtime.frames",
    "lookup": "runtime.catalog",
    "model_resolver": "runtime.config",
    "new_conversation": "runtime.harness",
    "parse_uuid": "runtime.ids",
    "read_frame": "runtime.frames",
    "recv_blocking": "runtime.frames",
    "send_blocking": "runtime.frames",
    "sendable_error": "runtime.frames",
    "serve": "runtime.remote",
    "start_pair": "runtime.frames",
    "typed_prefix": "runtime.shortids",
    "user_config_path": "runtime.config",
    "uuid7": "runtime.ids",
    "write_frame": "runtime.frames",
    "HarnessAPI": "runtime.api",
    "NeedsDriver": "runtime.errors",
    "Interruption": "runtime.harness",
    "Redirection": "runtime.schedule.redirect",
    "TodoItem": "runtime.plan.items",
    "Conversation": "runtime.records",
    "Entry": "runtime.records",
    "InboxItem": "runtime.records",
    "InboxMode": "runtime.records",
    "read_user_file": "runtime.safe_read",
}

__all__ = [
    "BUDGET_CODES",
    "EFFORTS",
    "PROBE_TIMEOUT",
    "URGENT",
    "AmbiguousId",
    "Attachment",
    "BadRule",
    "BastionError",
    "Budget",
    "CompactionFailed",
    "Config",
    "ConfigChange",
    "ConfigError",
    "ConfigWatcher",
    "Conversation",
    "ConversationBusy",
    "ConversationView",
    "Driver",
    "EmptyInput",
    "Entry",
    "EventChannel",
    "Follower",
    "Harness",
    "HarnessAPI",
    "HarnessGone",
    "HarnessProxy",
    "ImportRefused",
    "InboxItem",
    "InboxMode",
    "Interruption",
    "LeaseLost",
    "LocalServer",
    "LoopSettings",
    "McpServerStatus",
    "ModelInfo",
    "NeedsDriver",
    "NoModelConfigured",
    "ProbeTarget",
    "ProjectInstructions",
    "ReadOnlyStore",
    "Redirection",
    "RemoteHarness",
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
    "TodoItem",
    "Toolbox",
    "Trust",
    "TrustState",
    "UnknownConversation",
    "UnknownEntry",
    "UsageSummary",
    "UsageTotals",
    "WorkspaceFiles",
    "WorkspaceToolbox",
    "channel_for",
    "choose_sandbox",
    "command_rule",
    "compacted_through",
    "default_home",
    "default_targets",
    "end_pair",
    "expand_mentions",
    "export_markdown",
    "first_run_report",
    "first_run_text",
    "frame",
    "fuzzy_filter",
    "hooks_report",
    "kept_bytes",
    "load_config",
    "load_instructions",
    "lookup",
    "mention_at",
    "model_resolver",
    "new_conversation",
    "parse_uuid",
    "probe_local_servers",
    "probe_mcp_servers",
    "project_files",
    "project_preview",
    "read_frame",
    "read_user_file",
    "recorded_trust",
    "recv_blocking",
    "reduce",
    "sandbox_notice",
    "sandbox_report",
    "schema_version",
    "send_blocking",
    "sendable_error",
    "serve",
    "set_trust",
    "short_ids",
    "split_attachments",
    "start_pair",
    "store_modes",
    "trust_of",
    "trust_once",
    "typed_prefix",
    "usage_summary",
    "user_config_path",
    "uuid7",
    "view_from_snapshot",
    "write_frame",
]

if TYPE_CHECKING:
    from runtime.api import HarnessAPI
    from runtime.attach import Follower
    from runtime.blobs import kept_bytes
    from runtime.budget import BUDGET_CODES, Budget
    from runtime.catalog import ModelInfo, lookup
    from runtime.compaction import compacted_through
    from runtime.config import Config, load_config, model_resolver, user_config_path
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
        NeedsDriver,
        SchemaTooNew,
        StoreError,
        UnknownConversation,
        UnknownEntry,
    )
    from runtime.firstrun import (
        PROBE_TIMEOUT,
        LocalServer,
        NoModelConfigured,
        ProbeTarget,
        default_targets,
        first_run_report,
        first_run_text,
        probe_local_servers,
    )
    from runtime.frames import (
        HarnessGone,
        end_pair,
        frame,
        read_frame,
        recv_blocking,
        send_blocking,
        sendable_error,
        start_pair,
        write_frame,
    )
    from runtime.fulltext import SearchHit, SearchQueryError
    from runtime.harness import Harness, Interruption, Subscription, new_conversation
    from runtime.home import default_home
    from runtime.hooks import hooks_report
    from runtime.ids import parse_uuid, uuid7
    from runtime.instructions import ProjectInstructions, load_instructions
    from runtime.loop import LoopSettings
    from runtime.mcp.hub import probe_mcp_servers
    from runtime.mcp.status import McpServerStatus
    from runtime.mentions import (
        Attachment,
        WorkspaceFiles,
        expand_mentions,
        fuzzy_filter,
        mention_at,
        split_attachments,
    )
    from runtime.migrations import schema_version
    from runtime.plan.items import TodoItem
    from runtime.project_preview import project_preview
    from runtime.readonly import ReadOnlyStore, SessionHit, SessionRow
    from runtime.reasoning import EFFORTS
    from runtime.records import (
        Conversation,
        Entry,
        InboxItem,
        InboxMode,
        SessionSettings,
        SessionSummary,
    )
    from runtime.remote import RemoteHarness, serve
    from runtime.rules import BadRule, Rule, RuleKind, Scope, command_rule
    from runtime.safe_read import read_user_file
    from runtime.sandboxing import choose_sandbox, sandbox_notice, sandbox_report
    from runtime.schedule.redirect import Redirection
    from runtime.sessions import Rewound
    from runtime.shortids import short_ids, typed_prefix
    from runtime.storefile import store_modes
    from runtime.threaded import URGENT, EventChannel, HarnessProxy, channel_for
    from runtime.toolbox import Toolbox, WorkspaceToolbox
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
