"""Written data files reach an Iceberg append in one gateway call (iceberg/file_appender.py): the table then
reads them with their rows, partitions and metrics, whatever characters their paths hold."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ticdc_lakehouse.iceberg.file_appender import FileEntry, add_files

pytestmark = pytest.mark.spark


def _parquet(path, ids: list[int]) -> int:
    """A data file with the table's field ids, as the task-side writer writes them; its size."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
                        pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"})])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=schema), path)
    return path.stat().st_size


def test_files_with_row_counts_or_full_metrics_read_back_as_the_table(spark, settings):
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg

    ji = JavaIceberg(spark, settings.catalog_name)
    ji.create_namespace("app")
    schema = ji.build_schema([("id", "bigint", True, None), ("v", "string", False, None)], ["id"])
    ji.create_table("app", "t", schema, ji.bucket_spec(schema, None, 0), {"format-version": "3"},
                    {"tidb.resolved-ts": "1"})
    jtable = ji.load("app", "t")
    data = settings.home / "files"
    odd = data / "a dir+with\tplus, space and tab" / "x%41.parquet"  # an upstream name can hold any of these
    entries = [FileEntry(str(data / "small.parquet"), _parquet(data / "small.parquet", [1, 2]), 2, None, False),
               FileEntry(str(odd), _parquet(odd, [3, 4, 5]), 3, None, True)]
    append = jtable.newFastAppend()
    add_files(ji.jvm, append, jtable, entries)
    append.commit()

    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {settings.catalog_name}.app.t").collect()) == [
        1, 2, 3, 4, 5]
    files = {r["file_path"]: r for r in spark.sql(
        f"SELECT file_path, record_count, lower_bounds FROM {settings.catalog_name}.app.t.files").collect()}
    assert set(files) == {e.path for e in entries}
    assert files[str(odd)]["record_count"] == 3 and files[str(odd)]["lower_bounds"]  # read from its footer
    assert files[entries[0].path]["record_count"] == 2 and not files[entries[0].path]["lower_bounds"]
    # the files reach the table through one manifest written beside its metadata; the snapshot summary still
    # counts their rows, files and bytes, as an append of each file would
    summary = dict(ji.load("app", "t").currentSnapshot().summary())
    size = sum(e.size for e in entries)
    assert (summary["added-data-files"], summary["total-data-files"]) == ("2", "2")
    assert (summary["added-records"], summary["total-records"]) == ("5", "5")
    assert (summary["added-files-size"], summary["total-files-size"]) == (str(size), str(size))
    manifests = spark.sql(f"SELECT path FROM {settings.catalog_name}.app.t.manifests").collect()
    assert len(manifests) == 1 and "/metadata/" in manifests[0]["path"]
