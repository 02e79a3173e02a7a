"""The app follows config.toml edits: theme at once, approval mode (and model, before the first
prompt) for the next run unless a flag pinned it; a broken edit is reported and changes nothing.
Timing-based (a real file watcher): looped 50 times."""

from __future__ import annotations

from pathlib import Path

from runtime import ConfigWatcher
from runtime.config.approvals import ApprovalMode
from runtime.harness import new_conversation
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.tui.conftest import SIZE, app_over, open_driven, wait_for


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def watcher_for(tmp_path: Path) -> tuple[ConfigWatcher, Path]:
    config = tmp_path / "config" / "bastion" / "config.toml"
    write(config, 'theme = "bastion-dark"\n')
    return ConfigWatcher(str(tmp_path), {"XDG_CONFIG_HOME": str(tmp_path / "config")}), config


async def test_theme_and_approval_mode_follow_the_file(tmp_path):
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([]))
    watcher, config = watcher_for(tmp_path)
    app = app_over(harness, conv_id, watch_config=lambda: watcher)
    notes: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (notes.append(message), notify(message, **kw))[1]  # type: ignore[method-assign]
    driver = harness.driver(conv_id)
    assert driver is not None and driver.config.approval_mode == ApprovalMode.ASK
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(watcher.watching.is_set, pilot)
            write(config, 'theme = "bastion-light"\napproval_mode = "full-auto"\n')
            await wait_for(lambda: app.theme == "bastion-light", pilot)
            await wait_for(lambda: driver.config.approval_mode == "full-auto", pilot)
            write(config, 'theme = "bastion-dark"\napproval_mode = "whenever"\n')
            await wait_for(lambda: watcher.error is not None, pilot)
            await wait_for(lambda: len(app.live_config.applied) == 2, pilot)
            assert app.theme == "bastion-light"  # nothing of the broken edit applied
            assert driver.config.approval_mode == ApprovalMode.FULL_AUTO
            assert any(str(config) in m and "approval_mode" in m for m in notes), notes
    finally:
        await harness.close()


async def test_a_flag_pins_its_setting_and_the_model_applies_before_the_first_prompt(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="hello")])
    harness = await open_harness(tmp_path, provider)
    conversation = new_conversation(str(tmp_path), settings={"model": "scripted/first"})
    harness.prepare(conversation)
    await harness.drive(conversation.id, approval_mode="read-only", model="scripted/first")
    watcher, config = watcher_for(tmp_path)
    app = app_over(
        harness, conversation.id, watch_config=lambda: watcher, pinned=("approval_mode",)
    )
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(watcher.watching.is_set, pilot)
            write(config, 'model = "openai/second"\napproval_mode = "full-auto"\n')
            await wait_for(lambda: len(app.live_config.applied) == 1, pilot)
            await app.send("hi")
            await wait_for(lambda: harness.driver(conversation.id) is not None, pilot)
            driver = harness.driver(conversation.id)
            assert driver.config.approval_mode == ApprovalMode.READ_ONLY  # the flag's
            stored = await harness.get_conversation(conversation.id)
            assert stored.agent.model == "openai/second"
            assert driver.config.model == "second"
    finally:
        await harness.close()
