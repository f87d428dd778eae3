"""What every spark-submit entry point (``spark_jobs/*.py``) does around its pipeline call.

Settings come from the environment exactly as for the CLI (never from the command line, so secrets stay out of
process listings); the session is the one spark-submit created; the result dict is printed as JSON and written
atomically to ``--result-file`` so the submitting Airflow task can read it back for XCom.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional


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
