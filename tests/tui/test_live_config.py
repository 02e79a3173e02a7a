"""The app follows config.toml edits: theme at once, approval mode (and model, before the first
prompt) for the next run unless a flag pinned it; a broken edit is reported and changes nothing.
Timing-based (a real file watcher): looped 50 times."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import ConfigWatcher
from runtime.config.approvals import ApprovalMode
from tests.tui.conftest import SIZE, run_settled, wait_for


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def watcher_for(tmp_path: Path) -> tuple[ConfigWatcher, Path]:
    config = tmp_path / "config" / "bastion" / "config.toml"
    write(config, 'theme = "bastion-dark"\n')
    return ConfigWatcher(str(tmp_path), {"XDG_CONFIG_HOME": str(tmp_path / "config")}), config


async def test_theme_and_approval_mode_follow_the_file(harness_process):
    proc = harness_process([])
    config = proc.tmp_path / "config" / "bastion" / "config.toml"  # the user's config
    write(config, 'theme = "bastion-dark"\n')
    app = proc.app(approval_mode=None)  # no flag: the config's mode, followed live
    notes: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (notes.append(message), notify(message, **kw))[1]  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        assert await mode_of(app) == ApprovalMode.ASK
        await wait_for(lambda: watching(app), pilot)
        write(config, 'theme = "bastion-light"\napproval_mode = "full-auto"\n')
        await wait_for(lambda: app.theme == "bastion-light", pilot)
        await until_mode(app, "full-auto")  # the harness process drives with it
        write(config, 'theme = "bastion-dark"\napproval_mode = "whenever"\n')
        await wait_for(lambda: app.live_config.watcher.error is not None, pilot)
        await wait_for(lambda: len(app.live_config.applied) == 2, pilot)
        assert app.theme == "bastion-light"  # nothing of the broken edit applied
        assert await mode_of(app) == ApprovalMode.FULL_AUTO
        assert any(str(config) in m and "approval_mode" in m for m in notes), notes


def watching(app: Any) -> bool:
    """The app's config watcher (tui.launch's, on the user's and the project's files) is
    watching."""
    live = app.live_config
    return bool(live and live.watcher and live.watcher.watching.is_set())


async def mode_of(app: Any) -> str:
    """The approval mode the harness process drives the session with (its protocol)."""
    return (await app.harness.session_settings(app.conversation_id)).approval_mode


async def until_mode(app: Any, mode: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while await mode_of(app) != mode:
        assert loop.time() < deadline, f"the harness process never drove with {mode}"
        await asyncio.sleep(0.02)  # (poll interval)


async def test_a_flag_pins_its_setting_and_the_model_applies_before_the_first_prompt(
    harness_process,
):
    proc = harness_process([{"text": "hello"}])
    config = proc.tmp_path / "config" / "bastion" / "config.toml"
    write(config, 'model = "openai/first"\n')
    app = proc.app(model=None, approval_mode="read-only")  # `bastion --approval-mode read-only`
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await wait_for(lambda: watching(app), pilot)
        write(config, 'model = "openai/second"\napproval_mode = "full-auto"\n')
        await wait_for(lambda: len(app.live_config.applied) == 1, pilot)
        await app.send("hi")
        await wait_for(lambda: run_settled(app), pilot)
        assert await mode_of(app) == ApprovalMode.READ_ONLY  # the flag's
    assert proc.requests[0].body["model"] == "second"  # the edited config's, then
    snap = await proc.snapshot()
    assert snap.conversation.agent.model == "openai/second"
