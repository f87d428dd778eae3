"""``lakehouse demo``: the whole path on embedded defaults, in a few minutes, with nothing to configure.

It generates a realistic TiCDC workload for a sample shop schema (several tables, DDL mid-stream, three
partitions whose resolved ts lag each other, a replayed partition tail, primary-key changes), writes it as an
archived Kafka topic (the broker's own log-segment files), backfills it into Iceberg, grows the archive and
backfills again (incrementally), then shows the tables, the schema change and a time-travel query by TSO, and
checks every table against the simulated upstream.

The demo keeps its state in ``$LAKEHOUSE_HOME/demo`` and starts from scratch each time, so it never touches a
real deployment's tables.
"""

from __future__ import annotations

import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from ticdc_lakehouse.runtime.config import Settings, load_settings
from ticdc_lakehouse.commands.output import json_value, table_text

TOPIC = "ticdc-demo"


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def _show(spark, sql: str, limit: int = 8) -> list:
    frame = spark.sql(sql)
    rows = [tuple(r) for r in frame.limit(limit).collect()]
    print(f"lakehouse sql \"{sql}\"")
    print(table_text(frame.columns, rows))
    return rows


def _compare(spark, workload, cut: int) -> bool:
    """Every lake table equals the simulated upstream at ``cut``."""
    ok = True
    state = workload.state_at(cut)
    for name, expected in workload.expected_json(cut).items():
        table = state[name.split(".", 1)[1]]
        order = ", ".join(f"`{k}`" for k in table.primary_key)
        frame = spark.sql(f"SELECT * FROM {name} ORDER BY {order}")
        got = [{c: json_value(v) for c, v in zip(frame.columns, r)} for r in frame.collect()]
        same = got == expected
        ok &= same
        print(f"  {name:<24} {len(got):>4} rows  {'equal to upstream' if same else 'DIFFERENT from upstream'}")
    return ok


def demo_settings(settings: Settings) -> Settings:
    home = settings.home / "demo"
    env = {"LAKEHOUSE_HOME": str(home)}
    fresh = load_settings(settings.source_file, env=env) if settings.source_file else load_settings(env=env)
    return replace(fresh, raw={**fresh.raw, "changefeeds": {}}, changefeeds={})


def run_demo(settings: Settings, protocol: str = "open", transactions: int = 60) -> int:
    from ticdc_lakehouse.runtime.spark_session import get_spark

    started = time.monotonic()
    demo = demo_settings(settings)
    shutil.rmtree(demo.home, ignore_errors=True)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-workload") as generator:
        # the workload is generated and archived (pure Python) while this thread starts Spark (mostly waiting on
        # the JVM); the session stays this thread's, as the Spark calls that follow expect
        generated = generator.submit(_first_archive, demo.home / "archive", protocol, transactions)
        spark = get_spark(demo, "lakehouse-demo")
        workload = generated.result()
    return _backfill_and_check(demo, spark, workload, protocol, transactions, started)


def _first_archive(archive: Path, protocol: str, transactions: int):
    """Step 1: the workload's first two thirds (with DDL mid-stream and a replayed tail), as an archived topic."""
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    _banner(f"1. A TiCDC changefeed ({protocol}) for schema `shop`, archived as Kafka log segments")
    workload = Workload(seed=11, partitions=3)
    workload.create_sample_tables()
    workload.resolve(final=True)
    first = transactions * 2 // 3
    for i in range(first):
        workload.transaction(workload.rng.randint(1, 5))
        if i % 3 == 2:
            workload.resolve()
        if i == first // 2:
            workload.add_column("orders", "discount", "decimal(5,2)")
            workload.modify_column("orders", "qty", "bigint")
    workload.replay_tail(1, 4)
    workload.resolve()
    records = write_to_archive(workload, archive, TOPIC, protocol)
    print(f"wrote {records} TiCDC messages to {archive}/{TOPIC}-{{0,1,2}}/*.log")
    print(f"partition resolved ts: {workload.resolved} (they lag each other; the global one is the minimum)")
    return workload


def _backfill_and_check(demo: Settings, spark, workload, protocol: str, transactions: int, started: float) -> int:
    """Steps 2-5: backfill, grow and backfill again, time travel, status; every table checked against upstream."""
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.commands.timetravel import as_of_sql
    from ticdc_lakehouse.sim.workload import write_to_archive

    archive = demo.home / "archive"
    first = transactions * 2 // 3
    _banner("2. lakehouse backfill --archive ...  (land the segments, merge up to the global resolved ts)")
    say = _progress()
    result = backfill(demo, archive, protocol=protocol, spark=spark, progress=say)
    cut1 = result["merge"]["resolved_ts"]
    _summary(result)
    ok = _compare(spark, workload, cut1)
    _show(spark, "SELECT id, customer_id, amount, status, qty, discount FROM shop.orders ORDER BY id")

    _banner("3. The archive grows: a column is renamed upstream, more transactions; backfill again (incremental)")
    for i in range(transactions - first):
        workload.transaction(workload.rng.randint(1, 5))
        if i == 2:
            workload.rename_column("customers", "email", "contact_email")
        if i % 3 == 2:
            workload.resolve()
    workload.resolve(final=True)
    records = write_to_archive(workload, archive, TOPIC, protocol)
    print(f"appended {records} messages")
    result = backfill(demo, archive, protocol=protocol, spark=spark, progress=say)
    cut2 = result["merge"]["resolved_ts"]
    _summary(result)
    ok &= _compare(spark, workload, cut2)
    _show(spark, "DESCRIBE shop.customers", limit=20)
    _show(spark, "SELECT snapshot_id, operation, summary['tidb.resolved-ts'] AS resolved_ts, "
                 "summary['tidb.ddl'] AS ddl FROM shop.customers.snapshots ORDER BY committed_at", limit=20)

    _banner(f"4. Time travel: every table as of the first cut (lakehouse sql ... --as-of-tso {cut1})")
    sql = as_of_sql(spark, demo, "SELECT * FROM shop.customers ORDER BY id", cut1)
    print(f"rewritten: {sql}")
    rows = _show(spark, sql, limit=5)
    print(f"({len(rows)} shown) the old column name `email` is back: the snapshot keeps its schema")
    print(f"plain Spark: SELECT * FROM shop.customers VERSION AS OF 'tso_{cut1}'")
    then = workload.expected_json(cut1)
    counts = _counts(spark, {name: as_of_sql(spark, demo, f"SELECT * FROM {name}", cut1) for name in then})
    for name, expected in then.items():
        got = counts[name]
        same = got == len(expected)
        ok &= same
        print(f"  {name:<24} {got:>4} rows as of cut 1  {'equal to upstream then' if same else 'DIFFERENT'}")

    _banner("5. Status")
    from ticdc_lakehouse.commands.status import collect_status, render_status

    print(render_status(collect_status(demo, kafka=False, spark=spark)))
    print(f"\ndemo {'OK' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s; state in {demo.home}")
    print(next_steps(demo.home, cut1))
    return 0 if ok else 1


def _counts(spark, queries: dict[str, str]) -> dict[str, int]:
    """The row count of each query, in one Spark job (a UNION ALL) rather than one job per table."""
    union = " UNION ALL ".join(f"SELECT {index} AS i, count(*) AS n FROM ({sql})"
                               for index, sql in enumerate(queries.values()))
    got = dict(tuple(row) for row in spark.sql(union).collect())
    return {name: int(got[index]) for index, name in enumerate(queries)}


def _progress():
    """The CLI's progress: Spark task counts on one live line on a terminal, plain indented lines otherwise."""
    if sys.stdout.isatty():
        from ticdc_lakehouse.commands.progress import Reporter

        return Reporter("demo", human=True, stream=sys.stdout)
    return lambda message: print(f"  {message}", flush=True)


def _summary(result) -> None:
    from ticdc_lakehouse.commands.summary import render_summary

    print("\n".join("  " + line for line in render_summary(result).splitlines()))


def next_steps(home: Path, cut: int) -> str:
    """Where to go after the demo: its lake from the CLI, a time-travel query, other readers, Airflow."""
    env = f"LAKEHOUSE_HOME={home}"
    return "\n".join([
        "",
        "Where to go next (the demo's lake stays until the next demo run):",
        f"  {env} .venv/bin/lakehouse status --no-kafka",
        f"  {env} .venv/bin/lakehouse sql \"SELECT * FROM shop.orders ORDER BY id\" --limit 5",
        f"  {env} .venv/bin/lakehouse sql \"SELECT count(*) FROM shop.orders\" --as-of-tso {cut}   # time travel",
        "  without Spark: README 'Reading the lake without Spark' (pyiceberg, DuckDB)",
        "  Airflow (README 'Airflow', quick start): source scripts/airflow_env.sh && airflow db migrate",
        "    python -m lakehouse_airflow.pools \"$AIRFLOW_HOME/pools.json\" && airflow pools import \"$AIRFLOW_HOME/pools.json\"",
        "    airflow standalone   # UI http://localhost:8080, user admin, password printed at start; Ctrl-C stops it",
        "    then in a second shell: source scripts/airflow_env.sh && airflow dags unpause lakehouse_backfill",
        f"    airflow dags trigger lakehouse_backfill --conf '{{\"archive\": \"{home / 'archive'}\"}}'",
        "    airflow dags list-runs lakehouse_backfill   # until success; then: airflow assets list",
        "  your own changefeed: conf/lakehouse.toml [changefeeds.<name>], then .venv/bin/lakehouse run",
    ])

