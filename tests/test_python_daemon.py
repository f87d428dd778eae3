"""The Python worker daemon (``runtime.python_daemon``): a task starts without re-reading archives."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

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
