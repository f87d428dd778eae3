"""``lakehouse``: the command line. Thin: every command calls the same library functions as the Airflow tasks.

Each command imports what it runs inside its function, on purpose: ``lakehouse --help``, ``status`` and a
mistyped option answer in a fraction of a second instead of loading pyspark, pyarrow and the merge engine first
(``tests/test_import_graph.py`` still counts those imports, so they can hide no circle).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.decode.protocols import ENCODABLE
from ticdc_lakehouse.commands.preflight import PreflightError, preflight


def _settings(args: argparse.Namespace):
    return load_settings(args.config)


def _progress(args: argparse.Namespace):
    """Progress for people on a terminal (with Spark task counts); one JSON object per line (for log collectors)
    when stderr is not a terminal or ``--format json`` was asked for."""
    from ticdc_lakehouse.commands.progress import Reporter

    return Reporter(args.command, human=sys.stderr.isatty() and _format(args) != "json")


def _format(args: argparse.Namespace) -> str:
    """``text`` (the human summary) or ``json`` (the full report); ``auto``: text on a terminal, else json."""
    chosen = getattr(args, "format", None) or "auto"
    if chosen == "auto":
        return "text" if sys.stdout.isatty() else "json"
    return chosen


def _report(args: argparse.Namespace, result: dict, one_line: bool = False) -> int:
    """Print a pipeline result (summary text or JSON, per --format; ``one_line``: JSON on one line, one per cycle
    of ``run --every``); the exit code is 1 when it is not ``ok``."""
    if _format(args) == "json":
        print(json.dumps(result, default=str, indent=None if one_line else 2), flush=True)
    else:
        from ticdc_lakehouse.commands.summary import render_summary

        print(render_summary(result), flush=True)
    return 0 if result.get("ok", True) else 1


def cmd_sql(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.output import json_lines, table_text
    from ticdc_lakehouse.runtime.spark_session import get_spark
    from ticdc_lakehouse.commands.timetravel import AsOfError, as_of_sql, datetime_to_tso, parse_time

    settings = _settings(args)
    spark = get_spark(settings, "lakehouse-sql")
    sql = args.query
    try:
        tso = args.as_of_tso
        if args.as_of_time:
            tso = datetime_to_tso(parse_time(args.as_of_time))
        if tso is not None:
            sql = as_of_sql(spark, settings, sql, int(tso), args.changefeed)
    except AsOfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    statements = split_statements(sql)
    for statement in statements[:-1]:
        spark.sql(statement)
    frame = spark.sql(statements[-1])
    columns = frame.columns
    if args.format == "json":
        float32 = [f.name for f in frame.schema.fields if f.dataType.typeName() == "float"]
        for line in json_lines(columns, (tuple(r) for r in frame.toLocalIterator()), float32):
            print(line)
    else:
        rows = ([tuple(r) for r in frame.limit(args.limit).collect()] if args.limit
                else [tuple(r) for r in frame.collect()])
        print(table_text(columns, rows))
    return 0


def split_statements(sql: str) -> list[str]:
    """Split on top-level semicolons (sqlglot's tokenizer knows strings, comments and quoted names)."""
    from sqlglot.dialects.spark import Spark
    from sqlglot.tokens import TokenType

    cuts = [t.start for t in Spark().tokenize(sql) if t.token_type == TokenType.SEMICOLON]
    parts, start = [], 0
    for cut in cuts:
        parts.append(sql[start:cut])
        start = cut + 1
    parts.append(sql[start:])
    statements = [p.strip() for p in parts if p.strip()]
    return statements or [sql]


def cmd_backfill(args: argparse.Namespace) -> int:
    settings = _settings(args)
    preflight(settings, args.changefeed, args.protocol, archive=Path(args.archive))
    spark = _starting_spark(settings, args.changefeed, args.protocol)
    from ticdc_lakehouse.commands.pipeline import backfill  # imported while the JVM starts

    result = backfill(settings, Path(args.archive), changefeed=args.changefeed, protocol=args.protocol,
                      stop_ts=args.stop_ts, progress=_progress(args), spark=spark)
    return _report(args, result)


def cmd_run(args: argparse.Namespace) -> int:
    if args.cycles is not None and args.every is None:
        print("error: --cycles counts the cycles of --every; give --every SECONDS too", file=sys.stderr)
        return 2
    if args.every is not None and (args.every < 0 or (args.cycles is not None and args.cycles < 1)):
        print("error: --every takes seconds >= 0 and --cycles a count >= 1", file=sys.stderr)
        return 2
    settings = _settings(args)
    preflight(settings, args.changefeed, kafka=True)
    spark = _starting_spark(settings, args.changefeed)
    from ticdc_lakehouse.commands.pipeline import run_cycle  # imported while the JVM starts

    if args.every is None:
        result = run_cycle(settings, changefeed=args.changefeed, progress=_progress(args), spark=spark)
        return _report(args, result)
    from ticdc_lakehouse.commands.continuous import run_every, stop_on_sigterm
    from ticdc_lakehouse.runtime.spark_session import session_of

    session = session_of(spark, settings, "lakehouse-merge")  # one warm session for every cycle

    def cycle() -> dict:
        return run_cycle(settings, changefeed=args.changefeed, progress=_progress(args), spark=session)

    with stop_on_sigterm() as stop:
        return run_every(cycle, lambda result: _report(args, result, one_line=True), args.every, args.cycles, stop)


def _starting_spark(settings, changefeed: Optional[str] = None, protocol: Optional[str] = None):
    """The merge's session, starting now (``spark_session.SparkStart``): the pipeline's imports and the landing
    run while the JVM starts, the decode's Python workers start while the session is created, and Spark's SQL
    parser warms up while the merge reads its state."""
    from ticdc_lakehouse.runtime.spark_session import SparkStart

    chosen = protocol or settings.changefeed(changefeed).protocol

    def start_workers(context) -> None:
        from ticdc_lakehouse.merge.decode_stage import warm_decode_workers

        warm_decode_workers(context, chosen)

    def warm_parser(spark) -> None:
        from ticdc_lakehouse.merge.changes import warm_sql_parser

        warm_sql_parser(spark)

    return SparkStart(settings, "lakehouse-merge", then=warm_parser, on_context=start_workers)


def cmd_land(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.pipeline import land

    settings = _settings(args)
    preflight(settings, args.changefeed, kafka=True)
    result = land(settings, changefeed=args.changefeed, progress=_progress(args))
    print(json.dumps(result, default=str, indent=2))
    return 0 if result.get("ok", True) else 1


def cmd_merge(args: argparse.Namespace) -> int:
    settings = _settings(args)
    preflight(settings, args.changefeed, args.protocol)
    spark = _starting_spark(settings, args.changefeed, args.protocol)
    from ticdc_lakehouse.commands.pipeline import merge  # imported while the JVM starts

    result = merge(settings, changefeed=args.changefeed, protocol=args.protocol, stop_ts=args.stop_ts,
                   progress=_progress(args), spark=spark)
    return _report(args, result)


def cmd_status(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.status import collect_status, render_status

    status = collect_status(_settings(args), changefeed=args.changefeed, kafka=not args.no_kafka)
    if args.format == "json":
        print(json.dumps(status, default=str, indent=2))
    else:
        print(render_status(status))
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.maintenance import maintain

    result = maintain(_settings(args), changefeed=args.changefeed, dry_run=args.dry_run, progress=_progress(args),
                      upgrade_format=args.upgrade_format)
    print(json.dumps(result, default=str, indent=2))
    return 0 if result.get("ok", True) else 1


def _acted(count: int, done: str, nothing: str) -> int:
    """An operator action's outcome: ``done`` when it changed something, else ``nothing`` on stderr and exit 1."""
    if count == 0:
        print(nothing, file=sys.stderr)
        return 1
    print(done)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.pipeline import resume_table

    action = "skip" if args.skip_ddl else "retry"
    count = resume_table(_settings(args), args.table, action, changefeed=args.changefeed)
    return _acted(count, f"{args.table}: halt resolved ({action}); the next merge run continues it",
                  nothing=f"{args.table} is not halted")


def cmd_create_tables(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.seed_tables import create_tables

    text = Path(args.ddl).read_text(encoding="utf-8")
    result = create_tables(_settings(args), text, default_schema=args.database or "", changefeed=args.changefeed)
    for label in result["created"]:
        print(f"created {label} (watermark 0: every row event of it will be merged with these types)")
    for label in result["existing"]:
        learned = result["members_learned"].get(label)
        if learned:
            print(f"exists  {label} (ENUM/SET column(s) {', '.join(learned)} now hold member names, not numbers)")
        else:
            print(f"exists  {label} (left as it is)")
        for reason in result["members_refused"].get(label, ()):
            print(f"kept    {label}.{reason}", file=sys.stderr)
    for reason in result["ignored"]:
        print(f"ignored {reason}", file=sys.stderr)
    if not result["created"] and not result["existing"]:
        print(f"no CREATE TABLE statement in {args.ddl}", file=sys.stderr)
        return 1
    return 0


def cmd_skip_message(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.commands.pipeline import skip_message

    count = skip_message(_settings(args), args.position, changefeed=args.changefeed)
    return _acted(count, f"{args.position}: skipped; the next merge run sends it to the dead-letter table and goes on",
                  nothing=f"no partition (nor table, at a row) is held at {args.position}")


def cmd_demo(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.sim.demo import run_demo

    return run_demo(_settings(args), protocol=args.protocol, transactions=args.transactions)


def cmd_check(args: argparse.Namespace) -> int:
    from ticdc_lakehouse.runtime.spark_session import (
        ICEBERG_VERSION, StackError, check_pyspark_version, iceberg_aws_jar, iceberg_runtime_jar, jdbc_driver_jar)

    settings = _settings(args)
    try:
        print(f"pyspark {check_pyspark_version()}")
        print(f"iceberg {ICEBERG_VERSION} runtime {iceberg_runtime_jar()}")
        print(f"iceberg {ICEBERG_VERSION} aws bundle {iceberg_aws_jar()}")
        print(f"jdbc driver {jdbc_driver_jar(settings.catalog_uri)}")
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(settings.masked(), indent=2, default=str))
    return 0


def _format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("auto", "text", "json"), default="auto",
                        help="text: a short summary; json: the full report and JSON progress lines "
                             "(auto: text on a terminal, json otherwise)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakehouse", description="TiCDC -> Apache Iceberg lakehouse pipeline")
    parser.add_argument("--config", help="config file (default: $LAKEHOUSE_CONFIG or conf/lakehouse.toml)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sql", help="run Spark SQL against the lake (catalog 'lake' is current)")
    p.add_argument("query")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--limit", type=int, default=0, help="table format: at most this many rows (0: all)")
    p.add_argument("--as-of-tso", type=int, help="read every table at the greatest applied cut <= this TSO")
    p.add_argument("--as-of-time", help="same, by upstream wall-clock time 'YYYY-MM-DD HH:MM:SS' (UTC)")
    p.add_argument("--changefeed")
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("backfill", help="land an archived topic (Kafka log segments) and merge it")
    p.add_argument("--archive", required=True, help="directory with <topic>-<partition>/<offset>.log files")
    p.add_argument("--protocol", help="protocol of the archived messages (default: the changefeed's, else open)")
    p.add_argument("--changefeed")
    p.add_argument("--stop-ts", type=int, help="merge no further than this TSO")
    _format_option(p)
    p.set_defaults(func=cmd_backfill)

    p = sub.add_parser("run", help="one scheduled cycle without Airflow: land from Kafka, then merge")
    p.add_argument("--changefeed")
    p.add_argument("--every", type=float, metavar="SECONDS",
                   help="keep running: a cycle every SECONDS (start to start) in one warm driver, until SIGTERM or "
                        "a cycle fails (exit code: that cycle's)")
    p.add_argument("--cycles", type=int, help="with --every: stop after this many cycles")
    _format_option(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("land", help="land new Kafka records only")
    p.add_argument("--changefeed")
    p.set_defaults(func=cmd_land)

    p = sub.add_parser("merge", help="merge what has landed, up to the global resolved ts")
    p.add_argument("--changefeed")
    p.add_argument("--protocol")
    p.add_argument("--stop-ts", type=int)
    _format_option(p)
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("status", help="lag, resolved ts, applied cut, halted tables, dead letters")
    p.add_argument("--changefeed")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--no-kafka", action="store_true", help="do not ask Kafka for end offsets")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("maintain", help="compaction, delete-file rewrite, snapshot expiry, orphan cleanup")
    p.add_argument("--changefeed")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--upgrade-format", action="store_true",
                   help="first set tables still at Iceberg format v2 to v3 (deletion vectors; one-way)")
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("resume", help="resume a table halted at a DDL")
    p.add_argument("table", help="schema.table")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--skip-ddl", action="store_true", help="treat the DDL as applied (you changed the table)")
    group.add_argument("--retry", action="store_true", help="apply the DDL again on the next run")
    p.add_argument("--changefeed")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("create-tables", help="create lake tables from upstream CREATE TABLE statements (before "
                                             "their rows arrive: exact ENUM/SET members and DECIMAL precision); "
                                             "tables typed from rows learn their ENUM/SET members")
    p.add_argument("--ddl", required=True, help="SQL file: SHOW CREATE TABLE output or mysqldump --no-data")
    p.add_argument("--database", help="database of unqualified CREATE TABLE statements (or USE db; in the file)")
    p.add_argument("--changefeed")
    p.set_defaults(func=cmd_create_tables)

    p = sub.add_parser("skip-message", help="let a partition held at an undecodable message go on (dead-letter it)")
    p.add_argument("position", help="TOPIC/PARTITION/OFFSET, as lakehouse status shows it")
    p.add_argument("--changefeed")
    p.set_defaults(func=cmd_skip_message)

    p = sub.add_parser("demo", help="generate a TiCDC workload, backfill it, show tables and time travel")
    p.add_argument("--protocol", default="open", choices=ENCODABLE)
    p.add_argument("--transactions", type=int, default=60)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("check", help="verify the installed stack and print the (masked) configuration")
    p.set_defaults(func=cmd_check)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # -v is for our steps, not every py4j call and callback
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except PreflightError as exc:  # found before any work started: what, where, what to do
        if args.verbose:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one clear line for the user, the traceback with -v
        if args.verbose:
            raise
        from ticdc_lakehouse.core.redaction import mask_uri_password

        print(f"error: {type(exc).__name__}: {mask_uri_password(str(exc))}", file=sys.stderr)
        return 1


def run() -> None:
    """The ``lakehouse`` command: ``main``, then the process ends with its exit code at once.

    Why at once: once the command has printed its result, the interpreter's normal exit still tears down every
    module it imported, one object at a time (pyspark, pyarrow, pandas, sqlglot, pyiceberg and SQLAlchemy: about
    0.2 s of every run), for nothing: the process ends anyway, the driver JVM stops when its pipe closes, and no
    work of the command is left (it returns after its last commit). As the normal exit does, it first waits for
    any thread that is not a daemon, then flushes the output and shuts logging down; no atexit handler of ours
    needs to run (the connection folder of a driver still starting is removed here, see
    ``driver_launch.remove_starting_connections``)."""
    import threading

    code = main()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe (``| head``): what Python's own exit reports as 120
        code = code or 120
    logging.shutdown()
    from ticdc_lakehouse.runtime.driver_launch import remove_starting_connections

    remove_starting_connections()  # a driver may still be starting on its daemon thread
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
