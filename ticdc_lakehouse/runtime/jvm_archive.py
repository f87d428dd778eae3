"""A class-data-sharing archive of the Spark driver JVM, so each run's JVM starts warm on class loading.

Every merge run starts a fresh driver JVM, which loads, parses and verifies some twenty thousand classes (Spark,
Iceberg, Parquet, Arrow) before and during its first jobs: about 4 seconds of a 2-core machine, paid by every
scheduled run however little it has to merge. Java 17 can write the classes a JVM loaded into an archive when it
exits (``-XX:ArchiveClassesAtExit``) and map that archive into later JVMs (``-XX:SharedArchiveFile``), which then
skip the parsing and verification. ``make setup`` trains one with a small merge (``python
scripts/train_class_archive.py``: the trainer runs a whole backfill, so it lives outside the package and the
session factory, which imports this module, never imports the pipeline); every session then uses it.

The archive is only valid for the JVM build and the jars it was trained with: its name carries a digest of both,
so an upgraded JDK, pyspark or Iceberg jar simply finds no archive (and setup trains a new one). A JVM that
cannot use an archive (another host's JDK, a changed class path) ignores it, silently: it starts as it would
without. Set ``spark.class_archive = false`` to never pass one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Iterable, Optional

from ticdc_lakehouse.runtime.jar_dirs import installation_dir, spark_jars_dir

#: set by the trainer: the driver JVM writes its archive to this path when it exits, instead of reading one
DUMP_ENV = "LAKEHOUSE_JVM_ARCHIVE_DUMP"
#: an archive the JVM cannot map is not an error: it starts without, and says nothing
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _java_home() -> Optional[Path]:
    home = os.environ.get("JAVA_HOME")
    if home:
        return Path(home)
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


def _identity(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.st_size}:{int(stat.st_mtime)}"


#: what the trainer's run loads, as a version: raised when a run starts to load classes the archive would miss, so
#: that setup trains a new one where an archive exists already (2: a run reads its decoded events back from Parquet
#: files, ``merge.decoded_files``)
TRAINING = 2


def archive_key(jars: Iterable[str]) -> Optional[str]:
    """A digest of what an archive is valid for: the JVM build (its libjvm), pyspark's jars and ours, and what the
    trainer exercised (``TRAINING``)."""
    home = _java_home()
    if home is None:
        return None
    # the jars are on the driver's class path (spark_session.jar_settings): archives trained with them in
    # spark.jars (before) are for another class path
    parts = ["driver-class-path", f"training {TRAINING}", _identity(home / "lib" / "server" / "libjvm.so")]
    spark_jars = spark_jars_dir()
    if spark_jars is None:
        return None
    parts += sorted(_identity(p) for p in spark_jars.glob("*.jar"))
    parts += sorted(_identity(Path(j)) for j in jars)  # spark.jars order differs by catalog; loading does not
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(jars: Iterable[str]) -> Optional[Path]:
    """Where this installation's archive for these jars lives (inside the virtualenv), None without a JVM."""
    key = archive_key(jars)
    if key is None:
        return None
    return installation_dir() / f"spark-driver-{key}.jsa"


def driver_java_options(jars: Iterable[str], enabled: bool = True) -> str:
    """The driver JVM options for the archive: write one (trainer), read the one that exists, or nothing."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {_QUIET}"
    if not enabled:
        return ""
    path = archive_path(jars)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {_QUIET}"
