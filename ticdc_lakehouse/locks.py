"""One merge per changefeed at a time, across processes, DAGs and hosts.

Two merges of one changefeed would both read the same watermarks and both commit: the lock makes the second one
wait (up to ``merge.lock_timeout_seconds``) or fail fast with a clear message. With the SQLite catalog (one host)
it is an ``fcntl`` lock on a file under ``LAKEHOUSE_HOME``; with PostgreSQL it is a session advisory lock in the
catalog database, which every host shares.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from contextlib import contextmanager
from typing import Iterator

from ticdc_lakehouse.config import Settings


class LockBusy(RuntimeError):
    """Another process holds the changefeed's merge lock."""


def _lock_id(changefeed: str) -> int:
    return int.from_bytes(hashlib.sha256(f"ticdc-lakehouse:{changefeed}".encode()).digest()[:8], "big", signed=True)


@contextmanager
def _file_lock(settings: Settings, changefeed: str, timeout: float) -> Iterator[None]:
    directory = settings.home / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{changefeed}.lock"
    handle = open(path, "a+")
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip() or "unknown"
                    raise LockBusy(
                        f"another merge of changefeed {changefeed!r} is running ({holder}); "
                        f"it was not started twice. Lock file: {path}"
                    ) from None
                time.sleep(0.5)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        handle.flush()
        yield
    finally:
        handle.close()


@contextmanager
def _postgres_lock(settings: Settings, changefeed: str, timeout: float) -> Iterator[None]:
    import psycopg2

    from ticdc_lakehouse.spark_session import sqlalchemy_uri

    dsn = sqlalchemy_uri(settings).replace("postgresql+psycopg2://", "postgresql://")
    connection = psycopg2.connect(dsn)
    connection.autocommit = True
    deadline = time.monotonic() + timeout
    try:
        with connection.cursor() as cursor:
            while True:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (_lock_id(changefeed),))
                if cursor.fetchone()[0]:
                    break
                if time.monotonic() >= deadline:
                    raise LockBusy(f"another merge of changefeed {changefeed!r} is running (PostgreSQL advisory lock)")
                time.sleep(0.5)
        yield
    finally:
        connection.close()  # ends the session, releasing the advisory lock


@contextmanager
def changefeed_lock(settings: Settings, changefeed: str) -> Iterator[None]:
    timeout = float(settings.merge.get("lock_timeout_seconds", 0) or 0)
    if settings.catalog_uri.startswith("jdbc:postgresql:"):
        with _postgres_lock(settings, changefeed, timeout):
            yield
    else:
        with _file_lock(settings, changefeed, timeout):
            yield
