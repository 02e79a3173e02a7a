"""A real PostgreSQL server for the tests, started by the suite itself: `initdb` into a
temporary folder, `pg_ctl start` listening only on a Unix socket there, one server per
test session (per xdist worker), a fresh database per test.

The binaries are Debian's `postgresql` package (/usr/lib/postgresql/*/bin) or any on
PATH; without them the PostgreSQL tests skip with one line. PostgreSQL refuses to run
as root: as root the server runs as `nobody` (runuser), its folder given to it.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PgServer", "find_binaries", "start_server"]

USER = "bastion"  # the database superuser initdb makes
MISSING = (
    "PostgreSQL server binaries not found (initdb, pg_ctl): install Debian's postgresql "
    "package (apt-get install postgresql) to run the PostgreSQL store tests"
)


def find_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: the newest /usr/lib/postgresql/*/bin, or PATH's."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


class PgServer:
    """A running server; `database()` makes a fresh database and returns its URL."""

    def __init__(self, bin_dir: Path, root: Path, as_user: list[str], fsync: bool = False) -> None:
        self.fsync = fsync  # (the tests' server need not survive a power cut; a benchmark's must)
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self._as_user = as_user
        self._numbers = itertools.count(1)
        self._template: str | None = None  # the migrated template database, once made

    def url(self, dbname: str, password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://{USER}{secret}@/{dbname}?host={self.root}"

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as_user, *argv], capture_output=True, text=True, timeout=60, check=False
        )

    def start(self) -> None:
        initdb = self._run(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", USER,
            "--no-sync", "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed: {initdb.stderr.strip()}")
        options = f"-k {self.root} -c listen_addresses='' -c max_connections=300"
        if not self.fsync:
            options += " -F"
        started = self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.root / "log"), "-w", "-t", "60", "start",
        )  # fmt: skip
        if started.returncode != 0:
            log = (
                (self.root / "log").read_text(errors="replace")
                if (self.root / "log").exists()
                else ""
            )
            raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {log[-500:]}")

    def stop(self) -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def database(self, *, migrated: bool = False) -> str:
        """A new database; its URL. Empty, or (`migrated`) a copy of one the store's own
        migrations made once for this server: the schema a team's database has after
        its first use, without each test's first open migrating it again (~80 ms of
        the server's CPU each, for a few hundred tests that test something else)."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._numbers)}"
        template = f" TEMPLATE {self._migrated()}" if migrated else ""
        with psycopg.connect(self.url("postgres"), autocommit=True) as admin:
            # From 15 on, a new database is by default written to the WAL whole (7 MB of
            # template, ~55 ms of the server's CPU); a file copy and a checkpoint (no
            # fsync here) cost ~25 ms, and the suite makes a few hundred.
            copy = " STRATEGY = FILE_COPY" if admin.info.server_version >= 150000 else ""
            admin.execute(f'CREATE DATABASE "{name}"{template}{copy}')
        return self.url(name)

    def _migrated(self) -> str:
        """The name of this server's migrated template database, made on first use by
        the store's own migrations (runtime.store.pg.schema.prepare)."""
        if self._template is None:
            import psycopg

            from runtime.store.pg.schema import prepare

            name = "migrated_template"
            with psycopg.connect(self.url("postgres"), autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(self.url(name), autocommit=True) as conn:
                prepare(conn, name)
            self._template = name
        return self._template

    def execute(self, url: str, sql: str) -> list[tuple[object, ...]]:
        """Run `sql` on the database at `url` (as the tests' own client, autocommit)."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []


def start_server(fsync: bool = False) -> PgServer | str:
    """A started server (without fsync unless asked), or the one line saying why there
    is none."""
    bin_dir = find_binaries()
    if bin_dir is None:
        return MISSING
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install -e '.[test]' (or '.[postgresql]')"
    root = Path(tempfile.mkdtemp(prefix="bpg", dir="/tmp"))  # (a socket path must be short)
    as_user: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser") or shutil.which("setpriv")
        if runuser is None:
            return "running as root without runuser or setpriv: PostgreSQL will not run as root"
        as_user = [runuser, "-u", "nobody", "--"] if runuser.endswith("runuser") else [
            runuser, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
        ]  # fmt: skip
        shutil.chown(root, "nobody")
    server = PgServer(bin_dir, root, as_user, fsync)
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(root, ignore_errors=True)
        return f"the PostgreSQL test server did not start: {exc}"
    return server
