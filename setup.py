"""The build's one addition to pyproject.toml: say so when the fast path is skipped.

`tools._native` is optional: without a C/C++ compiler or RE2's headers the install
still succeeds and search and glob run on their slower Python path. pip shows a
build backend's output only when the build fails or with `-v`, so a skipped
optional extension would pass unseen. When it fails to build, this says so in one
notice on the installing terminal (the controlling tty, which pip does not
capture) and on stderr (which `pip -v` and logs show).
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError, CompileError

NOTICE = (
    "bastion: the fast search path (tools._native) was not built: compiling it\n"
    "bastion: failed (no C/C++ compiler, or no RE2 headers).\n"
    "bastion: search and glob will use the 3.7-7.6x slower pure-Python path.\n"
    "bastion: to turn the fast path on, install a C/C++ compiler and RE2's headers\n"
    "bastion: (apt-get install libre2-dev, brew install re2), then run the install\n"
    "bastion: again. `bastion doctor` says which path is in use.\n"
)


def tell(text: str) -> None:
    """Write to stderr, and to the terminal pip runs in when there is one."""
    sys.stderr.write(text)
    sys.stderr.flush()
    try:
        fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        return  # no controlling terminal (CI, a script): stderr is the record
    try:
        os.write(fd, ("\n" + text).replace("\n", "\r\n").encode())
    except OSError:
        pass  # the terminal went away mid-install; stderr still has it
    finally:
        os.close(fd)


class NoticeBuildExt(build_ext):  # type: ignore[misc]  # setuptools is untyped
    """build_ext that announces a skipped optional extension, then lets it skip."""

    def build_extension(self, ext):  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except (CCompilerError, BaseError, CompileError):
            if getattr(ext, "optional", False):
                tell(NOTICE)
            raise


if __name__ == "__main__":
    setup(cmdclass={"build_ext": NoticeBuildExt})
