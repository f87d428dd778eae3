"""A real PostgreSQL server for catalog tests: Debian's postgresql-15, started in a temporary directory on a
free loopback port, stopped at the end. Skips (with the reason) only when the server binaries are absent."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="session")
def postgres_url():
    """``(jdbc_uri, user, password)`` of a fresh database ``lake`` on a private server."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (Debian postgresql-15) are not installed")
    # the server runs as the postgres user: pytest's own tmp dirs (mode 700, root) are not reachable for it
    base = Path(tempfile.mkdtemp(prefix="lakehouse-pg-"))
    os.chmod(base, 0o755)
    data = base / "data"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(data, "postgres")
    password_file = base / "pw"
    password_file.write_text("lakepw\n")
    os.chmod(password_file, 0o644)
    subprocess.run(_as_postgres([initdb, "-D", str(data), "-U", "lake", "--pwfile", str(password_file),
                                 "--auth", "md5", "-E", "UTF8"]), check=True, capture_output=True)
    port = _free_port()
    log = base / "log"
    subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-l", str(log), "-w", "-o",
                                 f"-h 127.0.0.1 -p {port} -k {base}", "start"]), check=True, capture_output=True)
    try:
        env = dict(os.environ, PGPASSWORD="lakepw")
        for _ in range(50):
            done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "lake", "-d", "postgres", "-c",
                                   "CREATE DATABASE lake"], env=env, capture_output=True)
            if done.returncode == 0:
                break
            time.sleep(0.2)
        yield f"jdbc:postgresql://127.0.0.1:{port}/lake", "lake", "lakepw"
    finally:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def postgres_available() -> bool:
    return bool(_bin("initdb") and _bin("pg_ctl")) and Path("/usr/share/java/postgresql.jar").exists()
