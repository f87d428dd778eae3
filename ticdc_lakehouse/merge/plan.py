"""Pure planning for a merge run: watermarks, DDL order and restart points.

The rules follow TiCDC's own consumer (``cmd/kafka-consumer``) and the MQ protocol design:

* a partition's resolved ts only moves forward; a smaller one is a replay and is ignored;
* the global resolved ts is the minimum over **every** partition of the changefeed's topics; a partition that
  has sent no resolved event holds it at zero;
* DDL is broadcast to every partition: it is applied once, in commit-ts order, and only when it is <= the
  global resolved ts; rows of the tables it touches below its commit ts are merged first (the DDL barrier);
* a run may restart reading a partition at the last resolved event whose ts is <= the applied cut: everything
  before it is <= the cut and already applied, everything after it is re-read and filtered by each table's own
  watermark, so a crash anywhere neither skips nor re-applies a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

from ticdc_lakehouse.core.model import DDLEvent, TableSchema

PartitionKey = tuple[str, int]
TableKey = tuple[str, str]


def table_key(schema: str, table: str) -> TableKey:
    """Upstream names are case-insensitive in TiDB; Iceberg identifiers are lower-cased the same way."""
    return (schema.lower(), table.lower())


def global_resolved_ts(partitions: Iterable[PartitionKey], resolved: Mapping[PartitionKey, int]) -> int:
    """Minimum over all partitions of their greatest resolved ts; zero if any partition has none."""
    values = [resolved.get(partition, 0) for partition in partitions]
    return min(values) if values else 0


def merge_resolved(previous: Mapping[PartitionKey, int], seen: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
    """Forward-only per-partition resolved ts: a smaller value (a replay) never moves it back."""
    merged = dict(previous)
    for partition, ts in seen.items():
        if ts > merged.get(partition, 0):
            merged[partition] = ts
    return merged


@dataclass(frozen=True)
class DDLRecord:
    """A DDL as the run plans and applies it: the decoded ``DDLEvent``'s values with its Kafka position spelt
    out (any partition). The decode tasks build it (``staged_stats``) and hand it to the driver as is (pickled),
    so the table schema a protocol sent arrives typed, with no JSON in between."""

    commit_ts: int
    schema: str
    table: str
    query: str
    ddl_type: str
    topic: str
    partition: int
    offset: int
    seq: int = 0
    table_schema: Optional[TableSchema] = None  # the table after the DDL, where the protocol sends it
    is_bootstrap: bool = False

    @classmethod
    def from_event(cls, event: DDLEvent) -> "DDLRecord":
        pos = event.position
        return cls(commit_ts=event.commit_ts, schema=event.schema or "", table=event.table or "",
                   query=event.query or "", ddl_type=event.ddl_type or "", topic=pos.topic,
                   partition=pos.partition, offset=pos.offset, seq=pos.seq or 0, table_schema=event.table_schema,
                   is_bootstrap=bool(event.is_bootstrap))

    @property
    def identity(self) -> tuple:
        """Two records are the same DDL when ts, target and statement match (a broadcast copy or a replay);
        distinct statements at one ts (a split multi-table DDL) stay distinct."""
        return (self.commit_ts, self.schema.lower(), self.table.lower(), self.query, self.ddl_type)


def order_ddls(records: Iterable[DDLRecord], upto_ts: int) -> list[DDLRecord]:
    """Distinct DDLs with ts <= ``upto_ts``, in commit-ts order (first delivery order within one ts)."""
    chosen: dict[tuple, DDLRecord] = {}
    for record in sorted(records, key=lambda r: (r.commit_ts, r.topic, r.partition, r.offset, r.seq)):
        if record.is_bootstrap or record.commit_ts > upto_ts:
            continue
        chosen.setdefault(record.identity, record)
    return sorted(chosen.values(), key=lambda r: (r.commit_ts, r.partition, r.offset, r.seq))


def latest_bootstraps(records: Iterable[DDLRecord]) -> list[DDLRecord]:
    """The newest BOOTSTRAP schema per table (Simple protocol): they create missing tables, never alter one."""
    newest: dict[TableKey, DDLRecord] = {}
    for record in records:
        if not record.is_bootstrap or not record.table_schema:
            continue
        key = table_key(record.schema, record.table)
        if key not in newest or (record.partition, record.offset) > (newest[key].partition, newest[key].offset):
            newest[key] = record
    return list(newest.values())


def restart_offsets(
    previous: Mapping[PartitionKey, int],
    read_end: Mapping[PartitionKey, int],
    first_unapplied: Mapping[PartitionKey, int],
) -> dict[PartitionKey, int]:
    """Where each partition is read from next run: its first event not yet applied, else the end of what was read.

    Not "the last resolved event <= the cut": a resolved event may follow rows whose ts is *above* it (TiCDC's
    docs show one), so restarting there could skip them. Events before the returned offset are all applied (or
    replays of applied ones); each partition's resolved ts is kept in the checkpoint, so resolved events need no
    re-reading. Never moves backwards.
    """
    result = dict(previous)
    for partition, end in read_end.items():
        candidate = first_unapplied.get(partition, end)
        if candidate > result.get(partition, 0):
            result[partition] = candidate
    return result


@dataclass
class TableProgress:
    """What the engine knows about one table before a run."""

    watermark: int = 0  # greatest commit ts applied (from the current snapshot's summary)
    exists: bool = False
    halted_at: Optional[int] = None  # commit ts of the DDL that halted it


@dataclass
class RunPlan:
    """The driver's plan: the cut, the DDLs to apply and the safe restart bound."""

    resolved_ts: int
    ddls: list[DDLRecord] = field(default_factory=list)
    bootstraps: list[DDLRecord] = field(default_factory=list)

    def safe_bound(self, halted: Mapping[TableKey, int]) -> int:
        """Restart points may move up to this ts: below the cut, and below any halted DDL."""
        bound = self.resolved_ts
        for ts in halted.values():
            bound = min(bound, ts - 1)
        return bound


def plan_run(
    partitions: Iterable[PartitionKey],
    resolved: Mapping[PartitionKey, int],
    ddl_records: Iterable[DDLRecord],
    stop_ts: Optional[int] = None,
) -> RunPlan:
    """Plan a run: the cut is the global resolved ts (capped by ``stop_ts`` for a bounded backfill)."""
    records = list(ddl_records)
    cut = global_resolved_ts(partitions, resolved)
    if stop_ts is not None:
        cut = min(cut, stop_ts)
    return RunPlan(resolved_ts=cut, ddls=order_ddls(records, cut), bootstraps=latest_bootstraps(records))


# --- holding a partition at an undecodable message (merge.on_undecodable = "hold") ---------------------------------
#
# A message that cannot be decoded has no commit ts, so nothing says which cut it belongs under. Holding its
# partition there keeps every later event of that partition out of this run: the partition's resolved ts is the
# greatest one *before* the message (every row after that resolved event is above it, the message included, so
# nothing at or after the message is <= the cut), and the partition is read again from the message next time.
# Fixing the cause (a missing large_message_compression, a schema registry entry) and rerunning then applies it in
# order; nothing is lost and nothing is applied out of order.


def first_holds(failures: Iterable[tuple[PartitionKey, int]], skipped: Iterable[tuple[PartitionKey, int]] = ()
                ) -> dict[PartitionKey, int]:
    """Per partition, the offset of its first undecodable message that the operator has not chosen to skip."""
    passed = set(skipped)
    holds: dict[PartitionKey, int] = {}
    for partition, offset in failures:
        if (partition, offset) not in passed and offset < holds.get(partition, offset + 1):
            holds[partition] = offset
    return holds


def resolved_before_holds(seen: Mapping[PartitionKey, int], before_hold: Mapping[PartitionKey, int],
                          holds: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
    """The resolved ts this run saw per partition, where a held partition counts only resolved events before its
    hold (``before_hold``; absent when there was none)."""
    result = {partition: ts for partition, ts in seen.items() if partition not in holds}
    for partition in holds:
        if partition in before_hold:
            result[partition] = before_hold[partition]
    return result


def unapplied_with_holds(first_unapplied: Mapping[PartitionKey, int], holds: Mapping[PartitionKey, int]
                         ) -> dict[PartitionKey, int]:
    """First unapplied offsets, no later than each hold: the held message is read again next run."""
    result = dict(first_unapplied)
    for partition, offset in holds.items():
        result[partition] = min(result.get(partition, offset), offset)
    return result
