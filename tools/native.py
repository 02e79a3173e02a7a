"""The optional compiled helpers (``tools/csrc/``, built as ``tools._native``) and the switch for them.

``NATIVE`` is the extension module, or None when it was not built or when
``BASTION_NATIVE=0`` asks for the pure-Python path (which the tests also run,
and compare against the native one). Callers read ``native.NATIVE`` at call
time, so a test can switch paths by setting it.
"""

from __future__ import annotations

import os
from types import ModuleType


def load() -> ModuleType | None:
    if os.environ.get("BASTION_NATIVE") == "0":
        return None
    import importlib

    try:
        return importlib.import_module("tools._native")
    except ImportError:
        return None


NATIVE = load()
