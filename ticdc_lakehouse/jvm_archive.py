"""A class-data-sharing archive of the Spark driver JVM, so each run's JVM starts warm on class loading.

Every merge run starts a fresh driver JVM, which loads, parses and verifies some twenty thousand classes (Spark,
Iceberg, Parquet, Arrow) before and during its first jobs: about 4 seconds of a 2-core machine, paid by every
scheduled run however little it has to merge. Java 17 can write the classes a JVM loaded into an archive when it
exits (``-XX:ArchiveClassesAtExit``) and map that archive into later JVMs (``-XX:SharedArchiveFile``), which then
skip the parsing and verification. ``make setup`` trains one with a small merge (``python -m
ticdc_lakehouse.jvm_archive``); every session of this installation then uses it.

The archive is only valid for the JVM build and the jars it was trained with: its name carries a digest of both,
so an upgraded JDK, pyspark or Iceberg jar simply finds no archive (and setup trains a new one). A JVM that
cannot use an archive (another host's JDK, a changed class path) ignores it, silently: it starts as it would
without. Set ``spark.class_archive = false`` to never pass one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Optional

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


def archive_key(jars: Iterable[str]) -> Optional[str]:
    """A digest of what an archive is valid for: the JVM build (its libjvm), pyspark's jars and ours."""
    home = _java_home()
    if home is None:
        return None
    # the jars are on the driver's class path (spark_session.jar_settings): archives trained with them in
    # spark.jars (before) are for another class path
    parts = ["driver-class-path", _identity(home / "lib" / "server" / "libjvm.so")]
    try:
        import pyspark

        spark_jars = Path(pyspark.__file__).parent / "jars"
        parts += sorted(_identity(p) for p in spark_jars.glob("*.jar"))
    except ImportError:
        return None
    parts += sorted(_identity(Path(j)) for j in jars)  # spark.jars order differs by catalog; loading does not
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(jars: Iterable[str]) -> Optional[Path]:
    """Where this installation's archive for these jars lives (inside the virtualenv), None without a JVM."""
    key = archive_key(jars)
    if key is None:
        return None
    return Path(sys.prefix) / "share" / "ticdc-lakehouse" / f"spark-driver-{key}.jsa"


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


def _exercise(settings: Any, home: Path) -> None:
    """A small merge that loads what real runs load: landing an archived topic, decoding in Python workers,
    DDL, MERGE, snapshot properties, time travel."""
    from ticdc_lakehouse.pipeline import backfill
    from ticdc_lakehouse.spark_session import get_spark
    from ticdc_lakehouse.timetravel import as_of_sql
    from ticdc_lakehouse.workload import Workload, write_to_archive

    spark = get_spark(settings, "lakehouse-class-archive")
    workload = Workload(seed=3, partitions=2)
    workload.run_script(transactions=12)
    write_to_archive(workload, home / "archive", "ticdc", "open")
    backfill(settings, home / "archive", protocol="open", spark=spark)
    cut = workload.global_resolved_ts()
    spark.sql(as_of_sql(spark, settings, "SELECT count(*) FROM shop.orders", tso=cut)).collect()


def train(timeout_s: float = 600) -> Optional[Path]:
    """Write the archive for this installation (nothing when it exists already); returns its path."""
    from ticdc_lakehouse.config import load_settings
    from ticdc_lakehouse.spark_session import spark_plan

    with tempfile.TemporaryDirectory(prefix="lakehouse-class-archive-") as scratch:
        home = Path(scratch)
        settings = load_settings(env={"LAKEHOUSE_HOME": str(home), "LAKEHOUSE_CONFIG": ""})
        target = archive_path(spark_plan(settings).jars)
        if target is None or target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = home / "driver.jsa"
        os.environ[DUMP_ENV] = str(partial)
        try:
            _exercise(settings, home)
        finally:
            del os.environ[DUMP_ENV]
            _exit_jvm()
        deadline = time.monotonic() + timeout_s
        while not partial.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not partial.is_file():
            return None
        staged = target.with_suffix(".jsa.tmp")
        shutil.copyfile(partial, staged)
        os.replace(staged, target)  # whole or absent: a reader never maps a half-written archive
        for stale in target.parent.glob("spark-driver-*.jsa"):
            if stale != target:
                stale.unlink(missing_ok=True)
        return target


def _exit_jvm() -> None:
    """Stop Spark and let the driver JVM exit (it writes its archive on the way out), and wait for it."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from ticdc_lakehouse.iceberg.commit import shutdown_callback_server

    session = SparkSession.getActiveSession()
    if session is not None:
        shutdown_callback_server(session)  # or stop() waits on it
        session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    try:
        gateway.jvm.java.lang.System.exit(0)
    except Exception:  # noqa: BLE001 - the JVM went away mid-call, as asked
        pass
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.wait(timeout=600)


def main() -> int:
    path = train()
    if path is None:
        print("class archive: not written (no JVM found, or the JVM wrote none): runs start without one")
        return 1
    print(f"class archive: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
