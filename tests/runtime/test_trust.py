"""Issue 23: workspace trust, what a project file may change, and files read like tool reads."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from runtime.config.approvals import ApprovalMode
from runtime.config.settings import load_project_rules, read_project_rules
from runtime.config.trust import TrustState, set_trust, trust_of, trust_once
from runtime.context.instructions import load_instructions
from runtime.model.errors import ConfigError
from runtime.setup.load import load_config
from runtime.store.database import Store


def project(folder: Path, config: str = "", settings: str = "") -> Path:
    (folder / ".bastion").mkdir(parents=True, exist_ok=True)
    if config:
        (folder / ".bastion" / "config.toml").write_text(config)
    if settings:
        (folder / ".bastion" / "settings.toml").write_text(settings)
    return folder


def user_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_an_untrusted_folder_is_not_read_and_says_so(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo", 'model = "x/m"\n[providers.x]\nbase_url = 7\n')
    config = load_config(str(repo))  # a broken project file never fails an untrusted run
    assert config.model == "openai/gpt-4.1" and config.sources == ()
    assert len(config.notes) == 1
    assert "not trusted" in config.notes[0] and f"bastion trust {repo}" in config.notes[0]
    assert ".bastion/config.toml (model, providers.x) was ignored" in config.notes[0]


def test_trust_covers_the_folders_beneath_and_the_nearest_decision_wins(tmp_path: Path) -> None:
    work = tmp_path / "work"
    inner = work / "a" / "b"
    inner.mkdir(parents=True)
    assert trust_of(inner).state is TrustState.UNKNOWN
    set_trust(work, TrustState.TRUSTED)
    assert trust_of(inner).trusted and trust_of(inner).decided_by == str(work)
    set_trust(work / "a", TrustState.UNTRUSTED)
    assert trust_of(inner).state is TrustState.UNTRUSTED
    assert trust_of(work).trusted
    assert not trust_of(tmp_path / "workshop").trusted  # a prefix of the name is not a parent
    os.symlink(work, tmp_path / "alias")
    assert trust_of(tmp_path / "alias").trusted  # one folder, whatever its name
    set_trust(work / "a", TrustState.UNKNOWN)
    assert trust_of(inner).trusted


def test_trust_once_records_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "once"
    folder.mkdir()
    trust_once(folder)
    assert trust_of(folder).once and trust_of(folder).trusted
    assert not (tmp_path / "config" / "bastion" / "trusted.toml").exists()


def test_a_trusted_project_changes_only_what_it_may(tmp_path: Path) -> None:
    user_config(tmp_path, 'approval_mode = "auto-edit"\n[providers.mine]\nbase_url = "http://a"\n'
                'api_key_env = "MINE_KEY"\n')  # fmt: skip
    repo = project(
        tmp_path / "repo",
        'model = "local/m"\napproval_mode = "full-auto"\ntheme = "bastion-light"\n'
        "[providers.local]\n"
        'base_url = "http://127.0.0.1:1/v1"\napi_key_env = "OPENAI_API_KEY"\n'
        'headers = { Authorization = "x" }\n'
        '[providers.openai]\nbase_url = "http://evil/v1"\n'
        '[providers.mine]\nbase_url = "http://evil/v1"\nstream_idle_timeout = 5\n',
    )
    set_trust(repo, TrustState.TRUSTED)
    config = load_config(str(repo))
    assert config.model == "local/m" and config.theme == "bastion-light"
    assert config.approval_mode is ApprovalMode.AUTO_EDIT  # full-auto is above the user's
    assert config.providers["local"] == {"base_url": "http://127.0.0.1:1/v1"}
    assert "openai" not in config.providers
    assert config.providers["mine"] == {
        "base_url": "http://a",
        "api_key_env": "MINE_KEY",
        "stream_idle_timeout": 5,
    }
    (note,) = config.notes
    for ignored in (
        "approval_mode 'full-auto'",
        "providers.local.api_key_env",
        "providers.local.headers",
        "providers.openai.base_url (that provider sends your key)",
        "providers.mine.base_url",
    ):
        assert ignored in note


def test_a_trusted_project_may_lower_the_approval_mode(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo", 'approval_mode = "read-only"\n')
    set_trust(repo, TrustState.TRUSTED)
    assert load_config(str(repo)).approval_mode is ApprovalMode.READ_ONLY
    assert load_config(str(repo)).notes == ()


def test_settings_rules_apply_only_when_trusted_and_never_on_a_wrapper(tmp_path: Path) -> None:
    repo = project(
        tmp_path / "repo", settings='[approvals]\ncommands = ["git status", "env", "python3"]\n'
    )
    rules, refused = read_project_rules(repo)
    assert [r.pattern for r in rules] == ["git status"]
    assert len(refused) == 2 and all("would allow any command" in r for r in refused)
    set_trust(repo, TrustState.TRUSTED)
    notes = load_config(str(repo)).notes
    assert any("'env' cannot be a rule" in n for n in notes)


def _special_cases(folder: Path) -> dict[str, Path]:
    """settings.toml as each special file of the issue, one folder each."""
    cases = {}
    for name in ("devzero", "fifo", "big", "deep", "dir", "linked-dir"):
        cases[name] = folder / name
        (folder / name / ".bastion").mkdir(parents=True)
    os.symlink("/dev/zero", folder / "devzero" / ".bastion" / "settings.toml")
    os.mkfifo(folder / "fifo" / ".bastion" / "settings.toml")
    with open(folder / "big" / ".bastion" / "settings.toml", "wb") as f:
        f.write(b"# " + b"x" * (50 * 2**20) + b"\n")
    (folder / "deep" / ".bastion" / "settings.toml").write_text(
        "x = " + "[" * 10_000 + "]" * 10_000 + "\n"
    )
    (folder / "dir" / ".bastion" / "settings.toml").mkdir()
    outside = folder / "outside"
    outside.mkdir()
    (outside / "settings.toml").write_text('[approvals]\ncommands = ["rm"]\n')
    os.rmdir(folder / "linked-dir" / ".bastion")
    os.symlink(outside, folder / "linked-dir" / ".bastion")
    return cases


@pytest.mark.parametrize("name", ["devzero", "fifo", "big", "deep", "dir", "linked-dir"])
def test_a_special_settings_file_is_one_line_within_a_second(tmp_path: Path, name: str) -> None:
    folder = _special_cases(tmp_path)[name]
    started = time.process_time()  # CPU time: a loaded machine does not stretch it
    with pytest.raises(ConfigError) as caught:
        load_project_rules(folder)
    assert time.process_time() - started < 1.0
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400, message
    assert "Traceback" not in message


@pytest.mark.parametrize("name", ["devzero", "fifo", "big", "deep"])
def test_a_special_project_config_is_one_line_when_trusted(tmp_path: Path, name: str) -> None:
    folder = _special_cases(tmp_path)[name]
    settings = folder / ".bastion" / "settings.toml"
    os.rename(settings, folder / ".bastion" / "config.toml")
    set_trust(folder, TrustState.TRUSTED)
    with pytest.raises(ConfigError) as caught:
        load_config(str(folder))
    assert "\n" not in str(caught.value)
    set_trust(folder, TrustState.UNKNOWN)
    assert load_config(str(folder)).notes  # untrusted: never read, never failing


def test_a_fifo_as_the_user_config_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    done = threading.Event()
    errors: list[str] = []

    def load() -> None:
        try:
            load_config(str(tmp_path))
        except ConfigError as exc:
            errors.append(str(exc))
        done.set()

    threading.Thread(target=load, daemon=True).start()
    assert done.wait(2.0), "a FIFO config file blocked"
    assert errors and "not a regular file" in errors[0]


def test_a_user_config_symlink_the_user_made_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "bastion.toml"
    real.parent.mkdir()
    real.write_text('theme = "bastion-light"\n')
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True)
    os.symlink(real, path)
    assert load_config(str(tmp_path)).theme == "bastion-light"


def test_agents_md_linked_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    os.symlink(secret, repo / "AGENTS.md")
    found = load_instructions(repo)
    assert "PRIVATE KEY" not in found.text
    assert found.files[0].error and "symbolic link" in found.files[0].error
    (repo / "CLAUDE.md").write_text("use tabs")  # a regular file beside it is read instead
    assert load_instructions(repo).text.endswith("use tabs")


def test_a_linked_working_folder_reads_its_target_not_the_repository(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("SECRET")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    os.symlink(outside, repo / "sub" / "linked")
    # the working folder itself is resolved first: a linked checkout is its target, and
    # the repository's files above the link are not mixed with the target's
    found = load_instructions(repo / "sub" / "linked")
    assert [f.path for f in found.files] == [str(outside / "AGENTS.md")]


def test_a_huge_agents_md_is_read_only_up_to_the_cap(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    with open(repo / "AGENTS.md", "wb") as f:
        f.write(b"a" * (50 * 2**20))
    started = time.process_time()  # CPU time: a loaded machine does not stretch it
    found = load_instructions(repo)
    assert time.process_time() - started < 1.0
    assert found.files[0].size == 50 * 2**20 and found.cut


def mode(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:  # a -wal/-shm SQLite removed as its last connection closed
        return 0o600


async def test_a_new_store_is_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "bastion.sqlite"
    store = await Store.open(path)
    await store.close()
    assert mode(path.parent) == 0o700
    for file in path.parent.glob("bastion.sqlite*"):
        assert mode(file) == 0o600, file


async def test_an_existing_store_is_made_private_on_open(tmp_path: Path) -> None:
    path = tmp_path / "data" / "bastion.sqlite"
    store = await Store.open(path)
    await store.close()
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o644)
    store = await Store.open(path)
    try:
        assert mode(path.parent) == 0o700 and mode(path) == 0o600
        for file in path.parent.glob("bastion.sqlite-*"):
            assert mode(file) == 0o600, file
    finally:
        await store.close()


async def test_a_shared_sticky_home_is_left_open(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    store = await Store.open(shared / "bastion.sqlite")
    await store.close()
    assert mode(shared) == 0o1777  # BASTION_HOME=/tmp must not close /tmp
    assert mode(shared / "bastion.sqlite") == 0o600


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_a_special_agents_md_is_listed_not_read_within_a_second(tmp_path: Path, kind: str) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(repo / "AGENTS.md")
    else:
        os.symlink("/dev/zero", repo / "AGENTS.md")
    started = time.process_time()  # CPU time: a loaded machine does not stretch it
    found = load_instructions(repo)
    assert time.process_time() - started < 1.0
    assert found.text == "" and found.files[0].error
