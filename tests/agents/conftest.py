"""The end-to-end fixtures (the real `bastion` command against a loopback server
process), for the crash tests of subagents."""

from __future__ import annotations

from tests.e2e.conftest import bastion, loopback  # noqa: F401  (fixtures)
