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
    except ModuleNotFoundError as exc:
        if exc.name != "tools._native":
            raise
        return None, f"the native module was not built: {BUILD_HINT}"
    except ImportError as exc:
        return None, f"the native module did not import ({exc}): {BUILD_HINT}"


#: How to get the native path: its build needs a C++ compiler and RE2's headers, and
#: without them `pip install` builds nothing and says nothing (the extension is optional).
BUILD_HINT = (
    "install RE2's headers (Debian/Ubuntu: apt install libre2-dev g++; Fedora: dnf install "
    "re2-devel gcc-c++; macOS: brew install re2) and run the install again "
    "(pip install -e .); until then search and glob run 3.7-7.6x slower in Python"
)


def __getattr__(name: str) -> Any:
    if name not in ("NATIVE", "REASON"):
        raise AttributeError(f"module 'tools.native' has no attribute {name!r}")
    found = globals()
    loaded = dict(zip(("NATIVE", "REASON"), load(), strict=True))
    for key, value in loaded.items():  # (whichever a test has set already stays)
        found.setdefault(key, value)
    return found[name]
