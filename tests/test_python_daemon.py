"""The Python worker daemon (``runtime.python_daemon``): a task starts without re-reading archives, in a worker
that has our modules loaded."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ticdc_lakehouse.runtime import python_daemon
from ticdc_lakehouse.runtime.python_daemon import worker_search_path


def _installed_pyspark(root: Path) -> tuple[Path, Path]:
    """A pip-style install under ``root``: ``site/pyspark/__init__.py`` and its ``python/lib/pyspark.zip``."""
    site = root / "site"
    package = site / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    archive = package / "python" / "lib" / "pyspark.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("pyspark/__init__.py", "")
    return site, archive


def test_the_jar_and_the_zip_of_an_installed_pyspark_leave_the_path(tmp_path):
    site, archive = _installed_pyspark(tmp_path)
    jar = str(tmp_path / "spark-core_2.13-4.1.4.jar")
    py4j = str(tmp_path / "py4j-0.10.9.9-src.zip")
    path = ["/work", str(archive), py4j, jar, str(site)]
    assert worker_search_path(path) == ["/work", py4j, str(site)]


def test_a_pyspark_known_only_as_its_zip_keeps_it(tmp_path):
    """A Spark distribution: ``$SPARK_HOME/python/lib/pyspark.zip`` and no installed package on the path."""
    _, archive = _installed_pyspark(tmp_path)
    jar = str(tmp_path / "spark-core.jar")
    assert worker_search_path([str(archive), jar]) == [str(archive)]


def test_the_path_stays_whole_when_pyspark_would_not_be_found(tmp_path):
    path = [str(tmp_path / "elsewhere"), str(tmp_path / "spark-core.jar")]
    assert worker_search_path(path) == path


@pytest.mark.spark
def test_a_spark_python_task_imports_pyspark_from_files_and_caches_no_archive_importer(spark):
    """What each task re-reads when it starts (``importlib.invalidate_caches``): no jar, no ``pyspark.zip``."""

    def report(batches):
        import importlib
        import sys as worker_sys

        import pyarrow as pa
        import pyspark

        for _ in batches:
            pass
        importlib.invalidate_caches()  # as every task does first
        archives = sorted({str(getattr(finder, "archive", "")) for finder in worker_sys.path_importer_cache.values()
                           if type(finder).__name__ == "zipimporter"})
        yield pa.RecordBatch.from_pylist([{"pyspark": pyspark.__file__, "archives": archives,
                                          "path": list(worker_sys.path)}])

    row = spark.range(1).mapInArrow(report, "pyspark string, archives array<string>, path array<string>").first()
    assert not row["pyspark"].endswith("pyspark.zip/pyspark/__init__.py")
    assert Path(row["pyspark"]).is_file()
    assert not [a for a in row["archives"] if a.endswith((".jar", "pyspark.zip"))], row["archives"]
    assert not [entry for entry in row["path"] if entry.endswith(".jar")]


def test_the_daemon_imports_what_our_tasks_import_before_it_forks():
    """In a fresh interpreter, as the daemon starts: pandas (which pyarrow imports at its first array), the decode
    stage, the writers and every protocol's decoder are loaded, and nothing failed."""
    code = ("import json, sys; from ticdc_lakehouse.runtime.python_daemon import preload_worker_modules; "
            "failed = preload_worker_modules(); "
            "loaded = sorted(m for m in sys.modules if m.startswith(('pandas', 'ticdc_lakehouse'))); "
            "print(json.dumps([failed, loaded]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    failed, loaded = json.loads(out.strip().splitlines()[-1])
    assert failed == []
    for name in ("pandas", "ticdc_lakehouse.merge.decode_stage", "ticdc_lakehouse.merge.batch_write",
                 *(f"ticdc_lakehouse.decode.{module}" for module in
                   ("open_protocol", "craft", "canal_json", "simple", "confluent_avro", "debezium"))):
        assert name in loaded, name


def test_a_module_that_cannot_be_preloaded_is_named_not_raised(monkeypatch):
    monkeypatch.setattr(python_daemon, "PRELOADED", ("json", "no_such_module_here"))
    assert python_daemon.preload_worker_modules() == ["no_such_module_here"]


@pytest.mark.spark
def test_a_worker_of_the_session_starts_with_them_loaded(spark):
    """A task that imports nothing of ours finds them in its worker (forked from the daemon that loaded them)."""

    def loaded(batches):
        import sys as worker_sys

        import pyarrow as pa

        for _ in batches:
            pass
        names = ["pandas", "ticdc_lakehouse.merge.decode_stage", "ticdc_lakehouse.decode.open_protocol"]
        yield pa.RecordBatch.from_pylist([{"missing": [n for n in names if n not in worker_sys.modules]}])

    assert spark.range(1).mapInArrow(loaded, "missing array<string>").first()["missing"] == []


@pytest.mark.spark
def test_the_workers_the_warm_up_starts_serve_the_decode_tasks(spark):
    """``decode_stage.warm_decode_workers`` starts the Python workers with a job of the RDD API (it runs before the
    session exists); the decode's ``mapInArrow`` tasks must then run in workers of the same daemon, not start a
    second one. Spark keys its daemons by the tasks' environment, which our sessions give both kinds of task alike
    (``spark.executorEnv.SPARK_SIMPLIFIED_TRACEBACK``): without it the two jobs' workers have different parents."""
    import os

    import pyarrow as pa

    from ticdc_lakehouse.merge.decode_stage import warm_decode_workers

    context = spark.sparkContext
    warm_decode_workers(context, "open")
    rdd_daemons = set(context.parallelize(range(2), 2).mapPartitions(lambda _: [os.getppid()]).collect())

    def daemon(batches):
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"daemon": os.getppid()}])

    sql_daemons = {row["daemon"] for row in spark.range(0, 2, numPartitions=2).mapInArrow(daemon, "daemon bigint")
                   .collect()}
    assert len(rdd_daemons) == 1 and sql_daemons == rdd_daemons
