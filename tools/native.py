"""The optional compiled helpers (``tools/csrc/``, built as ``tools._native``) and the switch for them.

``NATIVE`` is the extension module, or None when it was not built or when
``BASTION_NATIVE=0`` asks for the pure-Python path (which the tests also run,
and compare against the native one); ``REASON`` then says which, for
``bastion doctor`` and the tests' skip lines. Callers read ``native.NATIVE`` at
call time, so a test can switch paths by setting it.
"""

from __future__ import annotations

import os
from types import ModuleType


def load() -> tuple[ModuleType | None, str]:
    if os.environ.get("BASTION_NATIVE") == "0":
        return None, "BASTION_NATIVE=0 asks for the Python path"
    import importlib

    try:
        return importlib.import_module("tools._native"), "built"
    except ImportError as exc:
        return None, f"the native module did not import: {exc}"


NATIVE, REASON = load()
