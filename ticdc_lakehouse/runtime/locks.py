"""One merge per changefeed at a time, across processes, DAGs and hosts.

Two merges of one changefeed would both read the same watermarks and both commit: the lock makes the second one
wait (up to ``merge.lock_timeout_seconds``) or fail fast with a clear message. With the SQLite catalog (one host)
it is an ``fcntl`` lock on a file under ``LAKEHOUSE_HOME``; with PostgreSQL it is a session advisory lock in the
catalog database, which every host shares.

Both die with the Python process that took them, but the Spark driver JVM does not: after a SIGKILL of the Python
driver it lives on for a second or two (2.3 s measured) and finishes the Iceberg commits already under way (the
final flush commits several tables at once). A rerun started in that window would read watermarks the dying run
is still moving and collide with its catalog writes. So the JVM holds a lock of its own (:func:`driver_lock`,
a Java file lock, released by the merge's end or by the JVM's exit), and a run waits for it before it reads any
state.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from contextlib import contextmanager, nullcontext
from typing import Iterator

from ticdc_lakehouse.runtime.config import Settings


class LockBusy(RuntimeError):
    """Another process holds the changefeed's merge lock."""


def _lock_id(changefeed: str) -> int:
    return int.from_bytes(hashlib.sha256(f"ticdc-lakehouse:{changefeed}".encode()).digest()[:8], "big", signed=True)


def _busy(purpose: str, changefeed: str, holder: str, where: str) -> LockBusy:
    """One line: what was not started, who holds the lock (merge, maintenance, create-tables ...), where."""
    return LockBusy(f"{purpose} of changefeed {changefeed!r} not started: another {holder} is running and holds "
                    f"its lock ({where}); one at a time: rerun when it has ended")


@contextmanager
def _file_lock(settings: Settings, changefeed: str, timeout: float, purpose: str) -> Iterator[None]:
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
                    holder = handle.read().strip() or "process"
                    raise _busy(purpose, changefeed, holder, f"lock file {path}") from None
                time.sleep(0.5)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{purpose} (pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')})")
        handle.flush()
        yield
    finally:
        handle.close()


#: who holds a changefeed's advisory lock: the application name of the session holding it
_ADVISORY_HOLDER = (
    "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.classid::bigint = (%s >> 32) & 4294967295 AND l.objid::bigint = %s & 4294967295"
)


@contextmanager
def _postgres_lock(settings: Settings, changefeed: str, timeout: float, purpose: str) -> Iterator[None]:
    import psycopg2

    from ticdc_lakehouse.runtime.spark_session import sqlalchemy_uri

    dsn = sqlalchemy_uri(settings).replace("postgresql+psycopg2://", "postgresql://")
    # the session's name says what holds the lock, so a second one can say it
    connection = psycopg2.connect(dsn, application_name=f"ticdc-lakehouse {purpose} (pid {os.getpid()})")
    connection.autocommit = True
    deadline = time.monotonic() + timeout
    try:
        with connection.cursor() as cursor:
            while True:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (_lock_id(changefeed),))
                if cursor.fetchone()[0]:
                    break
                if time.monotonic() >= deadline:
                    lock_id = _lock_id(changefeed)
                    cursor.execute(_ADVISORY_HOLDER, (lock_id, lock_id))
                    row = cursor.fetchone()
                    holder = (row[0] or f"PostgreSQL session {row[1]}") if row else "process"
                    raise _busy(purpose, changefeed, holder.removeprefix("ticdc-lakehouse "),
                                "PostgreSQL advisory lock")
                time.sleep(0.5)
        yield
    finally:
        connection.close()  # ends the session, releasing the advisory lock


#: how long a run waits for the JVM of a killed run to exit (it takes seconds; a live one would hold the main lock)
DRIVER_EXIT_WAIT_S = 60.0


@contextmanager
def driver_lock(spark, settings: Settings, changefeed: str, timeout: float = DRIVER_EXIT_WAIT_S) -> Iterator[None]:
    """The changefeed's lock held by this Spark driver JVM (see the module doc): waits up to ``timeout`` for the
    JVM of a killed run to exit. It guards this host's drivers, which is where a killed run's JVM lives on."""
    from py4j.protocol import Py4JJavaError

    directory = settings.home / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{changefeed}.driver.lock"
    handle = spark._jvm.java.io.RandomAccessFile(str(path), "rw")
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                lock = handle.getChannel().tryLock()
            except Py4JJavaError as exc:  # OverlappingFileLockException: this JVM holds it already
                raise LockBusy(
                    f"this Spark driver already merges changefeed {changefeed!r} (lock file {path})"
                ) from exc
            if lock is not None:
                break
            if time.monotonic() >= deadline:
                raise LockBusy(f"the Spark driver of an earlier merge of changefeed {changefeed!r} still holds {path} "
                               f"after {timeout:.0f}s; stop that JVM (a leftover of a killed run) and rerun")
            time.sleep(0.2)
        try:
            yield
        finally:
            lock.release()
    finally:
        handle.close()


@contextmanager
def changefeed_lock(settings: Settings, changefeed: str, spark=None, purpose: str = "merge") -> Iterator[None]:
    """The changefeed's lock; with ``spark`` also its :func:`driver_lock` (a caller that takes the lock before
    Spark starts takes the driver lock on its own once it has a session). ``purpose`` (merge, maintenance,
    create-tables) is recorded with the lock, so whoever finds it taken is told what holds it."""
    timeout = settings.merge.lock_timeout_seconds
    if settings.catalog_uri.startswith("jdbc:postgresql:"):
        process_lock = _postgres_lock(settings, changefeed, timeout, purpose)
    else:
        process_lock = _file_lock(settings, changefeed, timeout, purpose)
    with process_lock, (driver_lock(spark, settings, changefeed) if spark is not None else nullcontext()):
        yield
