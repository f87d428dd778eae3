"""The pipeline's entry points, shared by the CLI, the Airflow operators and spark-submit jobs.

Each returns a plain JSON-able dict (for XCom and ``--format json``) and raises on failure, after whatever it
could do safely has been made durable.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.runtime.faults import fault_point
from ticdc_lakehouse.landing import land_from_archive, land_from_kafka
from ticdc_lakehouse.landing.errors import ArchiveCorruptError, DataLossError
from ticdc_lakehouse.landing.quarantine import SegmentQuarantined
from ticdc_lakehouse.runtime.locks import changefeed_lock
from ticdc_lakehouse.merge.engine import run_merge
from ticdc_lakehouse.merge.value_checks import ROW_HALT, ROW_SKIPPED
from ticdc_lakehouse.runtime.permissions import apply_umask
from ticdc_lakehouse.runtime.spark_session import SparkStart, get_spark, session_of
from ticdc_lakehouse.runtime.state import StateStore

Progress = Optional[Callable[[str], None]]


def _landing_summary(report) -> dict[str, Any]:
    to_dict = getattr(report, "to_dict", None)
    return to_dict() if callable(to_dict) else {"report": str(report)}


def land(settings: Settings, changefeed: Optional[str] = None, progress: Progress = None) -> dict[str, Any]:
    """Land every partition of the changefeed's topics up to the end offsets seen at the start."""
    apply_umask(settings)  # the raw change data is owner-only unless storage.umask says otherwise
    cf = settings.changefeed(changefeed)
    report = land_from_kafka(cf, settings.landing_path, timeout_s=settings.landing.kafka_timeout_s,
                             progress=_landing_progress(progress), allow_gap=accepts_data_loss(settings))
    for loss in report.data_loss:
        if progress is not None:
            progress(f"DATA LOSS (accepted by landing.accept_data_loss): {loss}")
    return {"ok": True, "changefeed": cf.name, "landing": _landing_summary(report)}


def accepts_data_loss(settings: Settings) -> bool:
    return settings.landing.accept_data_loss


def _landing_progress(progress: Progress):
    if progress is None:
        return None

    def notify(item) -> None:
        seconds = getattr(item, "seconds", 0) or 0
        rate = (f", {item.records / seconds:,.0f} records/s, {item.bytes / seconds / 2**20:,.1f} MiB/s"
                if seconds else "")
        progress(
            f"landed {item.topic}[{item.partition}] offsets {item.start}..{item.end}: "
            f"{item.records} records, {item.bytes} bytes{rate}"
        )

    return notify


def merge(settings: Settings, changefeed: Optional[str] = None, protocol: Optional[str] = None,
          stop_ts: Optional[int] = None, progress: Progress = None, spark=None) -> dict[str, Any]:
    """Merge what has landed up to the global resolved ts (one Spark session for every table)."""
    name = settings.changefeed(changefeed).name
    with changefeed_lock(settings, name):  # before Spark starts: a second merge fails at once
        session = session_of(spark, settings, "lakehouse-merge")
        report = run_merge(session, settings, name, protocol, stop_ts, progress, take_lock=False)
    # not ok: a table halted, a partition held, or partitions that never carry a resolved event (nothing of them
    # can ever apply as configured): the command exits non-zero
    return {"ok": not report.halted and not report.held and not report.no_resolved_events,
            "catalog": settings.catalog_name, "merge": report.as_dict()}


def _merge_or_moved(settings: Settings, changefeed: str, protocol: Optional[str], stop_ts: Optional[int],
                    progress: Progress, spark) -> dict[str, Any]:
    """:func:`merge`; a landed segment a decode task could not read (moved aside by the merge) makes a result that
    says so instead of an error, so the caller lands it again and merges once more."""
    try:
        return merge(settings, changefeed, protocol, stop_ts, progress, spark)
    except SegmentQuarantined as exc:
        if progress is not None:
            progress(f"QUARANTINED {exc}")
        return {"ok": False, "merge": {"quarantined": [asdict(exc.entry)], "missing": {}}}


def backfill(settings: Settings, archive: Path, changefeed: Optional[str] = None, protocol: Optional[str] = None,
             stop_ts: Optional[int] = None, progress: Progress = None, spark=None) -> dict[str, Any]:
    """Land an archived topic (Kafka log segments) incrementally, then merge it.

    A corrupt batch stops the landing of its partition (what precedes it lands); the merge still runs over what
    landed, and the error is raised afterwards so the command exits non-zero saying what to fix.
    """
    apply_umask(settings)
    cf = settings.changefeed(changefeed)
    if not Path(archive).is_dir():
        raise FileNotFoundError(f"archive directory {archive} does not exist")

    def land_archive():
        try:
            return land_from_archive(archive, settings.landing_path, cf.name,
                                     progress=_landing_progress(progress)), None
        except ArchiveCorruptError as exc:
            return getattr(exc, "report", None), exc

    if spark is None:  # the driver JVM starts (seconds) while the archive lands (Python, one core)
        spark = SparkStart(settings, "lakehouse-merge")
    landing, corrupt = land_archive()
    spark = session_of(spark, settings, "lakehouse-merge")
    fault_point("backfill.after_landing")
    result = _merge_or_moved(settings, cf.name, protocol or cf.protocol, stop_ts, progress, spark)
    moved = result["merge"]["quarantined"]
    if moved and corrupt is None:  # a landed segment was unreadable: land it again from the archive
        landing, corrupt = land_archive()
        result = merge(settings, cf.name, protocol or cf.protocol, stop_ts, progress, spark)
        result["merge"]["quarantined"] = moved + result["merge"]["quarantined"]
    result["landing"] = _landing_summary(landing) if landing is not None else None
    if corrupt is not None:
        raise corrupt
    if result["merge"]["missing"]:
        result["ok"] = False
    return result


def run_cycle(settings: Settings, changefeed: Optional[str] = None, progress: Progress = None,
              spark=None) -> dict[str, Any]:
    """One scheduled cycle: land from Kafka, then merge (what ``lakehouse run`` and the DAG do).

    Data loss that is not accepted does not stop the merge of what did land (the lost partitions stop before
    the loss, so no cut passes it); the run then fails naming the offsets. A merge that finds a landed segment
    unreadable moves it aside and stops that partition before it: the cycle lands it again from Kafka and merges
    once more, so one run repairs it when Kafka still has the offsets.
    """
    loss: Optional[DataLossError] = None
    try:
        landed = land(settings, changefeed, progress)
    except DataLossError as exc:
        loss, landed = exc, {"landing": _landing_summary(exc.report) if exc.report is not None else None}
    merged = _merge_or_moved(settings, changefeed, None, None, progress, spark)
    moved = merged["merge"]["quarantined"]
    if moved and loss is None:
        try:
            landed = land(settings, changefeed, progress)
        except DataLossError as exc:
            loss, landed = exc, {"landing": _landing_summary(exc.report) if exc.report is not None else None}
        merged = merge(settings, changefeed, None, None, progress, spark)
        merged["merge"]["quarantined"] = moved + merged["merge"]["quarantined"]
    result = {"ok": merged["ok"] and loss is None and not merged["merge"]["missing"],
              "catalog": settings.catalog_name, "landing": landed["landing"], "merge": merged["merge"]}
    if loss is not None:
        result["error"] = str(loss)
        if progress is not None:
            progress(f"error: {loss}")
    elif merged["merge"]["missing"]:
        result["error"] = ("offsets not landed: " + "; ".join(
            f"{key} {ranges}" for key, ranges in merged["merge"]["missing"].items())
            + "; see lakehouse status")
    return result


def skip_message(settings: Settings, position: str, changefeed: Optional[str] = None, spark=None) -> int:
    """Let a partition held at an undecodable message, or a table halted at a row whose value it cannot store, go
    on: the message (row) is sent to the dead-letter table by the next run (``merge.on_undecodable = "hold"``). ``position`` is ``TOPIC/PARTITION/OFFSET``; returns how many
    holds were resolved (0: nothing is held there)."""
    topic, partition, offset = parse_position(position)
    session = spark or get_spark(settings, "lakehouse-skip-message")
    cf = settings.changefeed(changefeed)
    state = StateStore(session, settings.catalog_name)
    count = state.resolve_holds(cf.name, "skipped", topic, partition, offset)
    if not count:  # a table halted at a row whose value it cannot store (hold mode): dead-letter that row
        where = ROW_HALT.format(topic=topic, partition=partition, offset=offset)
        count = state.resolve_row_halt(cf.name, where, ROW_SKIPPED)
    return count


def parse_position(text: str) -> tuple[str, int, int]:
    """``TOPIC/PARTITION/OFFSET`` (the topic may itself contain ``/``): (topic, partition, offset)."""
    topic, _, rest = text.rpartition("/")
    topic, _, partition = topic.rpartition("/")
    if not topic or not partition.isdigit() or not rest.isdigit():
        raise ValueError(f"give the message as TOPIC/PARTITION/OFFSET, not {text!r}")
    return topic, int(partition), int(rest)


def resume_table(settings: Settings, table: str, action: str, changefeed: Optional[str] = None, spark=None) -> int:
    """Resolve a table's halt: ``skip`` (the DDL counts as applied) or ``retry`` (apply it again)."""
    schema, _, name = table.partition(".")
    if not name:
        raise ValueError("give the table as schema.table")
    session = spark or get_spark(settings, "lakehouse-resume")
    cf = settings.changefeed(changefeed)
    return StateStore(session, settings.catalog_name).resolve_halt(cf.name, schema, name, action)
