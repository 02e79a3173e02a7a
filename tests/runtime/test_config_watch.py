"""Live configuration: edits to config.toml are seen without a restart; a broken edit keeps
the last good config and says which file and key are wrong. Timing-based: looped 50 times."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from runtime import ConfigChange, ConfigWatcher
from runtime.config.approvals import ApprovalMode
from runtime.config.trust import TrustState, set_trust

TIMEOUT = 10.0


class Seen:
    def __init__(self, watcher: ConfigWatcher) -> None:
        self.changes: list[ConfigChange] = []
        watcher.subscribe(self.changes.append)

    async def until(self, predicate: Callable[[ConfigChange], bool]) -> ConfigChange:
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while True:
            for change in self.changes:
                if predicate(change):
                    return change
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no such change; saw {self.changes}")
            await asyncio.sleep(0.02)  # (poll interval)


def write(path: Path, text: str) -> None:
    """Write as editors do: a temporary file renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def setup(tmp_path: Path) -> tuple[ConfigWatcher, Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    user = tmp_path / "config" / "bastion" / "config.toml"
    write(user, 'theme = "bastion-dark"\n')
    set_trust(work, TrustState.TRUSTED, env)  # its project file applies
    return ConfigWatcher(str(work), env), user, work / ".bastion" / "config.toml"


async def test_an_edit_is_picked_up(tmp_path) -> None:
    watcher, user, _ = setup(tmp_path)
    seen = Seen(watcher)
    assert watcher.current.theme == "bastion-dark"
    async with watcher:
        await asyncio.wait_for(watcher.watching.wait(), TIMEOUT)
        write(
            user,
            'theme = "bastion-light"\nmodel = "ollama/llama3.2"\napproval_mode = "auto-edit"\n',
        )
        change = await seen.until(lambda c: c.config.theme == "bastion-light")
    assert change.error is None
    assert change.changed == {"theme", "model", "approval_mode"}
    assert watcher.current.model == "ollama/llama3.2"
    assert watcher.current.approval_mode == ApprovalMode.AUTO_EDIT


async def test_a_broken_edit_keeps_the_last_good_config_and_names_file_and_key(tmp_path) -> None:
    watcher, user, _ = setup(tmp_path)
    seen = Seen(watcher)
    async with watcher:
        await asyncio.wait_for(watcher.watching.wait(), TIMEOUT)
        write(user, 'theme = "bastion-light"\n')
        await seen.until(lambda c: c.config.theme == "bastion-light")
        write(user, 'theme = "bastion-dark"\napproval_mode = "sometimes"\n')
        broken = await seen.until(lambda c: c.error is not None)
        assert watcher.current.theme == "bastion-light"  # the last good one
        assert broken.config.theme == "bastion-light"
        assert str(user) in broken.error.message and "approval_mode" in broken.error.message
        write(user, "theme = [1]\n")
        typed = await seen.until(lambda c: c.error is not None and "theme" in c.error.message)
        assert "must be a string" in typed.error.message
        write(user, 'theme = "bastion-dark"\n')
        fixed = await seen.until(lambda c: c.recovered)
    assert fixed.error is None and fixed.config.theme == "bastion-dark"
    assert watcher.current.theme == "bastion-dark" and watcher.error is None


async def test_project_file_in_a_new_folder_is_seen_and_a_bad_model_names_its_file(
    tmp_path,
) -> None:
    watcher, _, project = setup(tmp_path)
    seen = Seen(watcher)
    async with watcher:
        await asyncio.wait_for(watcher.watching.wait(), TIMEOUT)
        write(project, 'model = "mistral/large"\n')  # .bastion/ did not exist
        bad = await seen.until(lambda c: c.error is not None)
        assert bad.error.message.startswith(f"{project}: model 'mistral/large'")
        assert "ollama/" in (bad.error.hint or "")
        write(project, 'model = "llamacpp/qwen"\n')
        good = await seen.until(lambda c: c.error is None and "model" in c.changed)
    assert good.config.model == "llamacpp/qwen" and good.recovered


async def test_reload_without_a_change_tells_nobody(tmp_path) -> None:
    watcher, _, _ = setup(tmp_path)
    seen = Seen(watcher)
    assert await watcher.reload() is None
    assert seen.changes == []
