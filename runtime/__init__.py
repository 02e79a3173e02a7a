"""Bastion's durable harness. Headless: never imports textual, prompt_toolkit or rich.

The names below load on first use (PEP 562), so importing one submodule, such
as `runtime.providers.openai` or `runtime.testing.server`, does not pay for
the whole harness.
"""

from __future__ import annotations

import sys
from importlib import import_module

TYPE_CHECKING = False  # (the typing module costs the session commands ~5 ms to import)
if TYPE_CHECKING:
    from typing import Any

# `import httpx` loads httpx's own command-line tool (click, rich, pygments: ~40 ms)
# whenever click is installed, as it is with bastion[mcp] (uvicorn needs it). Bastion
# never runs that tool: with this, httpx keeps its stub `main` instead.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

_EXPORTS = {
    "AmbiguousId": "runtime.model.errors",
    "BastionError": "runtime.model.errors",
    "BUDGET_CODES": "runtime.run.budget",
    "Budget": "runtime.run.budget",
    "ConfigError": "runtime.model.errors",
    "ConfigChange": "runtime.setup.watch",
    "ConfigWatcher": "runtime.setup.watch",
    "CompactionFailed": "runtime.model.errors",
    "compacted_through": "runtime.context.compaction",
    "ConversationBusy": "runtime.model.errors",
    "DrivenElsewhere": "runtime.model.errors",
    "DriverAt": "runtime.model.results",
    "CommandFile": "runtime.setup.commands",
    "expand_command": "runtime.setup.commands",
    "Busy": "runtime.model.errors",
    "LeaseLost": "runtime.model.errors",
    "SchemaTooNew": "runtime.model.errors",
    "SessionSummary": "runtime.model.records",
    "ReadOnlyStore": "runtime.store.readonly",
    "SessionHit": "runtime.store.readonly",
    "SessionRow": "runtime.store.readonly",
    "StoreError": "runtime.model.errors",
    "UnknownConversation": "runtime.model.errors",
    "UnknownEntry": "runtime.model.errors",
    "RestorePlan": "runtime.model.results",
    "RestoreReport": "runtime.model.results",
    "CloseReport": "runtime.model.results",
    "SearchHit": "runtime.model.results",
    "SearchQueryError": "runtime.store.fulltext",
    "Rewound": "runtime.model.results",
    "ImportRefused": "runtime.harness.transfer",
    "export_markdown": "runtime.harness.transfer",
    "committed_export": "runtime.harness.transfer",
    "committed_view": "runtime.harness.transfer",
    "Driver": "runtime.run.driver",
    "ModelInfo": "runtime.context.catalog",
    "load_config": "runtime.setup.load",
    "Trust": "runtime.config.trust",
    "TrustState": "runtime.config.trust",
    "trust_of": "runtime.config.trust",
    "trust_once": "runtime.config.trust",
    "project_files": "runtime.config.trust",
    "set_trust": "runtime.config.trust",
    "recorded_trust": "runtime.config.trust",
    "project_preview": "runtime.setup.preview",
    "store_modes": "runtime.store.storefile",
    "configured_store": "runtime.setup.storechoice",
    "store_report": "runtime.setup.storechoice",
    "choose_sandbox": "runtime.run.sandboxing",
    "sandbox_notice": "runtime.run.sandboxing",
    "probe_sandbox_soon": "runtime.run.sandboxing",
    "sandbox_report": "runtime.run.sandboxing",
    "network_report": "runtime.run.sandboxing",
    "hooks_report": "runtime.setup.preview",
    "LoopSettings": "runtime.run.deps",
    "ProjectInstructions": "runtime.context.instructions",
    "load_instructions": "runtime.context.instructions",
    "schema_version": "runtime.store.migrations",
    "kept_bytes": "runtime.store.blobs",
    "EmptyInput": "runtime.model.errors",
    "Harness": "runtime.harness",
    "SessionSettings": "runtime.model.records",
    "Subscription": "runtime.harness",
    "default_home": "runtime.store.home",
    "BadRule": "runtime.config.rules",
    "command_rule": "runtime.config.rules",
    "Rule": "runtime.config.rules",
    "RuleKind": "runtime.config.rules",
    "Scope": "runtime.config.rules",
    "ConversationView": "runtime.model.views",
    "UsageSummary": "runtime.model.results",
    "UsageTotals": "runtime.model.results",
    "usage_summary": "runtime.context.usage",
    "reduce": "runtime.model.views",
    "view_from_snapshot": "runtime.model.views",
    "Attachment": "runtime.context.mentions",
    "LocalServer": "runtime.setup.firstrun",
    "NoModelConfigured": "runtime.setup.firstrun",
    "ProbeTarget": "runtime.setup.firstrun",
    "default_targets": "runtime.setup.firstrun",
    "first_run_report": "runtime.setup.firstrun",
    "first_run_text": "runtime.setup.firstrun",
    "probe_local_servers": "runtime.setup.firstrun",
    "McpServerStatus": "runtime.model.results",
    "McpPrompt": "runtime.model.results",
    "McpResource": "runtime.model.results",
    "McpUnavailable": "runtime.model.errors",
    "probe_mcp_servers": "runtime.mcp.hub",
    "mcp_login": "runtime.mcp.oauth",
    "mcp_logout": "runtime.mcp.oauth",
    "LoginFailed": "runtime.mcp.oauth",
    "WorkspaceFiles": "runtime.context.mentions",
    "expand_mentions": "runtime.context.mentions",
    "attach_resources": "runtime.context.mentions",
    "expand_prompt": "runtime.context.mentions",
    "fuzzy_filter": "runtime.context.mentions",
    "mention_at": "runtime.context.mentions",
    "split_attachments": "runtime.context.mentions",
    "short_ids": "runtime.store.shortids",
    "Config": "runtime.setup.load",
    "EFFORTS": "runtime.run.reasoning",
    "EventChannel": "runtime.ipc.channel",
    "RESYNC": "runtime.ipc.channel",
    "Listeners": "runtime.ipc.listen",
    "socket_path": "runtime.ipc.door",
    "Door": "runtime.ipc.door",
    "NotIdle": "runtime.model.errors",
    "Parked": "runtime.model.results",
    "read_token": "runtime.ipc.peer",
    "PeerRefused": "runtime.ipc.peer",
    "Connection": "runtime.ipc.wire",
    "HarnessClient": "runtime.ipc.client",
    "ParkingClient": "runtime.ipc.parking",
    "local_client": "runtime.ipc.local",
    "serve_connection": "runtime.ipc.server",
    "encode_error": "runtime.model.protocol",
    "decode_error": "runtime.model.protocol",
    "HarnessGone": "runtime.model.errors",
    "PROBE_TIMEOUT": "runtime.setup.firstrun",
    "Toolbox": "runtime.model.tools",
    "URGENT": "runtime.ipc.channel",
    "WorkspaceToolbox": "runtime.run.toolbox",
    "end_pair": "runtime.ipc.spawn",
    "lookup": "runtime.context.catalog",
    "model_resolver": "runtime.setup.load",
    "new_conversation": "runtime.harness",
    "parse_uuid": "runtime.model.ids",
    "recv_blocking": "runtime.ipc.spawn",
    "harden_process": "runtime.config.secrets",
    "send_blocking": "runtime.ipc.spawn",
    "start_pair": "runtime.ipc.spawn",
    "typed_prefix": "runtime.store.shortids",
    "user_config_path": "runtime.setup.load",
    "uuid7": "runtime.model.ids",
    "AgentRecord": "runtime.model.results",
    "Interruption": "runtime.model.results",
    "Redirection": "runtime.model.results",
    "Supersession": "runtime.model.results",
    "NotRunning": "runtime.model.errors",
    "ResetFailed": "runtime.model.errors",
    "superseded_runs": "runtime.model.records",
    "TodoItem": "runtime.model.todo",
    "JobRecord": "runtime.model.jobs",
    "job_age": "runtime.model.jobs",
    "Conversation": "runtime.model.records",
    "Entry": "runtime.model.records",
    "InboxItem": "runtime.model.records",
    "InboxMode": "runtime.model.records",
    "read_user_file": "runtime.config.safe_read",
    "visible": "runtime.model.text",
    "visible_json": "runtime.model.text",
}

__all__ = [
    "BUDGET_CODES",
    "EFFORTS",
    "PROBE_TIMEOUT",
    "RESYNC",
    "URGENT",
    "AgentRecord",
    "AmbiguousId",
    "Attachment",
    "BadRule",
    "BastionError",
    "Budget",
    "Busy",
    "CloseReport",
    "CommandFile",
    "CompactionFailed",
    "Config",
    "ConfigChange",
    "ConfigError",
    "ConfigWatcher",
    "Connection",
    "Conversation",
    "ConversationBusy",
    "ConversationView",
    "Door",
    "DrivenElsewhere",
    "Driver",
    "DriverAt",
    "EmptyInput",
    "Entry",
    "EventChannel",
    "Harness",
    "HarnessClient",
    "HarnessGone",
    "ImportRefused",
    "InboxItem",
    "InboxMode",
    "Interruption",
    "JobRecord",
    "LeaseLost",
    "Listeners",
    "LocalServer",
    "LoginFailed",
    "LoopSettings",
    "McpPrompt",
    "McpResource",
    "McpServerStatus",
    "McpUnavailable",
    "ModelInfo",
    "NoModelConfigured",
    "NotIdle",
    "NotRunning",
    "Parked",
    "ParkingClient",
    "PeerRefused",
    "ProbeTarget",
    "ProjectInstructions",
    "ReadOnlyStore",
    "Redirection",
    "ResetFailed",
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
    "Supersession",
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
    "attach_resources",
    "choose_sandbox",
    "command_rule",
    "committed_export",
    "committed_view",
    "compacted_through",
    "configured_store",
    "decode_error",
    "default_home",
    "default_targets",
    "encode_error",
    "end_pair",
    "expand_command",
    "expand_mentions",
    "expand_prompt",
    "export_markdown",
    "first_run_report",
    "first_run_text",
    "fuzzy_filter",
    "harden_process",
    "hooks_report",
    "job_age",
    "kept_bytes",
    "load_config",
    "load_instructions",
    "local_client",
    "lookup",
    "mcp_login",
    "mcp_logout",
    "mention_at",
    "model_resolver",
    "network_report",
    "new_conversation",
    "parse_uuid",
    "probe_local_servers",
    "probe_mcp_servers",
    "probe_sandbox_soon",
    "project_files",
    "project_preview",
    "read_token",
    "read_user_file",
    "recorded_trust",
    "recv_blocking",
    "reduce",
    "sandbox_notice",
    "sandbox_report",
    "schema_version",
    "send_blocking",
    "serve_connection",
    "set_trust",
    "short_ids",
    "socket_path",
    "split_attachments",
    "start_pair",
    "store_modes",
    "store_report",
    "superseded_runs",
    "trust_of",
    "trust_once",
    "typed_prefix",
    "usage_summary",
    "user_config_path",
    "uuid7",
    "view_from_snapshot",
    "visible",
    "visible_json",
]

if TYPE_CHECKING:
    from runtime.config.rules import command_rule
    from runtime.config.safe_read import read_user_file
    from runtime.config.secrets import harden_process
    from runtime.config.trust import (
        Trust,
        TrustState,
        project_files,
        recorded_trust,
        set_trust,
        trust_of,
        trust_once,
    )
    from runtime.context.catalog import ModelInfo, lookup
    from runtime.context.compaction import compacted_through
    from runtime.context.instructions import ProjectInstructions, load_instructions
    from runtime.context.mentions import (
        Attachment,
        WorkspaceFiles,
        attach_resources,
        expand_mentions,
        expand_prompt,
        fuzzy_filter,
        mention_at,
        split_attachments,
    )
    from runtime.context.usage import usage_summary
    from runtime.harness import Harness, Subscription, new_conversation
    from runtime.harness.transfer import (
        ImportRefused,
        committed_export,
        committed_view,
        export_markdown,
    )
    from runtime.ipc.channel import RESYNC, URGENT, EventChannel
    from runtime.ipc.client import HarnessClient
    from runtime.ipc.door import Door, socket_path
    from runtime.ipc.listen import Listeners
    from runtime.ipc.local import local_client
    from runtime.ipc.parking import ParkingClient
    from runtime.ipc.peer import PeerRefused, read_token
    from runtime.ipc.server import serve_connection
    from runtime.ipc.spawn import end_pair, recv_blocking, send_blocking, start_pair
    from runtime.ipc.wire import Connection
    from runtime.mcp.hub import probe_mcp_servers
    from runtime.mcp.oauth import LoginFailed, mcp_login, mcp_logout
    from runtime.model.errors import (
        AmbiguousId,
        BastionError,
        CompactionFailed,
        ConfigError,
        ConversationBusy,
        EmptyInput,
        LeaseLost,
        McpUnavailable,
        NotIdle,
        NotRunning,
        ResetFailed,
        SchemaTooNew,
        StoreError,
        UnknownConversation,
        UnknownEntry,
    )
    from runtime.model.ids import parse_uuid, uuid7
    from runtime.model.jobs import JobRecord, job_age
    from runtime.model.protocol import decode_error, encode_error
    from runtime.model.records import (
        Conversation,
        Entry,
        InboxItem,
        InboxMode,
        SessionSettings,
        SessionSummary,
        superseded_runs,
    )
    from runtime.model.results import (
        AgentRecord,
        CloseReport,
        Interruption,
        McpPrompt,
        McpResource,
        McpServerStatus,
        Parked,
        Redirection,
        RestorePlan,
        RestoreReport,
        Rewound,
        SearchHit,
        Supersession,
        UsageSummary,
        UsageTotals,
    )
    from runtime.model.rules import BadRule, Rule, RuleKind, Scope
    from runtime.model.text import visible, visible_json
    from runtime.model.todo import TodoItem
    from runtime.model.tools import Toolbox
    from runtime.model.views import ConversationView, reduce, view_from_snapshot
    from runtime.run.budget import BUDGET_CODES, Budget
    from runtime.run.deps import LoopSettings
    from runtime.run.driver import Driver
    from runtime.run.reasoning import EFFORTS
    from runtime.run.sandboxing import (
        choose_sandbox,
        network_report,
        probe_sandbox_soon,
        sandbox_notice,
        sandbox_report,
    )
    from runtime.run.toolbox import WorkspaceToolbox
    from runtime.setup.commands import CommandFile, expand_command
    from runtime.setup.firstrun import (
        PROBE_TIMEOUT,
        LocalServer,
        NoModelConfigured,
        ProbeTarget,
        default_targets,
        first_run_report,
        first_run_text,
        probe_local_servers,
    )
    from runtime.setup.load import Config, load_config, model_resolver, user_config_path
    from runtime.setup.preview import hooks_report, project_preview
    from runtime.setup.storechoice import configured_store, store_report
    from runtime.setup.watch import ConfigChange, ConfigWatcher
    from runtime.store.blobs import kept_bytes
    from runtime.store.fulltext import SearchQueryError
    from runtime.store.home import default_home
    from runtime.store.migrations import schema_version
    from runtime.store.readonly import ReadOnlyStore, SessionHit, SessionRow
    from runtime.store.shortids import short_ids, typed_prefix
    from runtime.store.storefile import store_modes


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
