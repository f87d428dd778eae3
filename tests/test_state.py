"""The control tables (runtime/state.py): a deployment's first run reads nothing back from the tables it just
created, and reads what it or an earlier run wrote."""

from __future__ import annotations

import pytest

from ticdc_lakehouse.runtime.state import Checkpoint, StateStore

pytestmark = pytest.mark.spark


def test_a_first_run_reads_nothing_it_did_not_write_and_everything_it_did(spark, settings):
    from pyspark.sql.types import _parse_datatype_string

    from ticdc_lakehouse.runtime.state import CHECKPOINTS_DDL, HALTED_DDL

    store = StateStore(spark, settings.catalog_name)
    assert store.latest_checkpoint("shop") == Checkpoint("shop")
    store.ensure()  # the first read does not wait for the tables' creation (see the next test)
    # created with the columns Spark's own CREATE TABLE of their DDL would give (timestamps as the session's)
    for name, ddl in (("checkpoints", CHECKPOINTS_DDL), ("halted", HALTED_DDL)):
        assert spark.table(store.table(name)).schema == _parse_datatype_string(ddl)
    assert store.halted("shop") == [] and store.holds("shop") == []

    store.halt("shop", "app", "orders", 120, "ALTER TABLE orders ...", "cannot apply")
    assert [(h.table, h.ddl_ts) for h in store.halted("shop")] == [("orders", 120)]
    store.write_checkpoint(Checkpoint("shop", resolved_ts=200, run_id="r1"))
    assert store.latest_checkpoint("shop").resolved_ts == 200

    # a later run whose deployment lost one control table: it creates that one and reads the others
    spark.sql(f"DROP TABLE {store.table('held')}")
    later = StateStore(spark, settings.catalog_name)
    assert later.latest_checkpoint("shop").resolved_ts == 200
    assert [h.table for h in later.halted("shop")] == ["orders"] and later.holds("shop") == []
    assert later.halted() and later.latest_checkpoint("other") == Checkpoint("other")


def test_a_first_run_reads_its_empty_checkpoint_while_the_control_tables_are_created(spark, settings,
                                                                                    monkeypatch):
    """A deployment's first run knows its checkpoint is empty without waiting for the control tables' creation
    (on a thread of its own, beside the decode); whatever reads or writes them waits for it, and a failed creation
    is raised there, in the run's thread."""
    import threading

    from ticdc_lakehouse.iceberg.java_api import JavaIceberg

    release = threading.Event()
    creating = JavaIceberg.create_plain_table

    def slow_create(self, *args, **kwargs):
        assert release.wait(30)
        return creating(self, *args, **kwargs)

    monkeypatch.setattr(JavaIceberg, "create_plain_table", slow_create)
    store = StateStore(spark, settings.catalog_name)
    assert store.latest_checkpoint("shop") == Checkpoint("shop") and store.halted("shop") == []
    assert any(t.name.startswith("lakehouse-control-tables") and t.is_alive() for t in threading.enumerate())
    release.set()
    store.write_checkpoint(Checkpoint("shop", resolved_ts=200, run_id="r1"))  # waits for the tables
    assert StateStore(spark, settings.catalog_name).latest_checkpoint("shop").resolved_ts == 200

    def failing_create(self, namespace, name, *args, **kwargs):
        raise RuntimeError(f"cannot create {namespace}.{name}: the catalog is read-only")

    monkeypatch.setattr(JavaIceberg, "create_plain_table", failing_create)
    spark.sql(f"DROP TABLE {store.table('held')}")
    broken = StateStore(spark, settings.catalog_name)
    with pytest.raises(RuntimeError, match="cannot create _lakehouse.held"):
        broken.latest_checkpoint("shop")  # read from an existing table, after the missing one's creation


def test_reads_see_updates_and_deletes_as_spark_does(spark, settings):
    """The control tables are read by Iceberg's generic reader (no Spark job): a row an UPDATE or DELETE rewrote
    (merge-on-read: deletion vectors in format v3) is read once, as it is now, with its timestamps as pyspark
    gives them."""
    store = StateStore(spark, settings.catalog_name)
    store.halt("shop", "app", "orders", 120, "ALTER TABLE orders ...", "cannot apply")
    store.halt("shop", "app", "items", 90, "ALTER TABLE items ...", "cannot apply")
    assert store.resolve_halt("shop", "APP", "Orders", "skip") == 1
    assert [h.table for h in store.halted("shop")] == ["items"]
    every = store.halted("shop", include_resolved=True)
    assert [(h.table, h.resolution) for h in every] == [("items", None), ("orders", "skip")]
    by_spark = {r["table_name"]: r["halted_at"] for r in spark.table(store.table("halted")).collect()}
    assert {h.table: h.halted_at for h in every} == by_spark

    for ts in (300, 200, 250):
        store.write_checkpoint(Checkpoint("shop", resolved_ts=ts, run_id=f"r{ts}"))
    spark.sql(f"DELETE FROM {store.table('checkpoints')} WHERE resolved_ts = 300")
    assert [c.resolved_ts for c in store.checkpoints("shop")] == [200, 250]
    assert store.latest_checkpoint("shop").run_id == "r250"


def test_a_checkpoint_is_appended_without_a_spark_job_and_reads_back_everywhere(spark, settings):
    """The checkpoint, a run's last write, is one Parquet file the driver writes and one append commit: no Spark
    job runs, and Spark, Iceberg's generic reader and pyiceberg read the same row, its commit time as written."""
    from datetime import datetime, timedelta

    from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog

    store = StateStore(spark, settings.catalog_name)
    store.ensure()
    spark.sparkContext.setJobGroup("checkpoint-append", "the checkpoint's append")
    before = datetime.utcnow()
    store.write_checkpoint(Checkpoint("shop", resolved_ts=300, run_id="r2", restart_offsets={("t", 0): 7},
                                      tables={"app.orders": 5}, protocol="open"))
    spark.sparkContext.setJobGroup("other", "after the append")
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("checkpoint-append") == []
    read = store.latest_checkpoint("shop")
    assert (read.resolved_ts, read.run_id, read.restart_offsets, read.tables, read.protocol) == (
        300, "r2", {("t", 0): 7}, {"app.orders": 5}, "open")
    row = spark.table(store.table("checkpoints")).filter("run_id = 'r2'").collect()[0]
    assert row["resolved_ts"] == 300 and row["committed_at"] == read.committed_at
    written = pyiceberg_catalog(settings).load_table("_lakehouse.checkpoints").scan(
        row_filter="run_id == 'r2'").to_arrow().to_pylist()[0]
    assert written["committed_at"].replace(tzinfo=None) - before < timedelta(minutes=1)  # UTC, as written
    assert written["committed_at"].replace(tzinfo=None) >= before - timedelta(seconds=1)
