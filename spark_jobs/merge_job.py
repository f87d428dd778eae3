"""spark-submit entry point: merge what has landed for a changefeed into Iceberg.

    spark-submit --master spark://host:7077 --jars <iceberg runtime>,<jdbc driver> spark_jobs/merge_job.py \
        --changefeed orders [--protocol open] [--stop-ts TSO] [--result-file merge.json]

The Airflow ``MergeChangefeedOperator`` builds that command from ``spark_plan`` when ``spark.submit =
"spark-submit"``. Settings come from the environment exactly as for the CLI (``LAKEHOUSE_HOME``,
``LAKEHOUSE_CONFIG``, ``LAKEHOUSE_CATALOG_PASSWORD``, ...), so secrets never appear on the command line. The
result (the same dict as ``lakehouse merge``) is printed as JSON and written to ``--result-file``: in client
mode the driver runs beside the submitting task, which reads it back for XCom.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    from ticdc_lakehouse.runtime.job_runner import job_parser

    return job_parser("merge_job.py", __doc__, app_name="lakehouse-merge", verb="merge", messages="landed")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from ticdc_lakehouse.runtime.job_runner import run_spark_job
    from ticdc_lakehouse.commands.pipeline import merge

    return run_spark_job(args, lambda settings, spark, progress: merge(
        settings, args.changefeed, args.protocol, args.stop_ts, progress=progress, spark=spark), fail_when_not_ok=False)


if __name__ == "__main__":
    sys.exit(main())
