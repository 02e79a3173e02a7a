from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Every test gets its own BASTION_HOME and config dir; nothing touches the user's."""
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("BASTION_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    os.environ.setdefault("TZ", "UTC")
    # The system prompt's date, pinned: token estimates (the status line's, in the
    # snapshots) would otherwise change with the day the suite runs (issue 38).
    monkeypatch.setattr("runtime.context.messages.today", lambda: "2026-01-15")


@pytest.fixture
def trusted():
    """`trusted(folder)`: the user trusts `folder` (recorded in this test's config dir), so
    its project files (.bastion/config.toml, .bastion/settings.toml) apply."""
    from runtime.config.trust import TrustState, set_trust

    def trust(folder) -> None:
        set_trust(folder, TrustState.TRUSTED)

    return trust
