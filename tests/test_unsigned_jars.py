"""Unsigned copies of pyspark's signed jars (Janino): what a copy holds, which a session uses, and that the local
driver loads Janino from them."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from ticdc_lakehouse.runtime.unsigned_jars import (
    is_signed,
    manifest_without_digests,
    signed_sources,
    spark_jars_dir,
    unsigned_copies,
    write_copies,
    write_unsigned_copy,
)

_MANIFEST = (b"Manifest-Version: 1.0\r\nCreated-By: hand\r\n\r\n"
             b"Name: org/x/A.class\r\nSHA-256-Digest: AAAA\r\n\r\n"
             b"Name: org/x/B.class\r\nSHA-256-Digest: BBBB\r\n\r\n")


def _signed_jar(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", _MANIFEST)
        jar.writestr("META-INF/DUMMY.SF", b"Signature-Version: 1.0\r\n")
        jar.writestr("META-INF/DUMMY.DSA", b"\x30\x82")
        jar.writestr(zipfile.ZipInfo("org/x/A.class", (2022, 11, 16, 10, 17, 0)), b"\xca\xfe\xba\xbe A",
                     compress_type=zipfile.ZIP_DEFLATED)
        jar.writestr("org/x/B.class", b"\xca\xfe\xba\xbe B", compress_type=zipfile.ZIP_STORED)
        jar.writestr("META-INF/maven/org.x/x/pom.properties", b"version=1\n")
    return path


def test_a_copy_keeps_every_entry_but_the_signature(tmp_path):
    source = _signed_jar(tmp_path / "janino-3.1.9.jar")
    target = tmp_path / "out" / "janino-3.1.9.jar"
    write_unsigned_copy(source, target)
    assert is_signed(source) and not is_signed(target)
    with zipfile.ZipFile(source) as before, zipfile.ZipFile(target) as after:
        kept = [i for i in before.infolist() if not i.filename.endswith((".SF", ".DSA"))]
        assert [i.filename for i in after.infolist()] == [i.filename for i in kept]
        for entry in kept[1:]:
            copied = after.getinfo(entry.filename)
            assert after.read(copied) == before.read(entry)
            assert (copied.date_time, copied.compress_type) == (entry.date_time, entry.compress_type)
        assert after.read("META-INF/MANIFEST.MF") == b"Manifest-Version: 1.0\nCreated-By: hand\n\n"
    assert list(target.parent.iterdir()) == [target]  # nothing staged is left behind


def test_the_manifest_keeps_its_main_section_only():
    assert manifest_without_digests(b"Manifest-Version: 1.0\n") == b"Manifest-Version: 1.0\n\n"
    assert manifest_without_digests(_MANIFEST) == b"Manifest-Version: 1.0\nCreated-By: hand\n\n"


def test_a_session_uses_a_copy_only_while_pyspark_ships_its_jar(tmp_path):
    spark_jars, into = tmp_path / "jars", tmp_path / "unsigned"
    spark_jars.mkdir()
    _signed_jar(spark_jars / "janino-3.1.9.jar")
    _signed_jar(spark_jars / "commons-compiler-3.1.9.jar")
    (spark_jars / "spark-core_2.13-4.1.4.jar").write_bytes(b"not ours")
    assert unsigned_copies(spark_jars, into) == ()  # setup has not written them: the signed jars, as before
    written = write_copies(spark_jars, into)
    assert [p.name for p in written] == ["commons-compiler-3.1.9.jar", "janino-3.1.9.jar"]
    assert unsigned_copies(spark_jars, into) == tuple(str(p) for p in written)
    # an upgraded pyspark ships another Janino: the old copy is never used, and setup replaces it
    (spark_jars / "janino-3.1.9.jar").rename(spark_jars / "janino-3.2.0.jar")
    assert unsigned_copies(spark_jars, into) == (str(into / "commons-compiler-3.1.9.jar"),)
    mtime = (into / "commons-compiler-3.1.9.jar").stat().st_mtime_ns
    write_copies(spark_jars, into)
    assert sorted(p.name for p in into.iterdir()) == ["commons-compiler-3.1.9.jar", "janino-3.2.0.jar"]
    assert (into / "commons-compiler-3.1.9.jar").stat().st_mtime_ns == mtime  # kept, not written again


@pytest.mark.skipif(shutil.which("jarsigner") is None, reason="needs the JDK's jarsigner")
def test_the_copies_of_pyspark_s_own_janino_are_unsigned_and_whole(tmp_path):
    sources = signed_sources(spark_jars_dir())
    assert {s.name.split("-3")[0] for s in sources} == {"janino", "commons-compiler"}
    for source in sources:
        assert "jar verified" in subprocess.run(["jarsigner", "-verify", str(source)], capture_output=True,
                                                text=True, timeout=120).stdout
    copies = write_copies(spark_jars_dir(), tmp_path)
    for source, copy in zip(sources, copies):
        result = subprocess.run(["jarsigner", "-verify", str(copy)], capture_output=True, text=True, timeout=120)
        assert "jar is unsigned" in result.stdout
        with zipfile.ZipFile(source) as signed, zipfile.ZipFile(copy) as unsigned:
            classes = [n for n in signed.namelist() if n.endswith(".class")]
            assert classes and all(unsigned.read(n) == signed.read(n) for n in classes)


def test_only_a_local_session_puts_the_copies_on_its_driver_class_path(tmp_path, monkeypatch):
    from ticdc_lakehouse.runtime import spark_session
    from ticdc_lakehouse.runtime.config import load_settings

    monkeypatch.setattr(spark_session, "unsigned_copies", lambda: ("/u/janino-3.1.9.jar",))
    local = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    assert spark_session.spark_plan(local).jars[0] == "/u/janino-3.1.9.jar"
    cluster = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": "",
                                 "LAKEHOUSE_SPARK_MASTER": "spark://h:7077"})
    assert "/u/janino-3.1.9.jar" not in spark_session.spark_plan(cluster).jars


@pytest.mark.spark
def test_the_test_session_compiles_with_janino_from_the_copy(spark):
    if not unsigned_copies():
        pytest.skip("no unsigned copies on this machine (run make setup)")
    jvm = spark.sparkContext._jvm
    location = str(jvm.java.lang.Class.forName("org.codehaus.janino.UnitCompiler").getProtectionDomain()
                   .getCodeSource().getLocation())
    assert "/jars/unsigned/janino-" in location
    assert spark.range(3).selectExpr("id * 2 AS doubled").collect()[2].doubled == 4  # generated and compiled
