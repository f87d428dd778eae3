"""The control tables (runtime/state.py): a deployment's first run reads nothing back from the tables it just
created, and reads what it or an earlier run wrote."""

from __future__ import annotations

import pytest

from ticdc_lakehouse.runtime.state import Checkpoint, StateStore

pytestmark = pytest.mark.spark


def test_a_first_run_reads_nothing_it_did_not_write_and_everything_it_did(spark, settings):
    store = StateStore(spark, settings.catalog_name)
    assert store.latest_checkpoint("shop") == Checkpoint("shop")
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
