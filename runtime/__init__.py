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
    "ConversationBusy": "runtime.errors",
    "LeaseLost": "runtime.errors",
    "SchemaTooNew": "runtime.errors",
    "SessionSummary": "runtime.records",
    "StoreError": "runtime.errors",
    "UnknownConversation": "runtime.errors",
    "Driver": "runtime.driver",
    "LoopSettings": "runtime.loop",
    "schema_version": "runtime.migrations",
    "EmptyInput": "runtime.errors",
    "Harness": "runtime.harness",
    "Subscription": "runtime.harness",
    "default_home": "runtime.harness",
    "ConversationView": "runtime.views",
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
}

__all__ = [
    "Attachment",
    "BastionError",
    "ConfigError",
    "ConversationBusy",
    "ConversationView",
    "Driver",
    "EmptyInput",
    "Harness",
    "LeaseLost",
    "LocalServer",
    "LoopSettings",
    "NoModelConfigured",
    "ProbeTarget",
    "SchemaTooNew",
    "SessionSummary",
    "StoreError",
    "Subscription",
    "UnknownConversation",
    "WorkspaceFiles",
    "default_home",
    "default_targets",
    "expand_mentions",
    "first_run_report",
    "first_run_text",
    "fuzzy_filter",
    "mention_at",
    "probe_local_servers",
    "reduce",
    "schema_version",
    "split_attachments",
    "view_from_snapshot",
]

if TYPE_CHECKING:
    from runtime.driver import Driver
    from runtime.errors import (
        BastionError,
        ConfigError,
        ConversationBusy,
        EmptyInput,
        LeaseLost,
        SchemaTooNew,
        StoreError,
        UnknownConversation,
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
    from runtime.harness import Harness, Subscription, default_home
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
    from runtime.records import SessionSummary
    from runtime.views import ConversationView, reduce, view_from_snapshot


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
