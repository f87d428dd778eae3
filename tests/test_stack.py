"""The pinned stack works together: Spark 4.1 + Apache Iceberg 1.11 + the JDBC catalog, shared with pyiceberg."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pyspark
import pytest

from ticdc_lakehouse.runtime.spark_session import iceberg_aws_jar, iceberg_runtime_jar, pyiceberg_catalog

RUNTIME = Path(__file__).resolve().parent.parent / "jvm" / "runtime"


def test_pyspark_is_4_1():
    assert pyspark.__version__.startswith("4.1."), pyspark.__version__


def test_the_iceberg_jars_are_apaches_own_from_maven_central_as_pinned():
    """The session's jars are the ones jvm/runtime/pom.xml pins, byte for byte what checksums.sha256 lists."""
    expected = dict(reversed(line.split()) for line in (RUNTIME / "checksums.sha256").read_text().splitlines())
    jars = [iceberg_runtime_jar(), iceberg_aws_jar()]
    assert [j.name for j in jars] == ["iceberg-spark-runtime-4.1_2.13-1.11.0.jar", "iceberg-aws-bundle-1.11.0.jar"]
    for jar in jars:
        assert hashlib.sha256(jar.read_bytes()).hexdigest() == expected[jar.name], jar
    pom = (RUNTIME / "pom.xml").read_text()
    assert "<artifactId>iceberg-spark-runtime-4.1_2.13</artifactId>" in pom and "<iceberg.version>1.11.0<" in pom


def test_fetch_script_verifies_and_is_idempotent(tmp_path):
    """scripts/fetch_jvm_deps.sh: a corrupt jar is fetched again, a jar the pin no longer lists goes, and a
    checksum list that does not match what Maven fetched fails with one line and exit 1."""
    script = RUNTIME.parent.parent / "scripts" / "fetch_jvm_deps.sh"
    dest = tmp_path / "jars"
    dest.mkdir()
    for jar in (iceberg_runtime_jar(), iceberg_aws_jar()):
        shutil.copy(jar, dest / jar.name)
    (dest / iceberg_aws_jar().name).write_bytes(b"truncated")
    (dest / "iceberg-spark-runtime-3.5_2.12-1.10.2.jar").write_bytes(b"old pin")
    subprocess.run(["bash", str(script), str(RUNTIME), str(dest)], check=True, timeout=600)
    assert sorted(p.name for p in dest.glob("*.jar")) == sorted([iceberg_aws_jar().name, iceberg_runtime_jar().name])
    assert (dest / iceberg_aws_jar().name).read_bytes()[:2] == b"PK"
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(RUNTIME / "pom.xml", bad / "pom.xml")
    (bad / "checksums.sha256").write_text(f"{'0' * 64}  {iceberg_aws_jar().name}\n")
    result = subprocess.run(["bash", str(script), str(bad), str(tmp_path / "other")], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "checksum mismatch" in result.stderr


@pytest.mark.spark
def test_iceberg_table_lifecycle_on_the_jdbc_catalog(spark, settings):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS shop")
    spark.sql(
        "CREATE TABLE shop.items (id int NOT NULL, name string, price decimal(10,2)) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read')"
    )
    spark.sql("ALTER TABLE shop.items SET IDENTIFIER FIELDS id")
    spark.sql("INSERT INTO shop.items VALUES (1, 'a', 1.50), (2, 'b', 2.00), (3, 'c', 3.25)")
    first_snapshot = spark.sql("SELECT snapshot_id FROM shop.items.snapshots").collect()[0][0]

    spark.createDataFrame(
        [(2, "B", Decimal("2.10"), "U"), (3, None, None, "D"), (4, "d", Decimal("4.00"), "I")],
        "id int, name string, price decimal(10,2), op string",
    ).createOrReplaceTempView("changes")
    spark.sql(
        "MERGE INTO shop.items t USING changes s ON t.id = s.id "
        "WHEN MATCHED AND s.op = 'D' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET name = s.name, price = s.price "
        "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, name, price) VALUES (s.id, s.name, s.price)"
    )
    rows = [tuple(r) for r in spark.sql("SELECT * FROM shop.items ORDER BY id").collect()]
    assert rows == [(1, "a", Decimal("1.50")), (2, "B", Decimal("2.10")), (4, "d", Decimal("4.00"))]

    spark.sql("ALTER TABLE shop.items ADD COLUMN qty int")
    spark.sql("ALTER TABLE shop.items RENAME COLUMN name TO title")
    spark.sql("ALTER TABLE shop.items ALTER COLUMN qty TYPE bigint")
    spark.sql("ALTER TABLE shop.items DROP COLUMN price")
    spark.sql("INSERT INTO shop.items VALUES (5, 'e', 9000000000)")
    assert spark.table("shop.items").columns == ["id", "title", "qty"]
    assert dict(spark.table("shop.items").dtypes)["qty"] == "bigint"

    old = spark.sql(f"SELECT * FROM shop.items VERSION AS OF {first_snapshot} ORDER BY id")
    assert old.columns == ["id", "name", "price"]
    assert [r["id"] for r in old.collect()] == [1, 2, 3]

    catalog = pyiceberg_catalog(settings)
    table = catalog.load_table("shop.items")
    assert table.format_version == 2
    assert [f.name for f in table.schema().fields] == ["id", "title", "qty"]
    assert table.schema().identifier_field_names() == {"id"}
    current = table.scan().to_arrow().sort_by("id")
    assert current.column("id").to_pylist() == [1, 2, 4, 5]
    assert current.column("qty").to_pylist() == [None, None, None, 9000000000]
    then = table.scan(snapshot_id=first_snapshot).to_arrow().sort_by("id")
    assert then.column("id").to_pylist() == [1, 2, 3]


@pytest.mark.spark
def test_concurrent_commits_through_a_catalog_opened_on_an_existing_file(spark_session, tmp_path):
    """What every scheduled run after the first does: open the catalog file an earlier run created, then commit
    to several tables at once (the final flush). Branch, read the branch, append to it, fast-forward: each
    thread must see its own commits and none may fail on a lock. (Iceberg 1.10.2's catalog probe pinned a
    connection here unless skipped; 1.11.0 closes its ResultSet, and this runs without the skip.)"""
    import uuid

    from tests.lake_helpers import run_concurrently
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    def open_catalog(name: str):
        settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": "",
                                      "LAKEHOUSE__CATALOG__NAME": name})
        use_catalog(spark_session, settings)
        return settings

    open_catalog("earlier_run")
    spark_session.sql("CREATE NAMESPACE earlier_run.s")  # the first run creates the file and its tables
    settings = open_catalog("later_run")  # a later run: same file, a catalog initialized on it afresh
    spark_session.sql("CREATE NAMESPACE later_run.s")
    for i in range(4):
        spark_session.sql(f"CREATE TABLE later_run.s.t{i} (id bigint) USING iceberg")
        spark_session.range(1).writeTo(f"later_run.s.t{i}").append()
    ji = JavaIceberg(spark_session, settings.catalog_name)
    errors: list[str] = []

    def commit_through_branches(i: int) -> None:
        for round_ in range(8):
            try:
                table = ji.load("s", f"t{i}")
                branch = "b" + uuid.uuid4().hex[:8]
                table.manageSnapshots().createBranch(branch, table.currentSnapshot().snapshotId()).commit()
                spark_session.sql(f"SELECT count(*) FROM later_run.s.t{i}.branch_{branch}").collect()
                table = ji.load("s", f"t{i}")
                table.newAppend().toBranch(branch).set("round", str(round_)).commit()
                table.manageSnapshots().fastForwardBranch("main", branch).removeBranch(branch).commit()
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(f"t{i} round {round_}: {str(exc).splitlines()[0]}")

    run_concurrently(commit_through_branches, 4)
    assert errors == []
    for i in range(4):
        rounds = [r[0] for r in spark_session.sql(
            f"SELECT summary['round'] FROM later_run.s.t{i}.snapshots WHERE summary['round'] IS NOT NULL").collect()]
        assert sorted(rounds) == [str(r) for r in range(8)]


def test_the_driver_jvm_gets_the_configured_options_and_none_when_cleared(tmp_path):
    """``spark.driver_java_options`` (by default, C1 only: a run ends before C2's compilations pay back; with the
    code cache the JVM reserves for C1 and C2; the parallel collector) reach the driver JVM's options next to the
    JDBC library path; an empty value removes them and nothing else."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import spark_plan

    env = {"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""}
    default = spark_plan(load_settings(env=env)).conf["spark.driver.extraJavaOptions"].split()
    tuning = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:+UseParallelGC"]
    assert all(option in default for option in tuning)
    cleared = spark_plan(load_settings(env={**env, "LAKEHOUSE__SPARK__DRIVER_JAVA_OPTIONS": ""}))
    options = cleared.conf["spark.driver.extraJavaOptions"].split()
    assert not any(option in options for option in tuning)
    assert [o for o in default if o not in tuning] == options


@pytest.mark.spark
def test_the_session_jvm_runs_with_the_driver_options(spark):
    """C1 only, and a code cache of 240 MB: C1 alone gets 48 MB by default, which a run applying a few hundred
    tables filled (each MERGE's generated classes), and a JVM with a full code cache stops compiling: the rest
    of that run was interpreted (a 204-table incremental run: 146 s, 120 s with the larger cache). The parallel
    collector: a run is a batch job (G1 cost a 1.1M-event backfill 6% more CPU)."""
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in arguments
    diagnostics = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert diagnostics.getVMOption("ReservedCodeCacheSize").getValue() == str(240 << 20)
    assert diagnostics.getVMOption("UseParallelGC").getValue() == "true"  # a batch job: throughput, not pauses


@pytest.mark.spark
def test_a_column_call_is_one_gateway_round_trip_not_a_call_site_record(spark, monkeypatch):
    """pyspark 4 records the Python call site of every Column call in the JVM unless the session turns that off
    (``spark.python.sql.dataFrameDebugging.enabled``): ``F.col`` cost 13 gateway calls, a when/otherwise 25, and
    the merge builds its change sets from thousands of them."""
    import threading

    import py4j.clientserver
    from pyspark.sql import functions as F

    F.col("a")  # pyspark reads the setting once, at the first call
    sent = []
    send = py4j.clientserver.ClientServerConnection.send_command
    here = threading.current_thread()  # another thread's calls (an earlier test's still running) are not these

    def counted(self, command):
        if threading.current_thread() is here:
            sent.append(command)
        return send(self, command)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counted)
    column = F.col("a")
    F.when(column == 1, column).otherwise(column).alias("b")
    assert len(sent) <= 12, [c.split("\n")[:3] for c in sent]


def test_a_local_session_interprets_its_stages_and_every_session_uses_the_worker_daemon(tmp_path):
    """Local tasks run in the driver's short-lived JVM: no whole-stage code generation there (a cluster keeps
    Spark's default, and ``spark.conf`` can turn it back on); every session's Python workers come from
    ``runtime.python_daemon``."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import PYTHON_DAEMON_MODULE, spark_plan

    env = {"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""}
    local = spark_plan(load_settings(env=env)).conf
    assert local["spark.sql.codegen.wholeStage"] == "false"
    cluster = spark_plan(load_settings(env={**env, "LAKEHOUSE_SPARK_MASTER": "spark://h:7077"})).conf
    assert "spark.sql.codegen.wholeStage" not in cluster
    assert local["spark.python.daemon.module"] == cluster["spark.python.daemon.module"] == PYTHON_DAEMON_MODULE
    (tmp_path / "on.toml").write_text('[spark.conf]\n"spark.sql.codegen.wholeStage" = "true"\n')
    chosen = spark_plan(load_settings(env={**env, "LAKEHOUSE_CONFIG": str(tmp_path / "on.toml")})).conf
    assert chosen["spark.sql.codegen.wholeStage"] == "true"


def test_a_session_started_on_a_thread_hands_its_failure_to_the_caller(monkeypatch, tmp_path):
    """``SparkStart`` starts the JVM while the command imports and lands; whatever the start raised (here the
    stack check) reaches the caller when it asks for the session, and the starting thread never keeps a failing
    command from exiting (a daemon)."""
    import threading

    from ticdc_lakehouse.runtime import spark_session
    from ticdc_lakehouse.runtime.config import load_settings

    release = threading.Event()

    def failing(settings, app_name=None, on_context=None):
        release.wait(5)
        raise spark_session.StackError("iceberg-spark-runtime missing: run `make setup`")

    monkeypatch.setattr(spark_session, "get_spark", failing)
    start = spark_session.SparkStart(load_settings(env={"LAKEHOUSE_HOME": str(tmp_path)}), "test")
    [thread] = [t for t in threading.enumerate() if t.name == "spark-start"]
    assert thread.daemon
    release.set()
    with pytest.raises(spark_session.StackError, match="make setup"):
        start.session()


def test_work_after_the_start_gets_the_session_and_its_failure_stays_quiet(monkeypatch, tmp_path, caplog):
    """The work a ``SparkStart`` runs once the session is up (starting the decode's Python workers) gets that
    session on the starting thread; it is a warm-up, so what it raises is logged, never raised into the command."""
    import logging
    import threading

    from ticdc_lakehouse.runtime import spark_session
    from ticdc_lakehouse.runtime.config import load_settings

    ran = []

    def then(spark):
        ran.append(spark)
        raise RuntimeError("the workers did not start")

    monkeypatch.setattr(spark_session, "get_spark", lambda settings, app_name=None, on_context=None: "the session")
    with caplog.at_level(logging.DEBUG, logger=spark_session.__name__):
        spark_session.SparkStart(load_settings(env={"LAKEHOUSE_HOME": str(tmp_path)}), "test", then=then)
        for thread in [t for t in threading.enumerate() if t.name == "spark-start"]:
            thread.join(10)
    assert ran == ["the session"]
    assert "the workers did not start" in caplog.text


def test_work_for_the_context_runs_beside_the_session_creation_and_its_failure_stays_quiet(monkeypatch, tmp_path,
                                                                                          caplog):
    """``SparkStart``'s ``on_context`` gets the new SparkContext while the session is still being created on it:
    on a thread of its own, so the creation does not wait for it (here the creation waits until it has run), and
    what it raises is logged, never raised into the command."""
    import logging
    import threading

    from ticdc_lakehouse.runtime import spark_session
    from ticdc_lakehouse.runtime.config import load_settings

    ran = []
    done = threading.Event()

    def on_context(context):
        ran.append((context, threading.current_thread().name))
        done.set()
        raise RuntimeError("the workers did not start")

    def creating(settings, app_name=None, on_context=None):
        on_context("the context")
        assert done.wait(10)  # ran beside this thread, which goes on creating the session
        return "the session"

    monkeypatch.setattr(spark_session, "get_spark", creating)
    with caplog.at_level(logging.DEBUG, logger=spark_session.__name__):
        spark_session.SparkStart(load_settings(env={"LAKEHOUSE_HOME": str(tmp_path)}), "test", on_context=on_context)
        for thread in [t for t in threading.enumerate() if t.name in ("spark-start", "spark-start-context")]:
            thread.join(10)
    assert ran == [("the context", "spark-start-context")]
    assert "the workers did not start" in caplog.text


@pytest.mark.spark
def test_scala_reflection_is_built_beside_the_context_and_a_failure_stays_quiet(spark, caplog):
    """A fresh driver builds Scala's reflection universe on a JVM thread of its own while the context starts
    (``_warm_scala_reflection``): with a live gateway it is built; with a broken one the warm-up only logs."""
    import logging
    import threading

    from ticdc_lakehouse.runtime import spark_session

    def warm_and_wait(gateway) -> None:
        spark_session._warm_scala_reflection(gateway)
        for thread in [t for t in threading.enumerate() if t.name == "lakehouse-warm-scala-reflection"]:
            thread.join(60)
            assert not thread.is_alive()

    asked = []

    class Recording:
        """A gateway whose ``scala.reflect.runtime.package.universe()`` notes the thread that asked."""

        def __getattr__(self, name):
            return self

        def universe(self):
            asked.append(threading.current_thread().name)

    warm_and_wait(Recording())
    assert asked == ["lakehouse-warm-scala-reflection"]  # asked once, on a thread of its own
    warm_and_wait(spark.sparkContext._gateway)
    universe = getattr(spark.sparkContext._jvm.scala.reflect.runtime, "package").universe()
    assert "JavaUniverse" in universe.getClass().getName()

    class Broken:
        @property
        def jvm(self):
            raise ConnectionError("the driver went away")

    with caplog.at_level(logging.DEBUG, logger=spark_session.__name__):
        warm_and_wait(Broken())
    assert "the driver went away" in caplog.text
