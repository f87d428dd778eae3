"""What every spark-submit entry point (``spark_jobs/*.py``) does around its pipeline call.

Settings come from the environment exactly as for the CLI (never from the command line, so secrets stay out of
process listings); the session is the one spark-submit created; the result dict is printed as JSON and written
atomically to ``--result-file`` so the submitting Airflow task can read it back for XCom.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional


def job_parser(prog: str, doc: str, app_name: str, verb: str, messages: str) -> argparse.ArgumentParser:
    """The options every job shares; ``verb`` ("merge", "land into") and ``messages`` ("landed", "archived") word
    the help of --changefeed and --protocol."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--changefeed", help=f"changefeed to {verb} (default: the only/first configured one)")
    parser.add_argument("--protocol", help=f"protocol of the {messages} messages (default: the changefeed's)")
    parser.add_argument("--stop-ts", type=int, help="merge no further than this TSO")
    parser.add_argument("--config", help="config file (default: $LAKEHOUSE_CONFIG or conf/lakehouse.toml)")
    parser.add_argument("--result-file", help="also write the JSON result here")
    parser.add_argument("--app-name", default=app_name)
    return parser


def write_result(result: dict, result_file: Optional[str]) -> None:
    text = json.dumps(result, default=str)
    print(text, flush=True)
    if result_file:
        path = Path(result_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def run_spark_job(args: Any, work: Callable[..., dict], fail_when_not_ok: bool = True) -> int:
    """``work(settings, spark, progress)`` with a session for ``args.app_name``; exit code 1 when the result is
    not ``ok`` and ``fail_when_not_ok`` (a merge that halted a table still succeeded: publish reports it)."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.iceberg.commit import shutdown_callback_server
    from ticdc_lakehouse.runtime.spark_session import get_spark

    settings = load_settings(args.config)
    spark = get_spark(settings, args.app_name)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        result = work(settings, spark, progress)
    finally:
        shutdown_callback_server(spark)
        spark.stop()
    write_result(result, args.result_file)
    return 0 if result.get("ok", True) or not fail_when_not_ok else 1
