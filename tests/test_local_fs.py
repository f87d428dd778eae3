"""Hadoop's local file system as the session uses it (jvm/local-fs): files and directories get exactly the
permission bits Hadoop's own would give them (666 or 777 minus its umask), set without forking ``chmod``."""

from __future__ import annotations

import stat

import pytest

from ticdc_lakehouse.runtime.spark_session import LOCAL_FS_CLASS, local_fs_jar

pytestmark = pytest.mark.spark


def test_the_session_writes_local_files_through_the_no_fork_file_system_with_hadoops_modes(spark, tmp_path):
    assert local_fs_jar() is not None, "make setup builds jvm/local-fs"
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(tmp_path.as_uri()), conf)
    assert fs.getClass().getName() == LOCAL_FS_CLASS
    umask = int(conf.get("fs.permissions.umask-mode"), 8)

    directory = tmp_path / "a" / "b"
    out = fs.create(jvm.org.apache.hadoop.fs.Path((directory / "file").as_uri()), True)
    out.write(bytearray(b"x"))
    out.close()

    assert (directory / "file").read_bytes() == b"x"
    assert stat.S_IMODE((directory / "file").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(directory.stat().st_mode) == 0o777 & ~umask
    assert (directory / ".file.crc").exists()  # still Hadoop's checksummed local file system

    explicit = jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable(0o640)
    fs.setPermission(jvm.org.apache.hadoop.fs.Path((directory / "file").as_uri()), explicit)
    assert stat.S_IMODE((directory / "file").stat().st_mode) == 0o640


def test_only_a_local_session_plans_the_no_fork_file_system(tmp_path):
    """A cluster's executors look file systems up in their own class loaders, and its warehouse is on object
    storage or HDFS: its plan keeps Hadoop's own local file system."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import spark_plan

    env = {"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""}
    local = spark_plan(load_settings(env=env))
    assert local.conf["spark.hadoop.fs.file.impl"] == LOCAL_FS_CLASS
    assert str(local_fs_jar()) in local.jars
    cluster = spark_plan(load_settings(env={**env, "LAKEHOUSE_SPARK_MASTER": "spark://h:7077"}))
    assert "spark.hadoop.fs.file.impl" not in cluster.conf and str(local_fs_jar()) not in cluster.jars
