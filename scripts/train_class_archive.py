"""Train the Spark driver JVM's class archive for this installation (``make setup`` runs it; ~1 minute).

The archive itself (its name, where it lives, the options a session gets) is ``ticdc_lakehouse.runtime.jvm_archive``;
training runs a whole backfill through the pipeline, which is why it lives here and not beside the session
factory: ``spark_session`` imports ``jvm_archive``, and the pipeline imports ``spark_session``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from pyspark import SparkContext
from pyspark.sql import SparkSession

from ticdc_lakehouse.runtime.config import Settings, load_settings
from ticdc_lakehouse.iceberg.commit import shutdown_callback_server
from ticdc_lakehouse.runtime.jvm_archive import DUMP_ENV, archive_path
from ticdc_lakehouse.commands.pipeline import backfill
from ticdc_lakehouse.runtime.spark_session import get_spark, spark_plan
from ticdc_lakehouse.commands.timetravel import as_of_sql
from ticdc_lakehouse.sim.workload import Workload, write_to_archive


def _exercise(settings: Settings, home: Path) -> None:
    """A small merge that loads what real runs load: landing an archived topic, decoding in Python workers,
    DDL, MERGE, snapshot properties, time travel."""
    spark = get_spark(settings, "lakehouse-class-archive")
    workload = Workload(seed=3, partitions=2)
    workload.run_script(transactions=12)
    write_to_archive(workload, home / "archive", "ticdc", "open")
    backfill(settings, home / "archive", protocol="open", spark=spark)
    cut = workload.global_resolved_ts()
    spark.sql(as_of_sql(spark, settings, "SELECT count(*) FROM shop.orders", tso=cut)).collect()


def train(timeout_s: float = 600) -> Optional[Path]:
    """Write the archive for this installation (nothing when it exists already); returns its path."""
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
