"""A real PostgreSQL for the tests: Debian's binaries, started in a temporary directory, then stopped.

Used by ``make test`` (``python tests/postgres_server.py --install`` installs Debian's
``postgresql`` package when no server binaries are found, as root) and by ``tests/conftest.py``
(the session fixture ``postgres_server``). PostgreSQL refuses to run as root, and CI runs as root:
then ``initdb`` and ``pg_ctl`` run as the ``postgres`` system user (``runuser -u postgres --``),
in a directory handed to that user. The server listens on 127.0.0.1 on a free port and on a
socket in its own directory (``-k``), with ``trust`` authentication for local test connections
only; each test gets a database of its own (:meth:`PostgresServer.new_database`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

from apt_package import apt_install

HOW_TO_FIX = ("Install PostgreSQL's server and run `make test` again: `sudo apt-get install postgresql` "
              "(Debian/Ubuntu). `make test` does this itself when run as root.")


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``pg_ctl``, else
    the directory of an ``initdb`` on PATH; None when there is none."""
    root = Path("/usr/lib/postgresql")
    versions = sorted((p for p in root.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
                      key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parent.name.split(".")], reverse=True)
    if versions:
        return versions[0]
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb and shutil.which("pg_ctl") else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    bin_dir: Path
    base: Path
    port: int
    as_user: list[str]
    fsync: bool = True
    _names: count = field(default_factory=lambda: count(1))

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.base)

    def start(self) -> None:
        done = self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                         "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.fsync:
            options += " -c fsync=off -c full_page_writes=off"
        done = self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.base / "server.log"),
                         "-o", options, "-w", "-t", "60", "start")
        if done.returncode != 0:
            log = (self.base / "server.log").read_text() if (self.base / "server.log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{log}")

    def stop(self) -> None:
        if self.data.exists():
            # immediate: no shutdown checkpoint, since the data directory is removed next.
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                      timeout=60)
        shutil.rmtree(self.base, ignore_errors=True)

    def new_database(self) -> str:
        """Create an empty database and return its SQLAlchemy URL."""
        import psycopg

        name = f"workbench_test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # a name made here, not a value from outside
        return self.url(name)


def start_postgres(fsync: bool = True) -> PostgresServer:
    """Start a PostgreSQL server of its own in a temporary directory.

    Parameters
    ----------
    fsync : bool
        False for the tests: CREATE DATABASE and commits then do not wait for the disk. What is
        committed still reaches the kernel before the client hears so; only the machine
        crashing, which no test does, could lose it. The benchmarks keep PostgreSQL's default.

    Raises
    ------
    FileNotFoundError
        No PostgreSQL server binaries (the message says how to install them).
    RuntimeError
        ``initdb`` or ``pg_ctl`` failed (with their output).
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError(f"No PostgreSQL server (initdb, pg_ctl) under /usr/lib/postgresql or on PATH. "
                                f"{HOW_TO_FIX}")
    base = Path(tempfile.mkdtemp(prefix="workbench-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL will not run as root: run it as its own system user
        import pwd

        user = pwd.getpwnam("postgres")
        os.chown(base, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    server = PostgresServer(bin_dir, base, free_port(), as_user, fsync)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server


def install() -> int:
    """Install Debian's ``postgresql`` when no server binaries are found; 0 when there is one."""
    if find_bin_dir() is not None:
        return 0
    if not apt_install("postgresql", "postgres_server", HOW_TO_FIX):
        return 1
    if find_bin_dir() is None:
        print(f"postgres_server: installed postgresql but found no initdb. {HOW_TO_FIX}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if "--install" in sys.argv[1:]:
        sys.exit(install())
    found = find_bin_dir()
    print(found or "none")
    sys.exit(0 if found else 1)
