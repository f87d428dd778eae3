"""A run's decoded events as Parquet files (merge/decoded_files.py): the files' layout, finding a table's events
in them, a retried task, and backfills through them against backfills through Spark's cache."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ticdc_lakehouse.landing.storage import ObjectPath
from ticdc_lakehouse.merge.decoded_files import (
    STAGED_ARROW_SCHEMA, decoded_root, staged_keys, uses_files, write_grouped,
)
from ticdc_lakehouse.merge.table_events import STAGED_KEY
from tests.lake_helpers import rows_and_scanned


def _row_groups(keys: list, group: int) -> list[tuple]:
    """(first key, last key, events) of each row group ``write_grouped`` writes for events of these keys."""
    events = pa.table({STAGED_KEY: pa.array(keys, pa.string())})
    buffer = io.BytesIO()
    with pq.ParquetWriter(buffer, events.schema) as writer:
        write_grouped(writer, events, group)
    written = pq.ParquetFile(io.BytesIO(buffer.getvalue()))
    groups = [written.read_row_group(i).column(0).to_pylist() for i in range(written.num_row_groups)]
    return [(g[0], g[-1], len(g)) for g in groups]


def test_a_table_of_many_events_gets_row_groups_of_its_own_and_small_tables_share_one():
    keys = ["a"] * 3 + ["b"] * 4 + ["c"] * 25 + ["d"] * 2 + ["e"]
    assert _row_groups(keys, 10) == [("a", "b", 7), ("c", "c", 10), ("c", "c", 10), ("c", "c", 5), ("d", "e", 3)]
    # a group is full at ten: the third table starts the next
    assert _row_groups(["a"] * 5 + ["b"] * 5 + ["c"] * 5, 10) == [("a", "b", 10), ("c", "c", 5)]
    assert _row_groups([None] * 3 + ["x"] * 11, 10) == [(None, None, 3), ("x", "x", 10), ("x", "x", 1)]
    assert _row_groups([], 10) == []


def test_an_event_s_key_is_its_table_lower_cased_where_its_names_are_ascii():
    batch = pa.RecordBatch.from_pydict(
        {"schema_name": ["Shop", "shop", "Shop", None, "shop"],
         "table_name": ["Orders", "Bücher", "\u212aey", None, None]})
    assert staged_keys(batch).to_pylist() == ["shop\u0000orders", None, None, "", ""]


def test_files_where_the_landing_is_a_file_system_and_spark_fills_no_timestamps():
    assert uses_files("files", Path("/lake/landing"), fills_made_up_ts=False)
    assert not uses_files("cache", Path("/lake/landing"), fills_made_up_ts=False)
    assert not uses_files("files", Path("/lake/landing"), fills_made_up_ts=True)
    assert not uses_files("files", ObjectPath("bucket/landing"), fills_made_up_ts=False)
    with pytest.raises(ValueError, match="merge.decoded_events must be one of files, cache, not 'memory'"):
        uses_files("memory", Path("/lake/landing"), fills_made_up_ts=False)


def _scan_rows(frame) -> tuple[set, int]:
    """The frame's rows (table, offset) and the rows its Parquet scans read (those of the row groups not ruled
    out)."""
    rows, read = rows_and_scanned(frame, "Scan parquet")
    assert read > 0  # the files were scanned: every frame here reads rows of them
    return {(r["table_name"], r["offset"]) for r in rows}, read


@pytest.mark.spark
def test_a_table_s_events_are_read_from_its_own_row_groups_and_none_is_lost_to_its_name(spark, tmp_path):
    """Twenty tables interleaved in a partition, as TiCDC sends them, decoded into files: each table's events are
    found reading about its own row groups; a table named outside ASCII, and an event whose name Spark lower-cases
    to an ASCII table's (a Kelvin sign for a K), are found too (their key is NULL: every pass reads them)."""
    from ticdc_lakehouse.decode import DecoderOptions
    from ticdc_lakehouse.merge.decoded_files import decode_to_files
    from ticdc_lakehouse.merge.table_events import TableRange, table_rows, tables_rows
    from tests.test_decode_stage import interleaved_landed_batch

    tables = tuple(f"Orders_{i:02}" for i in range(20))
    batches = [interleaved_landed_batch(2000, tables), interleaved_landed_batch(30, ("Bücher", "\u212aey"))]
    for number, batch in enumerate(batches):
        pq.write_table(pa.Table.from_batches([batch]), tmp_path / f"segment-{number}.parquet")
    segments = [tmp_path / f"segment-{number}.parquet" for number in range(len(batches))]
    events = decode_to_files(spark, segments, {}, "open", DecoderOptions(), None, None, tmp_path / "decoded", 50)
    assert events.count() == 2000 + 30 + 2 * 2  # each segment: a resolved event and an undecodable record

    for table in ("orders_03", "ORDERS_17"):
        found, read = _scan_rows(table_rows(events, "shop", table, 0, 10_000))
        # its own 100 events, the neighbours' sharing its first and last row group, and the 30 of NULL key
        assert len(found) == 100 and read <= 100 + 2 * 50 * len(segments) + 30, (table, read)
    found, _ = _scan_rows(table_rows(events, "SHOP", "bücher", 0, 10_000))
    assert len(found) == 15
    found, _ = _scan_rows(table_rows(events, "shop", "KEY", 0, 10_000))
    assert len(found) == 15  # "\u212aey" lower-cased by Spark is "key"
    ranges = [TableRange("shop", name, 0, 10_000) for name in (*tables[:12], "key")]
    found, read = _scan_rows(tables_rows(events, ranges))
    assert len(found) == 12 * 100 + 15 and read < 2000


@pytest.mark.spark
def test_a_task_decoding_again_replaces_its_file_instead_of_adding_its_events_twice(spark, tmp_path):
    """A retried or speculative decode task writes the same file name (its partition): decoding the same pieces
    twice into one folder leaves each event once, and no temporary file behind."""
    from ticdc_lakehouse.decode import DecoderOptions
    from ticdc_lakehouse.merge.decoded_files import decode_to_files
    from tests.test_decode_stage import interleaved_landed_batch

    segment = tmp_path / "segment.parquet"
    pq.write_table(pa.Table.from_batches([interleaved_landed_batch(500, ("a", "b"))]), segment)
    for _ in range(2):
        events = decode_to_files(spark, [segment], {}, "open", DecoderOptions(), None, None, tmp_path / "decoded")
    assert events.count() == 502
    assert sorted(p.name for p in (tmp_path / "decoded").iterdir()) == ["part-00000.parquet"]
    assert pq.read_schema(tmp_path / "decoded" / "part-00000.parquet").equals(STAGED_ARROW_SCHEMA)


@pytest.mark.spark
def test_a_backfill_through_files_equals_one_through_the_cache_and_leaves_no_files(spark, tmp_path, monkeypatch,
                                                                                    lakehouse_env):
    """The same archive backfilled with ``merge.decoded_events = "files"`` and ``"cache"`` into two deployments,
    each over what a killed run left: both equal upstream; the files, the run's and the killed run's, are gone."""
    from tests.lake_helpers import assert_lake_equals_upstream
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=11, partitions=3)
    workload.run_script(transactions=24)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    cut = workload.global_resolved_ts()
    for number, mode in enumerate(("files", "cache")):
        monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / mode))
        monkeypatch.setenv("LAKEHOUSE__CATALOG__NAME", f"{lakehouse_env['LAKEHOUSE__CATALOG__NAME']}_{number}")
        monkeypatch.setenv("LAKEHOUSE__MERGE__DECODED_EVENTS", mode)
        settings = load_settings()
        use_catalog(spark, settings)
        killed = decoded_root(settings.landing_path, "default") / "20260101T000000-deadbeef"
        killed.mkdir(parents=True)
        (killed / "part-00000.parquet").write_bytes(b"left by a killed run")
        report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
        assert report["resolved_ts"] == cut and report["dead_letters"] == 0
        assert_lake_equals_upstream(spark, workload, cut)
        assert not decoded_root(settings.landing_path, "default").exists()


@pytest.mark.spark
def test_a_folder_the_decode_cannot_write_fails_the_run_in_one_line_and_commits_nothing(spark, settings, tmp_path):
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.merge.decoded_files import DecodedEventsUnwritable
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=12, partitions=1)
    workload.run_script(transactions=5)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    blocked = decoded_root(settings.landing_path, "default")
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the decoded events' folder goes")
    with pytest.raises(DecodedEventsUnwritable) as failure:
        backfill(settings, archive, protocol="open", spark=spark)
    message = str(failure.value)
    assert "\n" not in message and str(blocked) in message and 'merge.decoded_events = "cache"' in message
    assert not spark.catalog.tableExists("shop.orders")


def test_a_task_that_cannot_write_its_file_fails_with_the_line_the_run_reports(tmp_path):
    """An executor that cannot write (a folder it may not make) fails its task naming the folder and the setting;
    the run finds that line in Spark's error, which carries the task's whole traceback."""
    from ticdc_lakehouse.merge.decoded_files import DecodedEventsUnwritable, _open, unwritable_in

    (tmp_path / "taken").write_text("a file")
    with pytest.raises(DecodedEventsUnwritable) as failure:
        _open(str(tmp_path / "taken" / "run" / ".part-00000.parquet.tmp"))
    line = str(failure.value)
    assert line.startswith(f"cannot write the run's decoded events into {tmp_path / 'taken' / 'run'} (")
    spark_error = Exception(f"Traceback (most recent call last):\n  File ...\n"
                            f"ticdc_lakehouse.merge.decoded_files.DecodedEventsUnwritable: {line}\n\n\tat org...")
    assert str(unwritable_in(spark_error)) == line
    assert unwritable_in(Exception("another failure")) is None
