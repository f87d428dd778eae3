"""``lakehouse status``: where each changefeed stands, from Kafka to the applied cut, in one read-only look.

Per changefeed it answers the operator's questions in pipeline order:

* **landing**: per topic/partition, what has landed (the last segment's end), what Kafka has (its end offset) and
  the lag between them, and whether the landed ranges tile without gaps or overlaps;
* **merging**: what is landed but not applied yet (``pending`` = landed end - the checkpoint's restart offset),
  each partition's resolved ts and the global one (the applied cut), as TSO and as upstream wall-clock time;
* **the lake**: each table's applied watermark (``tidb.resolved-ts``, found like the merge engine finds it, by
  walking the current snapshot's ancestry) and its snapshot; halted tables with the DDL that stopped them;
  dead-letter counts.

Why read-only and lock-free: status is what you run *because* something looks stuck, typically while a merge is
running. It never takes the merge lock and never creates anything (not even the control tables): Iceberg reads
are snapshot-isolated, so it sees the last committed state. Kafka is asked with a hard deadline in a worker
thread, so a dead or unreachable broker gives "kafka unreachable" after a few seconds instead of a hang.
Secrets never reach the output: the catalog URI and bootstrap servers go through ``mask_uri_password`` and the
changefeed settings through ``mask_secrets``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ticdc_lakehouse.runtime.config import ChangefeedConfig, Settings
from ticdc_lakehouse.core.redaction import mask_secrets, mask_uri_password
from ticdc_lakehouse.runtime.state import NAMESPACE as CONTROL_NAMESPACE


#: the longest status waits for Kafka, all requests together
KAFKA_TIMEOUT_S = 5.0

PartitionKey = tuple[str, int]


# -- small pure helpers -------------------------------------------------------------------------------------
def tso_time(tso: Optional[int]) -> Optional[str]:
    """ISO-8601 UTC wall-clock time of a TSO; None for 0/None or a value beyond any real clock."""
    from ticdc_lakehouse.commands.timetravel import tso_to_datetime

    if not tso or tso <= 0:
        return None
    try:
        return tso_to_datetime(int(tso)).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return None


def _iso(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)  # control tables store UTC without a zone
        return value.isoformat(timespec="seconds")
    return str(value)


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _mask_text(text: Optional[str]) -> Optional[str]:
    return mask_uri_password(text) if text else text


# -- Kafka --------------------------------------------------------------------------------------------------
@dataclass
class KafkaProbe:
    """Kafka's end offsets for some topics, or why they could not be read."""

    checked: bool
    reachable: Optional[bool] = None
    error: Optional[str] = None
    ends: dict[PartitionKey, int] = field(default_factory=dict)
    topic_errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "reachable": self.reachable,
            "error": _mask_text(self.error),
            "topic_errors": {t: _mask_text(e) for t, e in sorted(self.topic_errors.items())},
            "seconds": round(self.seconds, 3),
        }


def _probe_config(changefeed: ChangefeedConfig, errors: list[str]) -> dict[str, Any]:
    from ticdc_lakehouse.landing.kafka_source import consumer_config

    config = consumer_config(changefeed)
    config["client.id"] = "ticdc-lakehouse-status"
    config["error_cb"] = lambda error: errors.append(str(error))
    # librdkafka would print every failed connection attempt on stderr; the status line says it once
    config["log_level"] = 0
    return config


def _probe_worker(changefeed: ChangefeedConfig, topics: Sequence[str], timeout_s: float, probe: KafkaProbe,
                  errors: list[str]) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout_s
    try:
        consumer = Consumer(_probe_config(changefeed, errors))
    except Exception as exc:  # noqa: BLE001 - KafkaException or a malformed setting
        probe.reachable, probe.error = False, f"bad Kafka settings: {exc}"
        return
    try:
        # all topics: asking for one by name may auto-create it on brokers that allow that
        metadata = consumer.list_topics(timeout=max(0.1, deadline - time.monotonic()))
        probe.reachable = True
        for topic in topics:
            info = metadata.topics.get(topic)
            if info is None:
                probe.topic_errors[topic] = "topic does not exist in Kafka"
                continue
            if info.error is not None:
                probe.topic_errors[topic] = str(info.error)
                continue
            for partition in sorted(info.partitions):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    probe.topic_errors[topic] = f"no answer within {timeout_s:.0f}s for every partition"
                    break
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=remaining,
                                                         cached=False)
                probe.ends[(topic, partition)] = int(high)
    except KafkaException as exc:
        detail = exc.args[0] if exc.args else exc
        last = f"; last client error: {errors[-1]}" if errors else ""
        if probe.reachable:
            probe.error = f"Kafka request failed: {detail}{last}"
        else:
            probe.reachable, probe.error = False, f"no answer within {timeout_s:.0f}s: {detail}{last}"
    except Exception as exc:  # noqa: BLE001 - status reports, it never crashes on a broker problem
        probe.reachable = bool(probe.reachable)
        probe.error = f"{type(exc).__name__}: {exc}"
    finally:
        try:
            consumer.close()
        except Exception:  # noqa: BLE001
            pass


def kafka_end_offsets(changefeed: ChangefeedConfig, topics: Sequence[str],
                      timeout_s: float = KAFKA_TIMEOUT_S) -> KafkaProbe:
    """Kafka's end offset of every partition of ``topics``, within ``timeout_s`` whatever the brokers do.

    The requests run in a daemon thread joined with a deadline: librdkafka calls honour their timeouts, but a
    status command must not depend on that when a broker half-answers.
    """
    started = time.monotonic()
    probe = KafkaProbe(checked=True)
    errors: list[str] = []
    worker = threading.Thread(target=_probe_worker, args=(changefeed, list(topics), timeout_s, probe, errors),
                              name="lakehouse-status-kafka", daemon=True)
    worker.start()
    worker.join(timeout_s + 2.0)
    if worker.is_alive():
        probe = KafkaProbe(checked=True, reachable=False, error=f"no answer within {timeout_s:.0f}s")
    elif probe.reachable is None:
        probe.reachable, probe.error = False, probe.error or "no answer"
    probe.seconds = time.monotonic() - started
    return probe


# -- landing ------------------------------------------------------------------------------------------------
@dataclass
class LandedView:
    """What the landing zone holds for one changefeed (files only)."""

    topics: list[str]
    starts: dict[PartitionKey, int]
    ends: dict[PartitionKey, Optional[int]]
    problems: list[str]
    data_loss: list[dict[str, Any]]
    quarantined: list[dict[str, Any]] = field(default_factory=list)


def landed_view(landing_root: Path, changefeed: str) -> LandedView:
    """Landed ranges, their contiguity problems and any recorded data loss, from the files alone."""
    from ticdc_lakehouse.landing.kafka_source import DATA_LOSS_FILE
    from ticdc_lakehouse.landing.segments import (
        check_contiguous,
        known_partitions,
        landed_topics,
        list_segments,
        topic_dir,
    )
    from ticdc_lakehouse.landing.storage import storage_of

    segments = list_segments(landing_root, changefeed)
    topics = landed_topics(landing_root, changefeed)
    ends: dict[PartitionKey, Optional[int]] = {
        (topic, p): None for topic in topics for p in known_partitions(landing_root, changefeed, topic)
    }
    starts: dict[PartitionKey, int] = {}
    for key, items in segments.items():
        ends[key] = max(s.end for s in items)
        starts[key] = min(s.start for s in items)
    problems = check_contiguous(s for items in segments.values() for s in items)
    losses: list[dict[str, Any]] = []
    for topic in topics:
        path = topic_dir(landing_root, changefeed, topic) / DATA_LOSS_FILE
        if storage_of(path).exists(path):
            try:
                entries = json.loads(storage_of(path).read(path))
            except (OSError, ValueError) as exc:
                problems.append(f"{topic}: unreadable {DATA_LOSS_FILE}: {exc}")
                continue
            accepted = {(e.get("partition"), e.get("start"), e.get("end")) for e in entries if e.get("accepted", True)}
            losses += [{"topic": topic, **entry, "accepted": entry.get("accepted", True)} for entry in entries
                       if entry.get("accepted", True)
                       or (entry.get("partition"), entry.get("start"), entry.get("end")) not in accepted]
    return LandedView(topics, starts, ends, problems, losses, _quarantined(landing_root, changefeed, segments))


def _quarantined(landing_root: Path, changefeed: str, segments) -> list[dict[str, Any]]:
    """Segments moved aside as unreadable, each with whether its offsets are landed again."""
    from dataclasses import asdict

    from ticdc_lakehouse.landing.quarantine import missing_ranges, read_quarantined

    rows = []
    for entry in read_quarantined(landing_root, changefeed):
        holes = missing_ranges(segments.get((entry.topic, entry.partition), []), [(entry.start, entry.end)])
        relanded = entry.relanded or not any(a < entry.end and b > entry.start for a, b in holes)
        rows.append({**asdict(entry), "relanded": relanded})
    return rows


def partition_rows(
    landed: LandedView,
    probe: KafkaProbe,
    restart_offsets: Mapping[PartitionKey, int],
    partition_resolved: Mapping[PartitionKey, int],
) -> list[dict[str, Any]]:
    """One row per topic/partition known to landing, Kafka or the checkpoint (pure)."""
    keys = set(landed.ends) | set(probe.ends) | set(restart_offsets) | set(partition_resolved)
    rows = []
    for topic, partition in sorted(keys):
        key = (topic, partition)
        end = landed.ends.get(key)
        kafka_end = probe.ends.get(key)
        restart = restart_offsets.get(key, 0)
        resolved = partition_resolved.get(key, 0)
        prefix = f"{topic}/{partition}:"
        rows.append({
            "topic": topic,
            "partition": partition,
            "landed_start": landed.starts.get(key),
            "landed_end": end,
            "kafka_end": kafka_end,
            "lag": (kafka_end - (end or 0)) if kafka_end is not None else None,
            "restart_offset": restart,
            "pending": max(0, (end or 0) - restart),
            "resolved_ts": resolved,
            "resolved_time": tso_time(resolved),
            "problems": [p for p in landed.problems if p.startswith(prefix)],
        })
    return rows


# -- the lake -----------------------------------------------------------------------------------------------
def watermark_snapshot(jtable) -> tuple[int, Optional[int]]:
    """``(watermark, id of the snapshot recording it)``, walking the ancestry like ``java_api.watermark_of``."""
    from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY

    snapshot = jtable.currentSnapshot()
    while snapshot is not None:
        value = snapshot.summary().get(RESOLVED_TS_PROPERTY)
        if value:
            return int(value), int(snapshot.snapshotId())
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return 0, None


def _table_row(ji, name: str, cut_snapshot: Optional[int], halted: bool) -> dict[str, Any]:
    from ticdc_lakehouse.iceberg.java_api import format_version, watermark_of

    namespace, table = ji.resolve(*name.split(".", 1))
    row: dict[str, Any] = {"table": name, "exists": False, "halted": halted, "cut_snapshot_id": cut_snapshot}
    if not ji.table_exists(namespace, table):
        return row
    row["table"] = f"{namespace}.{table}"
    jtable = ji.load(namespace, table)
    vectors, others = ji.delete_file_counts(jtable)
    current = jtable.currentSnapshot()
    summary = dict(current.summary()) if current is not None else {}
    watermark = watermark_of(jtable)
    _, snapshot_id = watermark_snapshot(jtable)
    row.update({
        "exists": True,
        "watermark": watermark,
        "watermark_time": tso_time(watermark),
        "watermark_snapshot_id": snapshot_id,
        "snapshot_id": int(current.snapshotId()) if current is not None else None,
        # rows in data files, before merge-on-read deletes apply (from the snapshot summary: no scan needed)
        "file_records": int(summary["total-records"]) if "total-records" in summary else None,
        "data_files": int(summary["total-data-files"]) if "total-data-files" in summary else None,
        # format v3 deletion vectors and v2 position/equality delete files apart: the latter pile up per merge
        "deletion_vectors": vectors,
        "delete_files": others,
        "format_version": format_version(jtable),
        "members_unknown": members_unknown(jtable),
        "unknown_defaults": unknown_defaults(jtable),
    })
    return row


def unknown_defaults(jtable) -> dict[str, str]:
    """Columns added with an expression default (``CURRENT_TIMESTAMP``) -> that expression: their rows older than
    the ADD COLUMN hold NULL in the lake where TiDB returns the value it computed when the DDL ran."""
    from ticdc_lakehouse.iceberg.tables import UNKNOWN_DEFAULT_PROPERTY

    names = {str(c.name()) for c in jtable.schema().columns()}
    found = {}
    for key, value in dict(jtable.properties()).items():
        if key.startswith(UNKNOWN_DEFAULT_PROPERTY) and key[len(UNKNOWN_DEFAULT_PROPERTY):] in names:
            found[key[len(UNKNOWN_DEFAULT_PROPERTY):]] = value
    return found


def members_unknown(jtable) -> list[str]:
    """The ENUM/SET columns whose members the table does not know (it was typed from row events, which carry
    only the index/bitmask): their values are numbers, not names (see ``lakehouse create-tables``)."""
    from ticdc_lakehouse.iceberg.tables import mysql_type_of_doc

    names = []
    for column in jtable.schema().columns():
        mysql = mysql_type_of_doc(column.doc())
        if mysql is not None and mysql.members_unknown:
            names.append(str(column.name()))
    return names


def table_owners(ji) -> dict[str, str]:
    """``namespace.table`` -> the changefeed its ``tidb.changefeed`` property names, for every target table: finds
    tables a run created before it could write a checkpoint, too."""
    from ticdc_lakehouse.iceberg.tables import CHANGEFEED_PROPERTY

    owners = {}
    for namespace in ji.list_namespaces():
        if namespace == CONTROL_NAMESPACE:
            continue
        for table in ji.list_tables(namespace):
            owner = ji.load(namespace, table).properties().get(CHANGEFEED_PROPERTY)
            if owner:
                owners[f"{namespace}.{table}"] = str(owner)
    return owners


@dataclass
class LakeView:
    """What the catalog says about one changefeed (control tables and target tables)."""

    checkpoint: Any  # state.Checkpoint
    checkpoints: int
    halted: list[dict[str, Any]]
    dead_letters: int
    tables: list[dict[str, Any]]
    dead_letter_reasons: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)
    below_cut: dict[str, int] = field(default_factory=dict)  # verdict -> row changes (merge.below_cut)


def lake_view(spark, ji, catalog: str, changefeed: str, control_ready: bool, owners: Mapping[str, str]) -> LakeView:
    from ticdc_lakehouse.runtime.state import Checkpoint, StateStore

    if ji is None:  # no catalog yet
        return LakeView(Checkpoint(changefeed), 0, [], 0, [])

    checkpoint, count, halted, dead, reasons, held, below = Checkpoint(changefeed), 0, [], 0, [], [], {}
    if control_ready:
        state = StateStore(spark, catalog)
        checkpoint = state.latest_checkpoint(changefeed)
        count = spark.table(state.table("checkpoints")).filter(f"changefeed = '{_sql_string(changefeed)}'").count()
        halted = [
            {"table": f"{h.schema}.{h.table}", "ddl_ts": h.ddl_ts, "ddl_time": tso_time(h.ddl_ts), "query": h.query,
             "reason": _mask_text(h.reason), "halted_at": _iso(h.halted_at)}
            for h in state.halted(changefeed)
        ]
        dead = int(state.dead_letter_counts(changefeed).get(changefeed, 0))
        if dead:
            reasons = [{**kind, "error": _mask_text(kind["error"])} for kind in state.dead_letter_reasons(changefeed)]
        if ji.table_exists(CONTROL_NAMESPACE, "held"):  # lakes older than merge.on_undecodable have none
            held = [{**h, "error": _mask_text(h["error"]), "held_at": _iso(h["held_at"])}
                    for h in state.holds(changefeed)]
        if ji.table_exists(CONTROL_NAMESPACE, "below_cut"):  # lakes from before it have none
            below = state.below_cut_counts(changefeed)
    # one row per table whatever the case: TiDB names are case-insensitive, the catalog keeps the lake's spelling
    spelled: dict[str, str] = {}
    for name in [*sorted(n for n, owner in owners.items() if owner == changefeed), *checkpoint.tables,
                 *(h["table"] for h in halted)]:
        spelled.setdefault(name.lower(), name)
    snapshots = {name.lower(): snapshot for name, snapshot in checkpoint.tables.items()}
    halted_names = {h["table"].lower() for h in halted}
    tables = [_table_row(ji, spelled[key], snapshots.get(key), key in halted_names) for key in sorted(spelled)]
    return LakeView(checkpoint, count, halted, dead, tables, reasons, held, below)


# -- assembling ---------------------------------------------------------------------------------------------
def changefeed_names(settings: Settings, landing_root: Path, with_checkpoints: Sequence[str] = ()) -> list[str]:
    """Configured changefeeds (``default`` when none), plus any with landed data or checkpoints."""
    from ticdc_lakehouse.landing.storage import storage_of

    names = list(settings.changefeeds) or ["default"]
    for name, is_dir in sorted(storage_of(landing_root).list(landing_root)):
        if is_dir and not name.startswith((".", "_")) and name not in names:
            names.append(name)
    names += [n for n in with_checkpoints if n not in names]
    return names


def _changefeed_status(settings: Settings, spark, ji, name: str, kafka: bool, control_ready: bool,
                       owners: Mapping[str, str], kafka_timeout_s: float) -> dict[str, Any]:
    cf = settings.changefeed(name)
    landed = landed_view(settings.landing_path, cf.name)
    topics = sorted(set(cf.topics) | set(landed.topics))
    probe = kafka_end_offsets(cf, topics, kafka_timeout_s) if kafka else KafkaProbe(checked=False)
    lake = lake_view(spark, ji, settings.catalog_name, cf.name, control_ready, owners)
    checkpoint = lake.checkpoint
    partitions = partition_rows(landed, probe, checkpoint.restart_offsets, checkpoint.partition_resolved)
    lags = [p["lag"] for p in partitions if p["lag"] is not None]
    # a merge ran over them, yet no partition of these ever had a resolved event: nothing can apply (see engine)
    silent = [f"{p['topic']}/{p['partition']}" for p in partitions if p["pending"] and not p["resolved_ts"]]
    if silent and checkpoint.run_id:
        from ticdc_lakehouse.decode.protocols import uses_resolved_ts

        try:
            silent = silent if uses_resolved_ts(checkpoint.protocol or cf.protocol, cf.resolved_ts) else []
        except ValueError:  # a bad setting: the merge itself says so
            silent = []
    masked = mask_secrets(settings.raw.get("changefeeds", {}).get(cf.name, {}))
    return {
        "changefeed": cf.name,
        "configured": cf.name in settings.changefeeds,
        "protocol": checkpoint.protocol or cf.protocol,
        "topics": topics,
        "bootstrap_servers": _mask_text(cf.bootstrap_servers),
        "large_messages": {"compression": cf.large_messages.compression,
                           "claim_check_storage_uri": mask_uri_password(cf.large_messages.claim_check_storage_uri)},
        "settings": masked,
        "kafka": probe.as_dict(),
        "applied": {
            "resolved_ts": checkpoint.resolved_ts,
            "resolved_time": tso_time(checkpoint.resolved_ts),
            "run_id": checkpoint.run_id or None,
            "committed_at": _iso(checkpoint.committed_at),
            "checkpoints": lake.checkpoints,
        },
        "partitions": partitions,
        "totals": {
            "landed": sum(p["landed_end"] or 0 for p in partitions),
            "pending": sum(p["pending"] for p in partitions),
            "lag": sum(lags) if probe.reachable and lags else None,
        },
        "landing_problems": landed.problems,
        "data_loss": landed.data_loss,
        "quarantined": landed.quarantined,
        "tables": lake.tables,
        "halted": lake.halted,
        "dead_letters": lake.dead_letters,
        "dead_letter_reasons": lake.dead_letter_reasons,
        "held": lake.held,
        "no_resolved_events": silent if checkpoint.run_id else [],
        "below_cut": {"late": lake.below_cut.get("late", 0), "replay": lake.below_cut.get("replay", 0)},
    }


def collect_status(settings: Settings, changefeed: Optional[str] = None, kafka: bool = True, spark=None,
                   kafka_timeout_s: float = KAFKA_TIMEOUT_S) -> dict[str, Any]:
    """The status of one changefeed (``changefeed``) or of every known one, as a JSON-able dict.

    ``kafka=False`` skips the broker entirely (offline use); otherwise each changefeed's brokers get at most
    ``kafka_timeout_s`` seconds. Never takes the merge lock and never writes to the catalog.
    """
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg

    started = time.monotonic()
    sqlite_file = (Path(settings.catalog_uri[len("jdbc:sqlite:"):])
                   if settings.catalog_uri.startswith("jdbc:sqlite:") else None)
    catalog_exists = sqlite_file is None or sqlite_file.is_file()
    ji = None
    if spark is None and catalog_exists:
        from ticdc_lakehouse.runtime.spark_session import get_spark

        spark = get_spark(settings, "lakehouse-status")
    elif spark is not None and sqlite_file is not None:
        # a fresh deployment: SQLite needs the directory to open (and create) the catalog file
        sqlite_file.parent.mkdir(parents=True, exist_ok=True)
        catalog_exists = True
    # no SQLite catalog file yet: nothing was ever merged here, and opening it would create it (and a Spark
    # session's files): status reports landing and Kafka only
    if catalog_exists:
        ji = JavaIceberg(spark, settings.catalog_name)
    control_ready = ji is not None and all(
        ji.table_exists(CONTROL_NAMESPACE, t) for t in ("checkpoints", "dead_letters", "halted"))
    owners = table_owners(ji) if ji is not None else {}
    if changefeed:
        names = [changefeed]
    else:
        known = sorted(set(owners.values()))
        if control_ready:
            from ticdc_lakehouse.runtime.state import StateStore

            table = StateStore(spark, settings.catalog_name).table("checkpoints")
            known = sorted(set(known) | {r[0] for r in spark.table(table).select("changefeed").distinct().collect()})
        names = changefeed_names(settings, settings.landing_path, known)
    feeds = [_changefeed_status(settings, spark, ji, n, kafka, control_ready, owners, kafka_timeout_s) for n in names]
    return {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "catalog": {
            "exists": catalog_exists,
            "name": settings.catalog_name,
            "uri": mask_uri_password(settings.catalog_uri),
            "warehouse": mask_uri_password(settings.warehouse),
        },
        "landing_path": str(settings.landing_path),
        "config_file": str(settings.source_file) if settings.source_file else None,
        "changefeeds": feeds,
        "seconds": round(time.monotonic() - started, 3),
    }


# -- rendering ----------------------------------------------------------------------------------------------
def _time_text(iso: Optional[str]) -> str:
    if not iso:
        return "-"
    return iso.replace("T", " ").replace("+00:00", " UTC")


def _grid(columns: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> str:
    from ticdc_lakehouse.commands.output import table_text

    lines = table_text(columns, [["-" if v is None else v for v in row] for row in rows]).splitlines()[:-1]
    return "\n".join(indent + line for line in lines)


def _render_changefeed(feed: Mapping[str, Any]) -> list[str]:
    applied = feed["applied"]
    out = [
        f"changefeed {feed['changefeed']} (protocol {feed['protocol']}; topics {', '.join(feed['topics']) or '-'}; "
        f"kafka {feed['bootstrap_servers']})",
    ]
    large = feed.get("large_messages") or {}
    if large.get("compression", "none") != "none" or large.get("claim_check_storage_uri"):
        out.append(f"  large messages: compression {large.get('compression', 'none')}; claim-check storage "
                   f"{large.get('claim_check_storage_uri') or '-'}")
    if applied["resolved_ts"]:
        out.append(
            f"  applied cut: {applied['resolved_ts']} = {_time_text(applied['resolved_time'])} "
            f"(run {applied['run_id']}, committed {_time_text(applied['committed_at'])}, "
            f"{applied['checkpoints']} checkpoint(s))"
        )
    else:
        out.append("  applied cut: nothing applied yet")
    kafka = feed["kafka"]
    if not kafka["checked"]:
        out.append("  kafka: not checked (--no-kafka)")
    elif not kafka["reachable"]:
        out.append(f"  kafka unreachable: {kafka['error']}")
    else:
        lag = feed["totals"]["lag"]
        out.append(f"  kafka: reachable; total lag {lag if lag is not None else '-'} record(s)")
        if kafka["error"]:
            out.append(f"  kafka error: {kafka['error']}")
        for topic, error in kafka["topic_errors"].items():
            out.append(f"  kafka topic {topic}: {error}")
    out.append(f"  pending (landed, not applied): {feed['totals']['pending']} record(s)")
    if feed.get("no_resolved_events"):
        from ticdc_lakehouse.merge.engine import no_resolved_hint

        out.append("  NO RESOLVED EVENTS: " + no_resolved_hint(feed["changefeed"], feed["protocol"],
                                                              feed["no_resolved_events"]))
    if feed["partitions"]:
        out.append(_grid(
            ["topic", "partition", "landed end", "kafka end", "lag", "restart offset", "pending", "resolved ts",
             "resolved time (UTC)"],
            [[p["topic"], p["partition"], p["landed_end"], p["kafka_end"], p["lag"], p["restart_offset"],
              p["pending"], p["resolved_ts"], _time_text(p["resolved_time"]).replace(" UTC", "")]
             for p in feed["partitions"]],
        ))
    for problem in feed["landing_problems"]:
        out.append(f"  LANDING PROBLEM: {problem}")
    for loss in feed["data_loss"]:
        verdict = ("accepted" if loss.get("accepted", True) else
                   "NOT accepted: the partition is not landed past it; restore the offsets from an archive or set "
                   "landing.accept_data_loss = true")
        out.append(f"  DATA LOSS: {loss.get('topic')}/{loss.get('partition')} offsets "
                   f"[{loss.get('start')}, {loss.get('end')}): {loss.get('reason')} ({verdict})")
    for entry in feed.get("quarantined", ()):
        state = ("landed again" if entry["relanded"] else
                 "not landed again yet: the merge stops this partition there; `lakehouse land` re-lands it")
        out.append(f"  QUARANTINED segment {entry['topic']}/{entry['partition']} offsets [{entry['start']}, "
                   f"{entry['end']}): {entry['reason']}; moved to {entry['file']}; {state}")
    if feed["tables"]:
        out.append(_grid(
            ["table", "watermark", "watermark time (UTC)", "watermark snapshot", "current snapshot", "rows in files",
             "format", "data files", "DVs", "delete files", "state"],
            [[t["table"], t.get("watermark"), _time_text(t.get("watermark_time")).replace(" UTC", ""),
              t.get("watermark_snapshot_id"), t.get("snapshot_id"), t.get("file_records"),
              f"v{t['format_version']}" if t.get("format_version") else None, t.get("data_files"),
              t.get("deletion_vectors"), t.get("delete_files"),
              "HALTED" if t["halted"] else ("ok" if t["exists"] else "missing")]
             for t in feed["tables"]],
        ))
        for t in feed["tables"]:
            if t.get("members_unknown"):
                out.append(f"  {t['table']}: ENUM/SET column(s) {', '.join(t['members_unknown'])} typed from row "
                           "events hold member indexes/bitmasks, not names (lakehouse create-tables --ddl FILE "
                           "with the upstream's CREATE TABLE turns them into names)")
            for column, expression in sorted((t.get("unknown_defaults") or {}).items()):
                out.append(f"  {t['table']}: column {column} was added with DEFAULT {expression}: rows older than "
                           "that ADD COLUMN hold NULL in the lake, where TiDB returns the value it computed when the "
                           "DDL ran (no message carries it); fill them from upstream if you need them")
    if feed["halted"]:
        out.append(f"  halted tables ({len(feed['halted'])}):")
        for h in feed["halted"]:
            out.append(f"    {h['table']} at DDL ts {h['ddl_ts']} ({_time_text(h['ddl_time'])}): {h['query']}")
            out.append(f"      reason: {h['reason']}")
            out.append(f"      resume with: lakehouse resume {h['table']} --skip-ddl | --retry")
    else:
        out.append("  halted tables: none")
    for held in feed.get("held", ()):
        position = f"{held['topic']}/{held['partition']}/{held['offset']}"
        out.append(f"  HELD partition {held['topic']}/{held['partition']} at offset {held['offset']} "
                   f"(since {held['held_at']}): {held['error']}")
        out.append(f"      fix the cause and rerun, or: lakehouse skip-message {position}  (to the dead-letter table)")
    out.append(f"  dead letters: {feed['dead_letters']}")
    for kind in feed.get("dead_letter_reasons", ()):
        out.append(f"    {kind['count']} like {kind['topic']}/{kind['partition']}@{kind['offset']}: {kind['error']}")
    if feed["dead_letters"]:
        out.append("    (all of them: SELECT * FROM _lakehouse.dead_letters; the raw bytes are kept there)")
    below = feed.get("below_cut") or {}
    if below.get("late"):
        out.append(f"  LATE ROWS: {below['late']} row change(s) arrived below the applied cut (late) and were not "
                   "applied: upstream sent them after promising it would not (SELECT * FROM _lakehouse.below_cut "
                   "WHERE verdict = 'late' has each one's position, commit ts and values, to repair)")
    if below.get("replay"):
        out.append(f"  replays below the cut skipped: {below['replay']} (equal to what the lake held)")
    return out


def render_status(status: Mapping[str, Any]) -> str:
    """The status as text for people: one block per changefeed, tables as aligned grids."""
    catalog = status["catalog"]
    lines = [
        f"lakehouse status at {_time_text(status['generated_at'])}",
        f"catalog {catalog['name']} at {catalog['uri']} (warehouse {catalog['warehouse']})",
        f"landing {status['landing_path']}",
    ]
    if not catalog.get("exists", True):
        lines.insert(2, "  (no catalog there yet: nothing has been merged; status creates nothing)")
    for feed in status["changefeeds"]:
        lines.append("")
        lines += _render_changefeed(feed)
    return "\n".join(lines)
