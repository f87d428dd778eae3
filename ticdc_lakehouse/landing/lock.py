"""One landing run per changefeed at a time.

Two concurrent runs would both start at the same landed end and write overlapping segments (and one would delete
the other's temp file as crash debris). An advisory ``flock`` on ``{changefeed}/.landing.lock`` prevents that; the
kernel releases it when the process dies, so a crash never leaves a stale lock behind. An ``s3://`` landing zone
keeps the lock file local, under ``LAKEHOUSE_HOME/locks/landing/`` (why: :mod:`.storage`).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .segments import changefeed_dir
from .storage import storage_of

LOCK_NAME = ".landing.lock"


class LandingBusyError(RuntimeError):
    """Another landing run holds the changefeed's lock."""


@contextmanager
def landing_lock(landing_root: Path | str, changefeed: str) -> Iterator[Path]:
    directory = changefeed_dir(landing_root, changefeed)
    path = storage_of(directory).lock_dir(directory) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LandingBusyError(
                f"another landing run of changefeed {changefeed!r} is in progress (lock {path}); "
                "wait for it to finish"
            ) from None
        yield path
    finally:
        os.close(fd)
