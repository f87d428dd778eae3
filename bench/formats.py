"""Format benchmark: Iceberg format v2 (position-delete files) against v3 (deletion vectors) under merges.

What a user feels on a merge-on-read table that ``lakehouse maintain`` has not compacted yet: the time of each
merge run, and the time to read the table after many runs. Two tables of the same rows, one v2 and one v3 (the
product's table properties otherwise), get the same change sets: ``--runs`` MERGEs of ``--changes`` keys each
(half updates, a quarter deletes, a quarter new keys), v2 and v3 alternating first. Then each table is read in
full (``--reads`` times, median) and its delete files counted. Printed side by side, one session, one run.

Usage: .venv/bin/python bench/formats.py [--rows 200000] [--runs 50] [--changes 2000] [--reads 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MERGE = ("MERGE INTO {t} t USING src s ON t.id = s.id "
         "WHEN MATCHED AND s.op = 'D' THEN DELETE "
         "WHEN MATCHED THEN UPDATE SET v = s.v, pad = s.pad "
         "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, v, pad) VALUES (s.id, s.v, s.pad)")


def create(spark, name: str, version: int, rows: int) -> None:
    from ticdc_lakehouse.iceberg.tables import table_properties

    props = dict(table_properties("bench", name, "merge-on-read"), **{"format-version": str(version)})
    options = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    spark.sql(f"CREATE TABLE bench.{name} (id bigint NOT NULL, v string, pad string) USING iceberg "
              f"PARTITIONED BY (bucket(8, id)) TBLPROPERTIES ({options})")
    spark.range(rows).selectExpr("id", "concat('v', id) AS v", "repeat('x', 64) AS pad") \
        .writeTo(f"bench.{name}").append()


def change_set(spark, run: int, rows: int, changes: int):
    """``changes`` distinct keys: updates and deletes of existing ids, inserts of ids past the initial rows."""
    new_base = rows + run * changes
    return spark.range(changes).selectExpr(
        f"CASE WHEN id % 4 = 3 THEN {new_base} + id "
        f"ELSE pmod(hash(id, {run}), {rows}) END AS id",
        "CASE id % 4 WHEN 2 THEN 'D' WHEN 3 THEN 'I' ELSE 'U' END AS op",
        f"concat('r{run}-', id) AS v", "repeat('y', 64) AS pad",
    ).dropDuplicates(["id"])


def delete_files(spark, name: str) -> tuple[int, int]:
    row = spark.sql(f"SELECT count_if(file_format = 'PUFFIN') AS dvs, count_if(file_format <> 'PUFFIN') AS other "
                    f"FROM bench.{name}.delete_files").collect()[0]
    return int(row["dvs"]), int(row["other"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument("--reads", type=int, default=3)
    args = parser.parse_args()

    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import get_spark

    home = Path(tempfile.mkdtemp(prefix="bench-formats-"))
    settings = load_settings(env={"LAKEHOUSE_HOME": str(home), "LAKEHOUSE_CONFIG": ""})
    spark = get_spark(settings, "bench-formats")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    tables = {"v2": ("t_v2", 2), "v3": ("t_v3", 3)}
    for name, version in tables.values():
        create(spark, name, version, args.rows)
    merge_s: dict[str, list[float]] = {k: [] for k in tables}
    for run in range(args.runs):
        change_set(spark, run, args.rows, args.changes).cache().createOrReplaceTempView("src")
        spark.table("src").count()
        order = list(tables) if run % 2 == 0 else list(reversed(tables))
        for key in order:
            started = time.perf_counter()
            spark.sql(MERGE.format(t=f"bench.{tables[key][0]}"))
            merge_s[key].append(time.perf_counter() - started)
        spark.catalog.uncacheTable("src")
    read_s: dict[str, list[float]] = {k: [] for k in tables}
    results = {}
    for attempt in range(args.reads):
        for key in (tables if attempt % 2 == 0 else reversed(list(tables))):
            started = time.perf_counter()
            results[key] = spark.sql(f"SELECT count(*) AS n, sum(hash(v, pad)) AS h FROM bench.{tables[key][0]}") \
                .collect()[0]
            read_s[key].append(time.perf_counter() - started)
    assert results["v2"] == results["v3"], results  # the same rows either way
    print(f"format bench: {args.rows:,} rows, {args.runs} merge runs of {args.changes:,} keys "
          f"(1/2 updates, 1/4 deletes, 1/4 inserts), merge-on-read, no compaction; pyspark "
          f"{spark.version}, {results['v2']['n']:,} rows after")
    print(f"{'':24}{'v2 position deletes':>22}{'v3 deletion vectors':>22}{'v3/v2':>8}")

    def line(label: str, v2: float, v3: float, unit: str = "s") -> None:
        print(f"{label:24}{v2:>20.2f} {unit}{v3:>20.2f} {unit}{v3 / v2 if v2 else float('nan'):>8.2f}")

    line("merge, median per run", statistics.median(merge_s["v2"]), statistics.median(merge_s["v3"]))
    line("merge, last 10 runs", statistics.mean(merge_s["v2"][-10:]), statistics.mean(merge_s["v3"][-10:]))
    line("merge, all runs", sum(merge_s["v2"]), sum(merge_s["v3"]))
    line("full read after runs", statistics.median(read_s["v2"]), statistics.median(read_s["v3"]))
    counts = {k: delete_files(spark, tables[k][0]) for k in tables}
    cells = [f"{dvs} / {other}" for dvs, other in (counts["v2"], counts["v3"])]
    print(f"{'delete files (DVs/other)':24}{cells[0]:>22}{cells[1]:>22}")
    spark.stop()


if __name__ == "__main__":
    main()
