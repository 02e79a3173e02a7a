"""Issue 27 item 14 from the command line: the user's `reasoning_effort` reaches the
request the loopback server records; a bad value is one line and exit 2."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_config_reasoning_effort_goes_on_the_wire(loopback, bastion):
    """Item 14 from the command line: the user's `reasoning_effort` reaches the request."""
    server = loopback([{"text": "hi"}, {"text": "again"}])
    b = bastion(server)
    (b.home.parent / "config" / "bastion").mkdir(parents=True)
    (b.home.parent / "config" / "bastion" / "config.toml").write_text('reasoning_effort = "low"\n')
    assert b.run("-p", "hello").returncode == 0
    (b.home.parent / "config" / "bastion" / "config.toml").write_text('reasoning_effort = "max"\n')
    bad = b.run("-p", "-c", "again")
    assert bad.returncode == 2 and "reasoning_effort" in bad.stderr
    assert server.requests()[0]["reasoning_effort"] == "low"
