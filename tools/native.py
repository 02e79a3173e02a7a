"""The optional compiled helpers (``tools/csrc/``, built as ``tools._native``) and the switch for them.

``NATIVE`` is the extension module, or None when it was not built or when
``BASTION_NATIVE=0`` asks for the pure-Python path (which the tests also run,
and compare against the native one); ``REASON`` then says which, for
``bastion doctor`` and the tests' skip lines. Callers read ``native.NATIVE`` at
call time, so a test can switch paths by setting it. Both are looked up on first
use (PEP 562): importing the tools, as every session does to list them for the
model, does not load the extension and the system's RE2 until a tool walks or
searches (issue 28).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    NATIVE: ModuleType | None
    REASON: str


def load() -> tuple[ModuleType | None, str]:
    if os.environ.get("BASTION_NATIVE") == "0":
        return None, "BASTION_NATIVE=0 asks for the Python path"
    import importlib

    try:
        return importlib.import_module("tools._native"), "built"
    except ImportError as exc:
        return None, f"the native module did not import: {exc}"


def __getattr__(name: str) -> Any:
    if name not in ("NATIVE", "REASON"):
        raise AttributeError(f"module 'tools.native' has no attribute {name!r}")
    found = globals()
    loaded = dict(zip(("NATIVE", "REASON"), load(), strict=True))
    for key, value in loaded.items():  # (whichever a test has set already stays)
        found.setdefault(key, value)
    return found[name]
