"""Fakes at the provider seam: a scripted provider and a loopback OpenAI-compatible server.

    from runtime.testing import LoopbackServer, ScriptedProvider, ScriptedTurn

Names are imported lazily, so `python -m runtime.testing.server` does not import
its own module twice.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
    from runtime.testing.server import LoopbackServer, RecordedRequest
    from runtime.testing.turns import Fault, LoopbackTurn

_HOMES = {
    "Fault": "runtime.testing.turns",
    "LoopbackServer": "runtime.testing.server",
    "LoopbackTurn": "runtime.testing.turns",
    "RecordedRequest": "runtime.testing.server",
    "ScriptedProvider": "runtime.testing.scripted",
    "ScriptedTurn": "runtime.testing.scripted",
}

__all__ = [
    "Fault",
    "LoopbackServer",
    "LoopbackTurn",
    "RecordedRequest",
    "ScriptedProvider",
    "ScriptedTurn",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'runtime.testing' has no attribute {name!r}")
    return getattr(import_module(home), name)
