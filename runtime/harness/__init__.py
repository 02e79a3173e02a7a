"""The Harness, the runtime's facade and public API: one class put together from the
operations each module here adds (driving, approvals, sessions), and export and import
of a conversation.

The names below load on first use (PEP 562): `bastion export` reads the store
with `transfer` alone, without the facade and all it brings.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["Harness", "Interruption", "Subscription", "default_home", "new_conversation"]

if TYPE_CHECKING:
    from runtime.harness.facade import Harness, Subscription, default_home, new_conversation
    from runtime.model.results import Interruption


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'runtime.harness' has no attribute {name!r}")
    value = getattr(import_module("runtime.harness.facade"), name)
    globals()[name] = value
    return value
