"""``MergeChangefeedOperator``: merge what has landed for a changefeed into Iceberg, up to its global resolved ts."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowFailException

from lakehouse_airflow.hooks.lakehouse import text_or_none
from lakehouse_airflow.hooks.spark_submit import (
    MERGE_JOB,
    LakehouseSparkSubmitHook,
    job_environment,
    submit_arguments,
    submit_plan,
)
from lakehouse_airflow.operators.base import LakehouseBaseOperator, jsonable

IN_PROCESS = "in-process"
SPARK_SUBMIT = "spark-submit"


class MergeChangefeedOperator(LakehouseBaseOperator, SparkSubmitOperator):
    """Merge what has landed for a changefeed into Iceberg, up to its global resolved ts.

    ``spark.submit`` in the config chooses how (``submit`` overrides it per task):

    - ``"in-process"`` (default): ``ticdc_lakehouse.commands.pipeline.merge`` with a local Spark session in the task;
    - ``"spark-submit"``: the provider's spark-submit (this class *is* a ``SparkSubmitOperator``) runs
      ``spark_jobs/merge_job.py`` against ``spark.master`` with the jars and conf of ``spark_plan``; the job
      writes its result to a file the task reads back, so XCom is the same in both modes.

    Either way the merge takes the changefeed's lock (``ticdc_lakehouse.runtime.locks``): a second merge of the same
    changefeed -- from another DAG, a backfill or the CLI -- fails fast with ``LockBusy`` and is retried. A wrong
    protocol or an unwritable catalog fails at once, in one line, before any Spark starts. XCom: the merge result.

    :param changefeed: the changefeed (templated; default: the only or first configured one)
    :param protocol: the protocol of the landed messages (templated; default: the changefeed's)
    :param stop_ts: merge no further than this TSO (templated; default: the global resolved ts)
    :param submit: ``"in-process"`` or ``"spark-submit"`` (default: ``spark.submit`` of the config)
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param spark_conn_id: the Spark connection whose extras spark-submit uses (its master is the config's)
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "changefeed", "protocol", "stop_ts")
    ui_color = "#fdf1e0"

    def __init__(self, *, protocol: Optional[str] = None, stop_ts: Optional[int | str] = None,
                 submit: Optional[str] = None, spark_conn_id: str = "spark_default", **kwargs: Any) -> None:
        super().__init__(application=MERGE_JOB, conn_id=spark_conn_id, **kwargs)
        self.protocol = protocol
        self.stop_ts = stop_ts
        self.submit = submit

    def _stop_ts(self) -> Optional[int]:
        text = text_or_none(self.stop_ts)
        return None if text is None else int(text)

    def execute(self, context) -> dict[str, Any]:
        hook = self.lakehouse_hook()
        settings, name = hook.resolve(self.changefeed)
        protocol = text_or_none(self.protocol)
        from ticdc_lakehouse.commands.preflight import PreflightError, preflight

        try:  # a wrong protocol or an unwritable catalog path: retrying cannot fix it, fail now in one line
            preflight(settings, name, protocol, protocol_given_as=f"task {self.task_id}: protocol")
        except PreflightError as exc:
            raise AirflowFailException(str(exc)) from None
        mode = self.submit or settings.spark.submit
        if mode == IN_PROCESS:
            from ticdc_lakehouse.commands.pipeline import merge

            result = merge(settings, name, protocol, self._stop_ts(), progress=self.log.info)
        elif mode == SPARK_SUBMIT:
            result = self._spark_submit(context, settings, name, protocol, hook.env_overrides(name))
        else:
            raise AirflowFailException(f"spark.submit must be {IN_PROCESS!r} or {SPARK_SUBMIT!r}, not {mode!r}")
        report = result.get("merge") or {}
        from lakehouse_airflow.lineage import changed_tables

        from ticdc_lakehouse.landing.segments import landed_topics

        read = landed_topics(settings.landing_path, name) or list(settings.changefeed(name).topics)
        self._lineage = (settings, name, read, changed_tables(report), False)
        self.log.info("changefeed %s: cut %s (was %s), %s table(s) merged, %s DDL(s), %s halted, %s dead letter(s)",
                      name, report.get("resolved_ts"), report.get("previous_resolved_ts"),
                      len(report.get("tables_merged") or []), len(report.get("ddls_applied") or []),
                      len(report.get("halted") or []), report.get("dead_letters"))
        return jsonable(result)

    def _spark_submit(self, context, settings, name: str, protocol: Optional[str],
                      overrides: Mapping[str, str]) -> dict[str, Any]:
        plan = submit_plan(settings, f"lakehouse-merge-{name}")
        runs = settings.home / "airflow" / "results"
        runs.mkdir(parents=True, exist_ok=True)
        handle, result_file = tempfile.mkstemp(prefix=f"merge-{name}-", suffix=".json", dir=runs)
        os.close(handle)
        try:
            self.application = MERGE_JOB
            self.conf = plan["conf"]
            self._hook = LakehouseSparkSubmitHook(
                master=plan["master"], conf=plan["conf"], conn_id=self._conn_id, jars=plan["jars"],
                driver_class_path=plan["driver_class_path"], driver_memory=plan["driver_memory"],
                executor_memory=plan["executor_memory"], name=plan["name"],
                application_args=submit_arguments(settings, name, protocol, self._stop_ts(), result_file),
                env_vars=job_environment(settings, overrides), spark_binary=self._spark_binary or "spark-submit",
                verbose=self._verbose, status_poll_interval=self._status_poll_interval,
            )
            super().execute(context)
            text = Path(result_file).read_text()
            if not text.strip():
                raise RuntimeError(f"{MERGE_JOB} exited without writing its result to {result_file}")
            return json.loads(text)
        finally:
            Path(result_file).unlink(missing_ok=True)
