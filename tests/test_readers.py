"""Reading the lake without Spark, as the README shows: pyiceberg's ``SqlCatalog`` on the same JDBC catalog
(current state and a cut by its ``tso_`` tag), DuckDB over pyiceberg's Arrow scan, and why reading the Parquet
data files directly is wrong (it ignores the deletes: merge-on-read delete files, or deletion vectors in format
v3, which pyiceberg applies)."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.lake_helpers import lake_rows

pytestmark = pytest.mark.spark


@pytest.fixture
def two_cuts(spark, settings, tmp_path):
    """A backfill, then more changes (updates and deletes) and a second backfill: two tagged cuts. The second
    merges every table (deletion vectors), as it does a table larger than ``merge.rewrite_max_rows``: a small one
    would be rewritten whole, without a deleted row in any data file."""
    from dataclasses import replace

    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=31, partitions=1)
    workload.create_sample_tables()
    for _ in range(12):
        workload.transaction(5)
    workload.resolve(final=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    first = backfill(settings, archive, protocol="open", spark=spark)["merge"]["resolved_ts"]
    for _ in range(12):
        workload.transaction(5)
    workload.resolve(final=True)
    write_to_archive(workload, archive, "ticdc", "open")
    merging = replace(settings, merge=replace(settings.merge, rewrite_max_rows=0))
    second = backfill(merging, archive, protocol="open", spark=spark)["merge"]["resolved_ts"]
    assert second > first
    return workload, first, second


def _rows(arrow_table, keys) -> list[dict]:
    from ticdc_lakehouse.commands.output import json_value

    rows = [{k: json_value(v) for k, v in row.items()} for row in arrow_table.to_pylist()]
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def test_pyiceberg_reads_the_current_state_and_a_tagged_cut(spark, settings, two_cuts):
    from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog

    workload, first, second = two_cuts
    catalog = pyiceberg_catalog(settings)  # SqlCatalog(name, uri=sqlite:///.../catalog.db, warehouse=file://...)
    for name in workload.expected_json(second):
        keys = workload.state_at(second)[name.split(".", 1)[1]].primary_key
        order = ", ".join(keys)
        table = catalog.load_table(name)
        assert _rows(table.scan().to_arrow(), keys) == lake_rows(spark, f"SELECT * FROM {name} ORDER BY {order}")
        tagged = table.snapshot_by_name(f"tso_{first}")
        assert tagged is not None, f"{name} has no tag tso_{first}"
        assert _rows(table.scan(snapshot_id=tagged.snapshot_id).to_arrow(), keys) == lake_rows(
            spark, f"SELECT * FROM {name} VERSION AS OF 'tso_{first}' ORDER BY {order}")
    # the README's example: the first cut differs from the current state somewhere
    orders = catalog.load_table("shop.orders")
    then = orders.scan(snapshot_id=orders.snapshot_by_name(f"tso_{first}").snapshot_id).to_arrow()
    assert _rows(then, ["id"]) != _rows(orders.scan().to_arrow(), ["id"])


def test_duckdb_queries_the_arrow_scan_and_parquet_alone_ignores_deletes(spark, settings, two_cuts):
    import pyarrow.parquet as pq

    from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog

    workload, _, second = two_cuts
    catalog = pyiceberg_catalog(settings)
    stale = []
    for name in workload.expected_json(second):
        table = catalog.load_table(name)
        connection = table.scan().to_duckdb(table_name="t")
        live = connection.execute("SELECT count(*) FROM t").fetchone()[0]
        assert live == lake_rows(spark, f"SELECT count(*) AS n FROM {name}")[0]["n"]
        files = [urlparse(task.file.file_path).path for task in table.scan().plan_files()]
        raw = sum(pq.read_metadata(path).num_rows for path in files)
        assert raw >= live
        if raw > live:
            stale.append(name)
    assert stale, "the updates and deletes of the second run left no deleted row in any data file"
