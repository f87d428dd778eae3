"""Operators: each is a thin shell around one ``ticdc_lakehouse.pipeline`` (or ``maintenance``) function.

The work itself (landing, merging, maintenance) lives in the library so that the CLI, these tasks and the
spark-submit jobs behave identically; an operator only resolves the settings (:class:`LakehouseHook`), calls the
function with the task log as progress callback, and returns the function's JSON result as XCom.

Failures that a retry cannot fix (data lost to retention, a corrupt archive, a table halted at a DDL) raise
``AirflowFailException`` so the task fails at once instead of burning its retries; everything else (broker
unreachable, the changefeed's merge lock held by another run) raises normally and is retried with backoff.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from lakehouse_airflow.env import PROJECT_ROOT
from lakehouse_airflow.hooks import LakehouseHook, LakehouseSparkSubmitHook

MERGE_JOB = str(PROJECT_ROOT / "spark_jobs" / "merge_job.py")
BACKFILL_JOB = str(PROJECT_ROOT / "spark_jobs" / "backfill_job.py")
IN_PROCESS = "in-process"
SPARK_SUBMIT = "spark-submit"
TSO_LOGICAL_BITS = 18


def text_or_none(value: Any) -> Optional[str]:
    """A rendered template as a string; ``None`` for nothing (native rendering turns ``"123"`` into an int and
    non-native rendering turns ``None`` into ``"None"``)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    return str(value)


def jsonable(value: Any) -> Any:
    """What XCom can store: the pipeline's dicts with anything exotic (paths, datetimes) turned into strings."""
    return json.loads(json.dumps(value, default=str))


def only_topics(settings, changefeed: str, topics: Sequence[str]):
    """``settings`` with the changefeed restricted to ``topics`` (one mapped landing task per topic)."""
    cf = settings.changefeed(changefeed)
    unknown = sorted(set(topics) - set(cf.topics))
    if unknown:
        raise ValueError(f"topic(s) {unknown} are not part of changefeed {cf.name!r} (topics: {list(cf.topics)})")
    narrowed = dataclasses.replace(cf, topics=tuple(topics))
    return dataclasses.replace(settings, changefeeds={**settings.changefeeds, cf.name: narrowed})


class _SettingsMixin:
    """How every lakehouse operator gets its Settings, and reports its lineage (see ``lineage``)."""

    lakehouse_conn_id: str
    config_file: Optional[str]
    #: set by ``execute``: (settings, changefeed, topics read, tables written, landing written)
    _lineage: Optional[tuple[Any, str, Sequence[str], Sequence[str], bool]] = None

    def lakehouse_settings(self, changefeed: Optional[str] = None):
        return LakehouseHook(self.lakehouse_conn_id, self.config_file).get_settings(text_or_none(changefeed))

    def get_openlineage_facets_on_complete(self, task_instance):
        """OpenLineage inputs (Kafka topics) and outputs (Iceberg tables, the landing zone) of the finished task;
        None without the OpenLineage provider."""
        from lakehouse_airflow.lineage import operator_lineage

        if self._lineage is None:
            return None
        settings, changefeed, topics, tables, landing = self._lineage
        return operator_lineage(settings, changefeed, topics, tables, landing)


class LandChangefeedOperator(_SettingsMixin, BaseOperator):
    """Land new Kafka records of a changefeed (or of some of its ``topics``) into the landing zone.

    Landing holds a per-changefeed lock, so mapped per-topic instances must run one at a time
    (``max_active_tis_per_dagrun=1``, as the generated DAGs do); they still retry independently.
    """

    template_fields: Sequence[str] = ("changefeed", "topics")
    ui_color = "#e8f4fd"

    def __init__(self, *, changefeed: Optional[str] = None, topics: Optional[Sequence[str]] = None,
                 lakehouse_conn_id: str = LakehouseHook.default_conn_name, config_file: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changefeed = changefeed
        self.topics = topics
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file

    def execute(self, context) -> dict[str, Any]:
        from ticdc_lakehouse.landing.errors import DataLossError
        from ticdc_lakehouse.pipeline import land

        settings = self.lakehouse_settings(self.changefeed)
        name = settings.changefeed(text_or_none(self.changefeed)).name
        if self.topics:
            settings = only_topics(settings, name, list(self.topics))
        try:
            result = land(settings, name, progress=self.log.info)
        except DataLossError as exc:
            raise AirflowFailException(
                f"{exc} -- retrying cannot bring deleted offsets back; see the landing README section on data loss"
            ) from exc
        self._lineage = (settings, name, list(settings.changefeed(name).topics), [], True)
        landing = result.get("landing") or {}
        self.log.info("changefeed %s: landed %s records, %s bytes in %s new segment(s)", name,
                      landing.get("records"), landing.get("bytes"), landing.get("files"))
        return jsonable(result)


class LandArchiveOperator(_SettingsMixin, BaseOperator):
    """Land an archived topic (a directory of Kafka log segments) for a changefeed: the backfill's first step.

    A corrupt batch lands everything readable before it and then fails this task without retries; the backfill
    DAG still merges what landed (its merge runs with ``trigger_rule="all_done"``) and the run ends failed.
    """

    template_fields: Sequence[str] = ("archive", "changefeed", "topics")
    ui_color = "#e8f4fd"

    def __init__(self, *, archive: str, changefeed: Optional[str] = None, topics: Optional[Sequence[str]] = None,
                 lakehouse_conn_id: str = LakehouseHook.default_conn_name, config_file: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.archive = archive
        self.changefeed = changefeed
        self.topics = topics
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file

    def execute(self, context) -> dict[str, Any]:
        from ticdc_lakehouse.landing import land_from_archive
        from ticdc_lakehouse.landing.errors import ArchiveCorruptError

        archive = text_or_none(self.archive)
        if archive is None or not Path(archive).is_dir():
            raise AirflowFailException(f"archive directory {self.archive!r} does not exist")
        settings = self.lakehouse_settings(self.changefeed)
        name = settings.changefeed(text_or_none(self.changefeed)).name
        progress = _landing_progress(self.log.info)
        try:
            report = land_from_archive(Path(archive), settings.landing_path, name,
                                       topics=list(self.topics) if self.topics else None, progress=progress)
        except ArchiveCorruptError as exc:
            landed = getattr(exc, "report", None)
            if landed is not None:
                self.log.error("landed before the corrupt batch: %s", landed.summary())
            raise AirflowFailException(f"archive {self.archive}: {exc}") from exc
        self.log.info(report.summary())
        from lakehouse_airflow.lineage import archive_topics

        self._lineage = (settings, name, list(self.topics) if self.topics else archive_topics(archive), [], True)
        return jsonable({"ok": True, "changefeed": name, "landing": report.to_dict()})


def _landing_progress(say):
    def notify(item) -> None:
        say(f"landed {item.topic}[{item.partition}] offsets {item.start}..{item.end}: {item.records} records")

    return notify


def submit_arguments(settings, changefeed: str, protocol: Optional[str], stop_ts: Optional[int],
                     result_file: str) -> list[str]:
    """``merge_job.py`` arguments for one merge (pure)."""
    args = ["--changefeed", changefeed, "--result-file", result_file]
    if protocol:
        args += ["--protocol", str(protocol)]
    if stop_ts not in (None, ""):
        args += ["--stop-ts", str(int(stop_ts))]
    return args


def submit_plan(settings, app_name: str) -> dict[str, Any]:
    """What spark-submit needs, from ``spark_plan``: no secret ever goes on the command line.

    The catalog password (and any other secret-looking Spark setting) is left out of ``--conf``: the job
    resolves the same Settings from its environment and ``get_spark`` sets them inside the driver.
    """
    from ticdc_lakehouse.redaction import is_secret_key
    from ticdc_lakehouse.spark_session import session_plan

    plan = session_plan(settings, app_name)
    conf = {key: value for key, value in plan.conf.items() if not is_secret_key(key)}
    return {
        "master": plan.master,
        "name": plan.app_name,
        "conf": conf,
        "jars": ",".join(plan.jars),
        "driver_class_path": os.pathsep.join(plan.jars),
        "driver_memory": settings.spark.driver_memory,
        "executor_memory": settings.spark.executor_memory,
    }


def job_environment(settings, overrides: Mapping[str, str]) -> dict[str, str]:
    """The environment of a spark-submit job: same deployment, same config file, same secrets, venv tools first."""
    env = dict(overrides)  # the rest of the worker's environment is inherited by spark-submit
    env["LAKEHOUSE_HOME"] = str(settings.home)
    if settings.source_file is not None:
        env["LAKEHOUSE_CONFIG"] = str(settings.source_file)
    env["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
    env["PATH"] = os.pathsep.join(dict.fromkeys([str(Path(sys.executable).parent)]
                                                + os.environ.get("PATH", os.defpath).split(os.pathsep)))
    return env


class MergeChangefeedOperator(_SettingsMixin, SparkSubmitOperator):
    """Merge what has landed for a changefeed into Iceberg, up to its global resolved ts.

    ``spark.submit`` in the config chooses how (``submit`` overrides it per task):

    - ``"in-process"`` (default): ``ticdc_lakehouse.pipeline.merge`` with a local Spark session in the task;
    - ``"spark-submit"``: the provider's spark-submit (this class *is* a ``SparkSubmitOperator``) runs
      ``spark_jobs/merge_job.py`` against ``spark.master`` with the jars and conf of ``spark_plan``; the job
      writes its result to a file the task reads back, so XCom is the same in both modes.

    Either way the merge takes the changefeed's lock (``ticdc_lakehouse.locks``): a second merge of the same
    changefeed -- from another DAG, a backfill or the CLI -- fails fast with ``LockBusy`` and is retried.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "changefeed", "protocol", "stop_ts")
    ui_color = "#fdf1e0"

    def __init__(self, *, changefeed: Optional[str] = None, protocol: Optional[str] = None,
                 stop_ts: Optional[int | str] = None, submit: Optional[str] = None,
                 lakehouse_conn_id: str = LakehouseHook.default_conn_name, config_file: Optional[str] = None,
                 spark_conn_id: str = "spark_default", **kwargs: Any) -> None:
        super().__init__(application=MERGE_JOB, conn_id=spark_conn_id, **kwargs)
        self.changefeed = changefeed
        self.protocol = protocol
        self.stop_ts = stop_ts
        self.submit = submit
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file

    def _stop_ts(self) -> Optional[int]:
        text = text_or_none(self.stop_ts)
        return None if text is None else int(text)

    def execute(self, context) -> dict[str, Any]:
        hook = LakehouseHook(self.lakehouse_conn_id, self.config_file)
        settings = hook.get_settings(text_or_none(self.changefeed))
        name = settings.changefeed(text_or_none(self.changefeed)).name
        protocol = text_or_none(self.protocol)
        from ticdc_lakehouse.preflight import PreflightError, preflight

        try:  # a wrong protocol or an unwritable catalog path: retrying cannot fix it, fail now in one line
            preflight(settings, name, protocol, protocol_given_as=f"task {self.task_id}: protocol")
        except PreflightError as exc:
            raise AirflowFailException(str(exc)) from None
        mode = self.submit or settings.spark.submit
        if mode == IN_PROCESS:
            from ticdc_lakehouse.pipeline import merge

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


def tso_time(tso: int) -> datetime:
    """The upstream wall-clock time of a TSO (its physical part is Unix milliseconds)."""
    return datetime.fromtimestamp((tso >> TSO_LOGICAL_BITS) / 1000, tz=timezone.utc)


def cut_metrics(changefeed: str, merge_result: Mapping[str, Any], now: Optional[float] = None) -> dict[str, Any]:
    """The metrics of one merge (pure): the cut, whether it is new, its tag, freshness, halts, dead letters."""
    from ticdc_lakehouse.decode import PROTOCOLS_WITH_RESOLVED_TS

    report = merge_result.get("merge", merge_result) if merge_result else {}
    resolved = int(report.get("resolved_ts") or 0)
    previous = int(report.get("previous_resolved_ts") or 0)
    new_cut = resolved > previous
    tagged = new_cut and report.get("protocol") in PROTOCOLS_WITH_RESOLVED_TS
    now = time.time() if now is None else now
    return {
        "changefeed": changefeed,
        "run_id": report.get("run_id"),
        "resolved_ts": resolved,
        "previous_resolved_ts": previous,
        "new_cut": new_cut,
        "tag": f"tso_{resolved}" if tagged else None,
        "cut_time": tso_time(resolved).isoformat() if resolved else None,
        "freshness_seconds": round(now - tso_time(resolved).timestamp(), 3) if resolved else None,
        "events_read": int(report.get("events_read") or 0),
        "tables_merged": len(report.get("tables_merged") or []),
        "ddls_applied": len(report.get("ddls_applied") or []),
        "halted_tables": [h.get("table") for h in report.get("halted") or []],
        "held_partitions": [
            f"{h.get('topic')}/{h.get('partition')}/{h.get('offset')}" for h in report.get("held") or []
        ],
        "pending_tables": list(report.get("pending_tables") or []),
        "dead_letters": int(report.get("dead_letters") or 0),
        "merge_seconds": float(report.get("seconds") or 0.0),
    }


class PublishCutOperator(BaseOperator):
    """Publish the merge's consistent cut: log it, push its metrics (XCom, StatsD), emit the changefeed's asset
    and one asset event per Iceberg table the merge changed.

    The merge already committed the cut and tagged every table ``tso_<ts>``; this task makes the outcome visible
    to people and to downstream DAGs, scheduled on ``Asset("lakehouse://changefeeds/<changefeed>")`` (events carry
    the metrics as ``extra``) or on one table, ``Asset("iceberg://<catalog>/<namespace>/<table>")``: an
    ``AssetAlias`` among the outlets receives an event for each changed table, with the cut in its ``extra``
    (``lineage.table_extra``). With ``fail_on_halt`` a table halted at a DDL fails the task (no retry) so the run
    turns red until ``lakehouse resume`` resolves it; the metrics and asset events are pushed first.

    :param changefeed: the changefeed (templated; default: the merge result's)
    :param merge_result: the merge task's XCom (``merge.output``)
    :param fail_on_halt: fail when a table is halted at a DDL or a partition is held
    """

    template_fields: Sequence[str] = ("changefeed", "merge_result")
    ui_color = "#e9f7ec"

    def __init__(self, *, changefeed: Optional[str] = None, merge_result: Any = None, fail_on_halt: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changefeed = changefeed
        self.merge_result = merge_result
        self.fail_on_halt = fail_on_halt

    def execute(self, context) -> dict[str, Any]:
        result = self.merge_result or {}
        if isinstance(result, str):
            result = json.loads(result)
        name = text_or_none(self.changefeed) or (result.get("merge") or {}).get("changefeed") or "default"
        metrics = cut_metrics(name, result)
        if metrics["new_cut"]:
            self.log.info("changefeed %s: consistent cut %s at %s UTC%s", name, metrics["resolved_ts"],
                          metrics["cut_time"], f", tagged {metrics['tag']}" if metrics["tag"] else "")
        else:
            self.log.info("changefeed %s: no new cut (still %s)", name, metrics["resolved_ts"])
        _emit_stats(name, metrics)
        from airflow.sdk import Asset, AssetAlias

        from lakehouse_airflow.lineage import changed_tables, table_asset_uri, table_extra

        report = result.get("merge", result) if result else {}
        for outlet in self.outlets or []:
            if isinstance(outlet, AssetAlias):
                catalog = result.get("catalog") or "lake"
                for table in changed_tables(report):
                    context["outlet_events"][outlet].add(Asset(table_asset_uri(catalog, table)),
                                                         extra=table_extra(table, metrics, report))
            elif isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = metrics
        if metrics["halted_tables"] and self.fail_on_halt:
            context["ti"].xcom_push(key="metrics", value=metrics)
            raise AirflowFailException(
                f"changefeed {name}: table(s) halted at a DDL: {', '.join(metrics['halted_tables'])}. Fix and run "
                "`lakehouse resume <schema.table> --skip-ddl|--retry`; the other tables are merged."
            )
        if metrics["held_partitions"] and self.fail_on_halt:
            context["ti"].xcom_push(key="metrics", value=metrics)
            raise AirflowFailException(
                f"changefeed {name}: partition(s) held at an undecodable message: "
                f"{', '.join(metrics['held_partitions'])}. Fix the cause and rerun, or skip the message with "
                "`lakehouse skip-message TOPIC/PARTITION/OFFSET` (it goes to the dead-letter table)."
            )
        return metrics


def _emit_stats(changefeed: str, metrics: Mapping[str, Any]) -> None:
    """StatsD/OpenTelemetry gauges through Airflow's metrics (a no-op unless metrics are enabled)."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # pragma: no cover - older task SDK
        return
    prefix = f"lakehouse.{changefeed}"
    if metrics["resolved_ts"]:
        Stats.gauge(f"{prefix}.freshness_seconds", metrics["freshness_seconds"])
    Stats.gauge(f"{prefix}.halted_tables", len(metrics["halted_tables"]))
    Stats.gauge(f"{prefix}.held_partitions", len(metrics["held_partitions"]))
    Stats.gauge(f"{prefix}.dead_letters", metrics["dead_letters"])
    Stats.gauge(f"{prefix}.events_read", metrics["events_read"])
    Stats.timing(f"{prefix}.merge_seconds", metrics["merge_seconds"] * 1000)


class MaintainOperator(_SettingsMixin, BaseOperator):
    """Table maintenance of a changefeed's tables: ``ticdc_lakehouse.maintenance.maintain``.

    The generated maintenance DAG puts it in the changefeed's merge pool so it never overlaps a merge of the
    same tables in Airflow.
    """

    template_fields: Sequence[str] = ("changefeed", "dry_run")
    ui_color = "#f3e9fb"

    def __init__(self, *, changefeed: Optional[str] = None, dry_run: bool | str = False,
                 lakehouse_conn_id: str = LakehouseHook.default_conn_name, config_file: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changefeed = changefeed
        self.dry_run = dry_run
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file

    def execute(self, context) -> dict[str, Any]:
        from ticdc_lakehouse.maintenance import maintain

        settings = self.lakehouse_settings(self.changefeed)
        name = settings.changefeed(text_or_none(self.changefeed)).name
        dry_run = self.dry_run if isinstance(self.dry_run, bool) else str(self.dry_run).lower() in ("1", "true")
        result = jsonable(maintain(settings, changefeed=name, dry_run=dry_run, progress=self.log.info))
        if not result.get("ok", True):
            context["ti"].xcom_push(key="result", value=result)
            raise AirflowFailException(f"maintenance of changefeed {name} found problems: {result.get('problems')}")
        return result
