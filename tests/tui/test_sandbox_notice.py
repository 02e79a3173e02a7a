"""The app says once, in a notification, when commands cannot be sandboxed here."""

from __future__ import annotations

from runtime.testing.scripted import ScriptedTurn
from tests.tui.conftest import SIZE, wait_for
from tui.launch import sandbox_notice_for


async def test_the_app_tells_the_user_once(harness_process, monkeypatch):
    from types import SimpleNamespace

    from runtime.setup.load import Config

    proc = harness_process([ScriptedTurn("hi")])
    monkeypatch.setenv("BASTION_SANDBOX_PROBE", "fail")
    app = proc.app(approval_mode="full-auto")
    real = app._sandbox_notice  # the one `bastion` wires (tui.launch.sandbox_notice_for)
    asked: list[str | None] = []

    def notice() -> str | None:
        line = real()
        asked.append(line)
        return line

    app._sandbox_notice = notice
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(asked) and bool(app._notifications), pilot)
        [shown] = list(app._notifications)
        assert "WITHOUT a sandbox" in shown.message and shown.title == "no command sandbox"
    assert len(asked) == 1
    opts = SimpleNamespace(approval_mode="full-auto", sandbox="danger-full-access", network=None)
    assert sandbox_notice_for(opts, Config()) is None  # nothing to tell
