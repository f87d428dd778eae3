"""Finding a table's row events in the run's cached events (merge/table_events.py), on small frames."""

from __future__ import annotations

import pytest

from ticdc_lakehouse.core.events_arrow import EVENT_SPARK_SCHEMA, event_to_row
from ticdc_lakehouse.core.model import INSERT, Position, RowChange
from ticdc_lakehouse.merge.table_events import TABLE_INDEX, TableRange, clustered_by_table, table_rows, tables_rows
from tests.lake_helpers import rows_and_scanned

pytestmark = pytest.mark.spark

#: tables whose names differ in case from how the lake knows them, a name with a dot (no ambiguity in the key),
#: and one not ASCII (its key lower-cased by Spark, not by Python)
TABLES = [("Shop", f"Orders_{i:02}") for i in range(38)] + [("shop", "a.b"), ("shop.a", "b"), ("Shop", "Bücher")]
EVENTS = 100 * len(TABLES)


def _events(spark):
    from pyspark.sql.types import _parse_datatype_string

    rows = []
    for offset in range(EVENTS):
        schema, table = TABLES[offset % len(TABLES)]
        row = event_to_row(RowChange(schema, table, 100 + offset, INSERT, {"id": str(offset)}, None, ("id",),
                                     {"id": "int"}, Position("t", offset % 2, offset)))
        row["after"] = dict(row["after"])
        rows.append(row)
    return spark.createDataFrame(rows, _parse_datatype_string(EVENT_SPARK_SCHEMA)).repartition(2)


def _read_from_cache(frame) -> tuple[set, int]:
    """The frame's rows (offsets, and table index when it has one) and the rows its scans of the cache read (the
    batches they did not rule out)."""
    rows, read = rows_and_scanned(frame, "InMemoryTableScan")
    return {(r["offset"], r[TABLE_INDEX] if TABLE_INDEX in frame.columns else None) for r in rows}, read


def test_a_table_s_events_are_found_by_reading_its_own_batches_of_the_clustered_cache(spark):
    """Clustered by table and cached in small batches, each table's events (one table, a few, or more than an
    IN list prunes by) are exactly those of the same frame unclustered, names matched case-insensitively; and a
    scan reads the batches holding its tables' events, not every event of the run."""
    plain = _events(spark)
    previous = spark.conf.get("spark.sql.inMemoryColumnarStorage.batchSize")
    spark.conf.set("spark.sql.inMemoryColumnarStorage.batchSize", "50")
    try:
        clustered = clustered_by_table(plain).cache()
        assert clustered.count() == EVENTS
        assert _read_from_cache(clustered)[1] == EVENTS
    finally:
        spark.conf.set("spark.sql.inMemoryColumnarStorage.batchSize", previous)
    try:
        # a table's events span at most two batches of each partition: at most four batches of 50 beyond its own
        for schema, table in [("shop", "orders_03"), ("SHOP", "A.B"), ("Shop.A", "b"), ("SHOP", "BÜCHER")]:
            expected, _ = _read_from_cache(table_rows(plain, schema, table, 0, 10_000))
            found, read = _read_from_cache(table_rows(clustered, schema, table, 0, 10_000))
            assert found == expected and len(found) == 100, (schema, table)
            assert read <= 100 + 4 * 50, (schema, table, read)
        for count in (3, 12):  # an IN list, and a range of keys
            ranges = [TableRange("shop", f"ORDERS_{i:02}", 150, 3_000) for i in range(count)]
            expected, _ = _read_from_cache(tables_rows(plain, ranges))
            found, read = _read_from_cache(tables_rows(clustered, ranges))
            assert found == expected and {index for _, index in found} == set(range(count)), count
            assert read <= 100 * count + 4 * 50, (count, read)
        ranges = [TableRange("shop", "bücher", 150, 3_000), TableRange("shop", "orders_01", 150, 3_000)]
        expected, _ = _read_from_cache(tables_rows(plain, ranges))
        found, read = _read_from_cache(tables_rows(clustered, ranges))
        assert found == expected and {index for _, index in found} == {0, 1}
        assert read <= 200 + 4 * 50, read
        found, read = _read_from_cache(table_rows(clustered, "shop", "missing", 0, 10_000))
        assert found == set() and read <= 2 * 50  # at most the batch of each partition its key would sort into
    finally:
        clustered.unpersist()


def test_the_run_caches_the_decode_s_output_grouped_by_table_without_sorting_it(spark, tmp_path):
    """As the engine caches a run's events (``with_table_key`` over ``decode_landed``, no Spark sort): each table's
    events are found by reading its own batches, as from the sorted cache, because the decode tasks hand them
    over grouped by table."""
    import pyarrow.parquet as pq
    from pathlib import Path

    from ticdc_lakehouse.decode import DecoderOptions
    from ticdc_lakehouse.merge.decode_stage import decode_landed
    from ticdc_lakehouse.merge.table_events import with_table_key
    from tests.test_decode_stage import interleaved_landed_batch

    tables = tuple(f"Orders_{i:02}" for i in range(20))
    segment = tmp_path / "segment.parquet"
    pq.write_table(__import__("pyarrow").Table.from_batches([interleaved_landed_batch(2000, tables)]), segment)
    previous = spark.conf.get("spark.sql.inMemoryColumnarStorage.batchSize")
    spark.conf.set("spark.sql.inMemoryColumnarStorage.batchSize", "50")
    try:
        cached = with_table_key(decode_landed(spark, [Path(segment)], {}, "open", DecoderOptions())).cache()
        assert cached.count() == 2002
        plan = cached._jdf.queryExecution().executedPlan().toString()
        assert "Sort [" not in plan
    finally:
        spark.conf.set("spark.sql.inMemoryColumnarStorage.batchSize", previous)
    try:
        for table in ("orders_03", "ORDERS_17"):
            found, read = _read_from_cache(table_rows(cached, "shop", table, 0, 10_000))
            assert len(found) == 100, table
            assert read <= 100 + 2 * 50 * cached.rdd.getNumPartitions(), (table, read)
    finally:
        cached.unpersist()
