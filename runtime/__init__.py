"""Bastion's durable harness. Headless: never imports textual, prompt_toolkit or rich."""

from runtime.errors import (
    BastionError,
    ConfigError,
    ConversationBusy,
    LeaseLost,
    SchemaTooNew,
    StoreError,
    UnknownConversation,
)
from runtime.harness import EmptyInput, Harness, Subscription, default_home
from runtime.views import ConversationView, reduce, view_from_snapshot

__all__ = [
    "BastionError",
    "ConfigError",
    "ConversationBusy",
    "ConversationView",
    "EmptyInput",
    "Harness",
    "LeaseLost",
    "SchemaTooNew",
    "StoreError",
    "Subscription",
    "UnknownConversation",
    "default_home",
    "reduce",
    "view_from_snapshot",
]
