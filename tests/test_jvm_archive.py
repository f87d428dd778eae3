"""The driver JVM's class-data-sharing archive: which options a session gets, and that a bad archive is harmless."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ticdc_lakehouse.runtime import jar_dirs, jvm_archive
from ticdc_lakehouse.runtime.jvm_archive import DUMP_ENV, archive_key, driver_java_options


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    """A virtualenv prefix of our own, so the real installation's archive is never touched."""
    monkeypatch.setattr(jar_dirs.sys, "prefix", str(tmp_path))
    monkeypatch.delenv(DUMP_ENV, raising=False)
    return tmp_path / "share" / "ticdc-lakehouse"


def test_a_session_maps_the_archive_only_once_it_exists(archive_dir):
    jars = ["/nonexistent/iceberg.jar"]
    assert driver_java_options(jars) == ""
    path = jvm_archive.archive_path(jars)
    assert path.parent == archive_dir
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert driver_java_options(jars).startswith(f"-XX:SharedArchiveFile={path} ")
    assert driver_java_options(jars, enabled=False) == ""


def test_the_trainer_asks_the_jvm_to_write_an_archive(archive_dir, monkeypatch):
    monkeypatch.setenv(DUMP_ENV, "/tmp/x.jsa")
    assert driver_java_options(["a.jar"]).startswith("-XX:ArchiveClassesAtExit=/tmp/x.jsa ")


def test_another_jar_or_jvm_means_another_archive(tmp_path):
    jar = tmp_path / "iceberg.jar"
    jar.write_bytes(b"one")
    first = archive_key([str(jar)])
    jar.write_bytes(b"a longer jar")
    assert archive_key([str(jar)]) != first  # an upgraded jar never maps an archive trained without it


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JVM")
def test_a_jvm_given_an_archive_it_cannot_use_starts_normally_and_quietly(tmp_path, archive_dir):
    bogus = tmp_path / "spark-driver-0000.jsa"
    bogus.write_bytes(b"not a class archive" * 100)
    options = f"-XX:SharedArchiveFile={bogus} {jvm_archive._QUIET}".split()
    result = subprocess.run(["java", *options, "-version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "warning" not in (result.stdout + result.stderr).lower()
    assert "version" in result.stderr


@pytest.mark.spark
def test_the_test_session_runs_with_the_archive_setup_trained(spark):
    """``make setup`` trains the archive before the tests: the session's driver was started with it."""
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    class_path = spark.sparkContext.getConf().get("spark.driver.extraClassPath")
    trained = jvm_archive.archive_path(class_path.split(os.pathsep))
    if trained is None or not trained.is_file():
        pytest.skip("no class archive trained on this machine (run make setup)")
    arguments = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments())
    assert f"-XX:SharedArchiveFile={trained}" in options.split()
    assert f"-XX:SharedArchiveFile={trained}" in arguments


@pytest.mark.spark
def test_a_local_session_loads_iceberg_from_the_driver_class_path(spark):
    """Where the archive can share its classes, and without a per-run copy of the jars into the executor."""
    from ticdc_lakehouse.runtime.spark_session import ICEBERG_JAR_NAME

    class_path = spark.sparkContext._jvm.java.lang.System.getProperty("java.class.path")
    assert ICEBERG_JAR_NAME in class_path
    assert not spark.sparkContext.getConf().get("spark.jars", "")


def test_a_cluster_session_ships_the_jars_to_its_executors():
    from ticdc_lakehouse.runtime.spark_session import SparkPlan, jar_settings

    jars = ("/j/iceberg.jar", "/j/sqlite.jar")
    assert jar_settings(SparkPlan("spark://h:7077", "a", {}, jars)) == {"spark.jars": "/j/iceberg.jar,/j/sqlite.jar"}
    local = jar_settings(SparkPlan("local[2]", "a", {"spark.driver.extraClassPath": "/mine.jar"}, jars))
    assert local == {"spark.driver.extraClassPath": os.pathsep.join([*jars, "/mine.jar"])}
