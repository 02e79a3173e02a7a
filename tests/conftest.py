from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runtime", "tools", "tui", "themes", "tests")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the project once, in the run's first process, before any test starts
    one of its own: the suite starts a thousand-odd `bastion`, harness and helper
    processes, and where PYTHONDONTWRITEBYTECODE is set (CI's containers set it) Python
    never writes a module's bytecode, so each of them compiled every module it imported
    again, about 0.16 s of CPU each for `bastion -p`. A user's install has the bytecode
    after its first run; so, now, has the suite's. (`py_compile` writes it whatever
    the variable says; in an xdist worker, `workerinput` is set and this is skipped.)"""
    # Each worker's collection imports every test module through pytest's assertion
    # rewriting, which keeps its result only where bytecode may be written: so that the
    # six workers share what the first of them rewrote, rather than each rewriting the
    # whole suite again (42 s of CPU before a test runs, against 25), it may here.
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):
        return
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


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


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server per test session (per xdist worker): tests/pgserver.py."""
    from tests.pgserver import start_server

    server = start_server()
    if isinstance(server, str):
        pytest.skip(server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty PostgreSQL database for this test; its URL."""
    return pg_server.database()


@pytest.fixture
def pg_store_url(pg_server):
    """A fresh PostgreSQL database with the store's schema already made (as a team's is
    after its first use), for tests of what the store keeps rather than of its
    migrations (tests/runtime/test_pg_store.py has those, on empty databases)."""
    return pg_server.database(migrated=True)


#: Each test that opts in (`pytestmark = pytest.mark.usefixtures("store_kind")`) runs on
#: both stores; `@pytest.mark.sqlite_only` keeps one that reads SQLite's file to SQLite.
STORES = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc):
    if "store_kind" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("store_kind", STORES[:1] if only else STORES, indirect=True)


@pytest.fixture
def store_kind(request, tmp_path):
    """This test's store: "sqlite" (the file in tmp_path) or "postgresql" (a fresh
    database of the session's server, which runtime tests' `open_harness` opens for
    every harness this test opens in `tmp_path`: tests/runtime/helpers.py)."""
    from tests.runtime import helpers

    if request.param == "postgresql":
        helpers.STORES[str(tmp_path)] = request.getfixturevalue("pg_store_url")
        request.addfinalizer(lambda: helpers.STORES.pop(str(tmp_path), None))
    return request.param
