"""Who may read what the lakehouse writes: owner-only by default, and never more than the operator's umask allows.

The landing zone holds raw change data (every column of every row, deleted ones too) and the warehouse the
tables, so both are created owner-only unless ``storage.umask`` says otherwise. Two mechanisms, because Spark
does not honour a process umask for files: Hadoop's local file system sets each new file's permissions itself
from ``fs.permissions.umask-mode`` (default 022: 644 files whatever the umask), which Iceberg's HadoopFileIO goes
through for data, delete and metadata files. So the effective umask (the operator's, tightened by
``storage.umask``) is both the process umask (Python-written landing files, directories, the SQLite catalog and
the JVM started afterwards inherit it) and Hadoop's umask-mode.
"""

from __future__ import annotations

import os

from ticdc_lakehouse.runtime.config import Settings

HADOOP_UMASK_KEY = "spark.hadoop.fs.permissions.umask-mode"


def configured_umask(settings: Settings) -> int:
    """``storage.umask`` as a number ("077" -> 0o077)."""
    return settings.storage.umask_bits


def current_umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def effective_umask(settings: Settings) -> int:
    """The operator's umask with ``storage.umask``'s bits added: never looser than either."""
    return current_umask() | configured_umask(settings)


def apply_umask(settings: Settings) -> int:
    """Make :func:`effective_umask` this process's umask (before anything is created); returns it."""
    mask = effective_umask(settings)
    os.umask(mask)
    return mask
