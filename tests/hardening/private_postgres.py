"""A private PostgreSQL server for tests that restart the server for real.

The shared server on 127.0.0.1:5432 serves every other suite, so it is never
restarted; a test that needs a real restart gets its own cluster instead:
``initdb`` into a fresh directory, the same PostgreSQL binaries as the shared
server, its own port, started and stopped with ``pg_ctl``. When the process
runs as root, the cluster runs as the ``postgres`` OS user (PostgreSQL refuses
to run as root).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def _bindir() -> Path | None:
    """The directory of ``pg_ctl`` and ``initdb``: ``pg_config --bindir``, else Debian's layout."""
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip())
        if (found / "initdb").exists():
            return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    return None


def _free_port() -> int:
    from tests.integration.helpers import free_port

    return free_port()


class PrivatePostgres:
    """One private cluster: :meth:`start`, :meth:`restart`, :meth:`stop`; :attr:`url` of its ``postgres`` database."""

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="dfa-private-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            os.chown(self.root, pwd.getpwnam(self.user).pw_uid, -1)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    def url_of(self, dbname: str = "postgres") -> str:
        """The URL of database ``dbname`` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    @property
    def url(self) -> str:
        return self.url_of()

    @property
    def running(self) -> bool:
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "status"]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, timeout=30).returncode == 0

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        # stdout/stderr to a file, never a pipe: the postmaster inherits them and would hold a pipe open.
        with open(self.root / f"{tool}.out", "ab") as out:
            subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=True, timeout=120)

    def _pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", *args)

    def start(self) -> None:
        self._pg_ctl("start")

    def restart(self) -> None:
        """Stop the server (``-m fast``: every session is ended, open transactions roll back) and start it again."""
        self._pg_ctl("-m", "fast", "restart")

    def stop(self) -> None:
        self._pg_ctl("-m", "immediate", "stop")

    def cleanup(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)
