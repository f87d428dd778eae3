"""The pipeline's entry points, shared by the CLI, the Airflow operators and spark-submit jobs.

Each returns a plain JSON-able dict (for XCom and ``--format json``) and raises on failure, after whatever it
could do safely has been made durable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from ticdc_lakehouse.config import Settings
from ticdc_lakehouse.faults import fault_point

Progress = Optional[Callable[[str], None]]


def _landing_summary(report) -> dict[str, Any]:
    to_dict = getattr(report, "to_dict", None)
    return to_dict() if callable(to_dict) else {"report": str(report)}


def land(settings: Settings, changefeed: Optional[str] = None, progress: Progress = None) -> dict[str, Any]:
    """Land every partition of the changefeed's topics up to the end offsets seen at the start."""
    from ticdc_lakehouse.landing import land_from_kafka

    cf = settings.changefeed(changefeed)
    report = land_from_kafka(cf, settings.landing_path, progress=_landing_progress(progress))
    return {"ok": True, "changefeed": cf.name, "landing": _landing_summary(report)}


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
    from ticdc_lakehouse.locks import changefeed_lock
    from ticdc_lakehouse.merge.engine import run_merge
    from ticdc_lakehouse.spark_session import get_spark

    name = settings.changefeed(changefeed).name
    with changefeed_lock(settings, name):  # before Spark starts: a second merge fails at once
        session = spark or get_spark(settings, "lakehouse-merge")
        report = run_merge(session, settings, name, protocol, stop_ts, progress, take_lock=False)
    return {"ok": not report.halted and not report.held, "catalog": settings.catalog_name, "merge": report.as_dict()}


def backfill(settings: Settings, archive: Path, changefeed: Optional[str] = None, protocol: Optional[str] = None,
             stop_ts: Optional[int] = None, progress: Progress = None, spark=None) -> dict[str, Any]:
    """Land an archived topic (Kafka log segments) incrementally, then merge it.

    A corrupt batch stops the landing of its partition (what precedes it lands); the merge still runs over what
    landed, and the error is raised afterwards so the command exits non-zero saying what to fix.
    """
    from ticdc_lakehouse.landing import land_from_archive
    from ticdc_lakehouse.landing.errors import ArchiveCorruptError

    cf = settings.changefeed(changefeed)
    if not Path(archive).is_dir():
        raise FileNotFoundError(f"archive directory {archive} does not exist")
    corrupt: Optional[ArchiveCorruptError] = None
    try:
        landing = land_from_archive(archive, settings.landing_path, cf.name, progress=_landing_progress(progress))
    except ArchiveCorruptError as exc:
        corrupt = exc
        landing = getattr(exc, "report", None)
    fault_point("backfill.after_landing")
    result = merge(settings, cf.name, protocol or cf.protocol, stop_ts, progress, spark)
    result["landing"] = _landing_summary(landing) if landing is not None else None
    if corrupt is not None:
        raise corrupt
    return result


def run_cycle(settings: Settings, changefeed: Optional[str] = None, progress: Progress = None,
              spark=None) -> dict[str, Any]:
    """One scheduled cycle: land from Kafka, then merge (what ``lakehouse run`` and the DAG do)."""
    landed = land(settings, changefeed, progress)
    merged = merge(settings, changefeed, None, None, progress, spark)
    return {"ok": merged["ok"], "catalog": merged["catalog"], "landing": landed["landing"], "merge": merged["merge"]}


def skip_message(settings: Settings, position: str, changefeed: Optional[str] = None, spark=None) -> int:
    """Let a partition held at an undecodable message go on: the message is sent to the dead-letter table by the
    next run (``merge.on_undecodable = "hold"``). ``position`` is ``TOPIC/PARTITION/OFFSET``; returns how many
    holds were resolved (0: nothing is held there)."""
    from ticdc_lakehouse.spark_session import get_spark
    from ticdc_lakehouse.state import StateStore

    topic, partition, offset = parse_position(position)
    session = spark or get_spark(settings, "lakehouse-skip-message")
    cf = settings.changefeed(changefeed)
    return StateStore(session, settings.catalog_name).resolve_holds(cf.name, "skipped", topic, partition, offset)


def parse_position(text: str) -> tuple[str, int, int]:
    """``TOPIC/PARTITION/OFFSET`` (the topic may itself contain ``/``): (topic, partition, offset)."""
    topic, _, rest = text.rpartition("/")
    topic, _, partition = topic.rpartition("/")
    if not topic or not partition.isdigit() or not rest.isdigit():
        raise ValueError(f"give the message as TOPIC/PARTITION/OFFSET, not {text!r}")
    return topic, int(partition), int(rest)


def resume_table(settings: Settings, table: str, action: str, changefeed: Optional[str] = None, spark=None) -> int:
    """Resolve a table's halt: ``skip`` (the DDL counts as applied) or ``retry`` (apply it again)."""
    from ticdc_lakehouse.spark_session import get_spark
    from ticdc_lakehouse.state import StateStore

    schema, _, name = table.partition(".")
    if not name:
        raise ValueError("give the table as schema.table")
    session = spark or get_spark(settings, "lakehouse-resume")
    cf = settings.changefeed(changefeed)
    return StateStore(session, settings.catalog_name).resolve_halt(cf.name, schema, name, action)
