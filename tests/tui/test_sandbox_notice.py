"""The app says once, in a notification, when commands cannot be sandboxed here."""

from __future__ import annotations

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, app_over, open_driven, wait_for
from tui.launch import sandbox_notice_for


async def test_the_app_tells_the_user_once(tmp_path, toolbox, monkeypatch):
    from types import SimpleNamespace

    from runtime.setup.load import Config

    monkeypatch.setenv("BASTION_SANDBOX_PROBE", "fail")
    opts = SimpleNamespace(approval_mode="full-auto", sandbox=None, network=None)
    asked: list[str | None] = []

    def notice() -> str | None:
        line = sandbox_notice_for(opts, Config())
        asked.append(line)
        return line

    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([ScriptedTurn("hi")]), toolbox)
    app = app_over(harness, conv_id, sandbox_notice=notice)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: bool(asked) and bool(app._notifications), pilot)
            [shown] = list(app._notifications)
            assert "WITHOUT a sandbox" in shown.message and shown.title == "no command sandbox"
        assert len(asked) == 1
        opts.sandbox = "danger-full-access"
        assert sandbox_notice_for(opts, Config()) is None  # nothing to tell
    finally:
        await harness.close()
