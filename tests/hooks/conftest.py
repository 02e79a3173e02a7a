"""The end-to-end fixtures (the real `bastion` command, a loopback server process)."""

from __future__ import annotations

from tests.e2e.conftest import bastion, loopback

__all__ = ["bastion", "loopback"]
