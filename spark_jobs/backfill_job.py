"""spark-submit entry point: land an archived topic (Kafka log segments) and merge it into Iceberg.

    spark-submit --master spark://host:7077 --jars <iceberg runtime>,<jdbc driver> spark_jobs/backfill_job.py \
        --archive /data/archive --changefeed orders [--protocol open] [--stop-ts TSO] [--result-file out.json]

The same as ``lakehouse backfill`` (``ticdc_lakehouse.commands.pipeline.backfill``), with the session spark-submit
created: the landing runs in the driver, decoding and merging in the executors. A corrupt archive batch lands
what precedes it, the merge still runs, then the job exits non-zero naming the damage. Settings come from the
environment (``LAKEHOUSE_HOME``, ``LAKEHOUSE_CONFIG``, secrets), never from the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    from ticdc_lakehouse.runtime.job_runner import job_parser

    parser = job_parser(
        "backfill_job.py", __doc__, app_name="lakehouse-backfill", verb="land into", messages="archived")
    parser.add_argument("--archive", required=True, help="directory with <topic>-<partition>/<offset>.log files")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from ticdc_lakehouse.runtime.job_runner import run_spark_job
    from ticdc_lakehouse.commands.pipeline import backfill

    return run_spark_job(args, lambda settings, spark, progress: backfill(
        settings, Path(args.archive), changefeed=args.changefeed, protocol=args.protocol, stop_ts=args.stop_ts,
        progress=progress, spark=spark))


if __name__ == "__main__":
    sys.exit(main())
