"""Errors that used to lie or crash, run as the installed `bastion` command.

Each case: exit 2, exactly one line on stderr naming the thing (and no
traceback), nothing on stdout, and the store holds exactly what it held before
(no new conversation, entry, run or ledger event), where there is a store.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"

HOLD_WRITE_LOCK = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
print("held", flush=True)
time.sleep(120)  # (the thing under test: a process holding the lock; killed at the end)
"""


def store_digest(home: Path) -> tuple[int, str] | None:
    """(conversations, a digest of every row of every table), read without writing."""
    path = home / "bastion.sqlite"
    if not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: sorted(map(repr, db.execute(f'SELECT * FROM "{t}"'))) for t in sorted(tables)}
        count = db.execute("SELECT count(*) FROM conversations").fetchone()[0]
    finally:
        db.close()
    return count, hashlib.sha256(repr(rows).encode()).hexdigest()


def can_drop_dac_override() -> bool:
    if shutil.which("setpriv") is None:
        return False
    probe = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def unprivileged(cmd: list[str]) -> list[str]:
    """`cmd` run so that file permissions bind, even for root (which would ignore a chmod)."""
    if os.geteuid() != 0:
        return cmd
    if not can_drop_dac_override():
        pytest.skip("running as root without setpriv: permissions cannot be made to bind")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *cmd]


@dataclass
class Case:
    """What one row of the table runs, and what its one line must say."""

    args: list[str]
    says: list[str]
    stdin: bytes = b""
    env: dict[str, str] = field(default_factory=dict)
    wrap: Callable[[list[str]], list[str]] = lambda cmd: cmd
    holder: subprocess.Popen[str] | None = None


def write_config(b, text: bytes) -> None:
    path = Path(b.env["XDG_CONFIG_HOME"]) / "bastion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)


def locked(b, tmp_path: Path) -> Case:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(b.home / "bastion.sqlite")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return Case(["-p", "hi"], ["is locked by pid", str(holder.pid)], holder=holder)


def read_only_home(b, tmp_path: Path) -> Case:
    """`chmod -R a-w` on the home: the directory and the files in it."""
    for path in b.home.iterdir():
        path.chmod(0o444)
    b.home.chmod(0o555)
    return Case(["-p", "hi"], [str(b.home), "read-only", "BASTION_HOME"], wrap=unprivileged)


def read_only_new_home(b, tmp_path: Path) -> Case:
    parent = tmp_path / "locked-up"
    parent.mkdir(mode=0o555)
    home = str(parent / "home")
    return Case(["-p", "hi"], [home, "read-only"], env={"BASTION_HOME": home}, wrap=unprivileged)


def read_only_database(b, tmp_path: Path) -> Case:
    (b.home / "bastion.sqlite").chmod(0o444)
    return Case(["-p", "hi"], ["bastion.sqlite is read-only"], wrap=unprivileged)


def home_is_a_file(b, tmp_path: Path) -> Case:
    home = tmp_path / "a-file"
    home.write_text("not a directory\n")
    return Case(
        ["-p", "hi"],
        [f"{home} is a file, not a directory", "BASTION_HOME"],
        env={"BASTION_HOME": str(home)},
    )


def config(text: bytes, *says: str) -> Callable[..., Case]:
    def make(b, tmp_path: Path) -> Case:
        write_config(b, text)
        return Case(["-p", "hi", "--model", "x/m"], ["config.toml", *says])

    return make


def prompt_argument(b, tmp_path: Path) -> Case:
    return Case(["-p", os.fsdecode(b"caf\xc3\xa9 \xff")], ["the prompt", "not valid UTF-8", "0xff"])


def prompt_on_stdin(b, tmp_path: Path) -> Case:
    return Case(["-p"], ["stdin", "not valid UTF-8", "0xe9"], stdin="caf\xe9".encode("latin-1"))


def export_to_missing_directory(b, tmp_path: Path) -> Case:
    return Case(
        ["export", SID, "-o", "/missing/dir/x.json"], ["/missing/dir/x.json", "does not exist"]
    )


CASES = {
    "locked": locked,
    "read-only-home": read_only_home,
    "read-only-new-home": read_only_new_home,
    "read-only-database": read_only_database,
    "home-is-a-file": home_is_a_file,
    "base-url-5": config(
        b"[providers.x]\nbase_url = 5\n", "[providers.x] base_url must be a string", "integer 5"
    ),
    "headers-string": config(
        b'[providers.x]\nbase_url = "http://127.0.0.1:9/v1"\nheaders = "x"\n',
        "[providers.x] headers must be a table of strings",
    ),
    "idle-timeout-string": config(
        b'stream_idle_timeout = "soon"\n', "stream_idle_timeout must be a number of seconds"
    ),
    "model-integer": config(b"model = 5\n", "model must be a string"),
    "undecodable-config": config(b'theme = "dark"\nmodel = "\xff"\n', "not UTF-8", "line 2"),
    "prompt-argument": prompt_argument,
    "prompt-stdin": prompt_on_stdin,
    "export-missing-dir": export_to_missing_directory,
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_error_is_one_line_exit_2_and_stores_nothing(loopback, bastion, tmp_path, name):
    server = loopback([{"text": "seed"}])
    b = bastion(server)
    seeded = b.run("-p", "--session-id", SID, "seed")
    assert seeded.returncode == 0, seeded.stderr
    before = store_digest(b.home)
    assert before is not None and before[0] == 1

    case = CASES[name](b, tmp_path)
    try:
        out = subprocess.run(
            case.wrap(b.cmd(*case.args)),
            input=case.stdin,
            capture_output=True,
            cwd=b.cwd,
            env=b.env | case.env,
            timeout=60,
        )
    finally:
        if case.holder is not None:
            case.holder.kill()
            case.holder.wait()
        with contextlib.suppress(FileNotFoundError):
            b.home.chmod(0o755)
            (b.home / "bastion.sqlite").chmod(0o644)

    stderr = out.stderr.decode("utf-8", "replace")
    lines = stderr.strip().splitlines()
    assert out.returncode == 2, (out.returncode, stderr)
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("bastion: ")
    for needle in case.says:
        assert needle in lines[0], lines[0]
    assert "corrupt" not in lines[0]
    assert out.stdout == b""
    assert store_digest(b.home) == before
    assert len(server.requests()) == 1  # only the seed reached the model


def test_the_store_is_usable_once_the_lock_is_released(loopback, bastion, tmp_path):
    """The locked case refused without damage: the next run with the lock gone works."""
    server = loopback([{"text": "seed"}, {"text": "after"}])
    b = bastion(server)
    assert b.run("-p", "--session-id", SID, "seed").returncode == 0
    case = locked(b, tmp_path)
    assert case.holder is not None
    case.holder.kill()
    case.holder.wait()
    out = b.run("-p", "--session-id", SID, "again")
    assert out.returncode == 0 and out.stdout == "after\n", out.stderr
