"""The state of one merge run, shared by its steps (plan -> DDL barriers -> flush -> checkpoint).

Values only, and the few accessors that keep them consistent (the lake-table cache, halting a table); the work
itself is in the step modules: ``planning`` (the cut), ``ddl_apply`` (the barriers), ``table_work`` (one table's
flush and creation), ``checkpointing`` (the checkpoint). None of them reaches back into ``engine``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.iceberg.java_api import JavaIceberg
from ticdc_lakehouse.iceberg.tables import TargetTable, describe
from ticdc_lakehouse.merge.plan import PartitionKey, RunPlan, TableKey, table_key
from ticdc_lakehouse.merge.staged_stats import StagedStats, TableStats
from ticdc_lakehouse.runtime.state import Checkpoint, StateStore

log = logging.getLogger(__name__)


@dataclass
class MergeReport:
    changefeed: str
    run_id: str
    protocol: str
    previous_resolved_ts: int
    resolved_ts: int
    events_read: int = 0
    tables_merged: list[str] = field(default_factory=list)
    ddls_applied: list[str] = field(default_factory=list)
    #: lake tables (namespace.table) an applied DDL changed, rows or not: their Airflow assets get an event too
    ddl_tables: list[str] = field(default_factory=list)
    halted: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: int = 0
    #: partitions held at an undecodable message (merge.on_undecodable = "hold"): topic, partition, offset, error
    held: list[dict[str, Any]] = field(default_factory=list)
    pending_tables: list[str] = field(default_factory=list)
    #: partitions with records but no resolved event ever (resolved_ts auto/required): nothing of them applies
    no_resolved_events: list[str] = field(default_factory=list)
    #: row changes newly landed with a commit ts at or below the committed cut (see merge.below_cut)
    below_cut: dict[str, Any] = field(default_factory=lambda: {"late": 0, "replay": 0, "tables": []})
    #: landed segments this run found unreadable and moved aside (see landing/quarantine.py)
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    #: offsets that should be landed but are not ("topic/partition" -> [[start, end), ...]): the partition is
    #: merged up to the first of them only, until landing fills them (or records them as data loss)
    missing: dict[str, list[list[int]]] = field(default_factory=dict)
    seconds: float = 0.0
    #: per lake table: row events by op (``I``/``U``/``D``, as decoded) and the rows its applies wrote/removed
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: seconds per phase of the run (decode, ddl, apply, commit)
    phases: dict[str, float] = field(default_factory=dict)

    def count_apply(self, table: str, written: int, removed: int, seconds: float) -> None:
        entry = self.tables.setdefault(table, {})
        entry["written"] = entry.get("written", 0) + written
        entry["removed"] = entry.get("removed", 0) + removed
        entry["seconds"] = round(entry.get("seconds", 0.0) + seconds, 3)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DecodedRun:
    """What the decode step hands the planning: where the run read, and the decoded events' aggregates."""

    changefeed: str
    protocol: str
    checkpoint: Checkpoint  # the last committed one
    events: Any  # the decoded events DataFrame, cached in the executors (never collected)
    stats: StagedStats
    partitions: set[PartitionKey]  # every partition of the changefeed's topics
    landed_end: dict[PartitionKey, int]  # per partition, the end offset of what is landed and read
    stop_ts: Optional[int] = None  # a bounded backfill's cap on the cut


@dataclass
class CutPlan:
    """The planning step's result: the cut with its DDLs, and the per-partition positions the checkpoint keeps."""

    plan: RunPlan
    resolved_mode: bool  # the cut is the global resolved ts (else: everything landed, per-key order)
    partition_resolved: dict[PartitionKey, int]  # forward-only, checkpoint's and this run's
    holds: dict[PartitionKey, int]  # partitions held at an undecodable message (offset)

    @property
    def cut(self) -> int:
        return self.plan.resolved_ts


def holding(settings: Settings) -> bool:
    """Whether ``merge.on_undecodable`` holds a partition at an undecodable message (else: dead letter)."""
    return settings.merge.holding


@dataclass
class RunContext:
    """Everything the DDL and flush steps share during one run."""

    spark: Any
    settings: Settings
    changefeed: str
    ji: JavaIceberg
    state: StateStore
    events: Any  # staged event DataFrame
    run_id: str
    halted: dict[TableKey, int]
    row_stats: dict[TableKey, TableStats]
    range_checks: dict[tuple[TableKey, int, int], bool] = field(default_factory=dict)  # has_rows answers asked
    added_in_run: dict[TableKey, dict[str, int]] = field(default_factory=dict)  # see ddl_apply.deferrable
    #: columns renamed by a DDL applied ahead of the rows below it: (ts, old name, new name), in ts order
    renamed_in_run: dict[TableKey, list[tuple[int, str, str]]] = field(default_factory=dict)
    #: columns (lower case) dropped by a DDL applied ahead of the rows below it, which still carry them
    dropped_in_run: dict[TableKey, set[str]] = field(default_factory=dict)
    #: per table, the run's DDLs on it and the column names each names (``ddl_apply.columns_by_table``)
    run_columns: dict[TableKey, list[tuple[int, frozenset[str]]]] = field(default_factory=dict)
    gone: dict[TableKey, int] = field(default_factory=dict)  # dropped or renamed away in this run, at this ts
    removals: dict[TableKey, list] = field(default_factory=dict)  # this run's DROP/RENAME-away per table
    pending: set[TableKey] = field(default_factory=set)  # tables with rows but no schema yet (kept for later)
    tables: dict[TableKey, TargetTable] = field(default_factory=dict)
    report: Optional[MergeReport] = None
    resolved_mode: bool = True

    def summary(self, **extra: Any) -> dict[str, str]:
        values = {"tidb.changefeed": self.changefeed, "tidb.run-id": self.run_id}
        values.update({k: str(v) for k, v in extra.items()})
        return values

    def target(self, schema: str, table: str, refresh: bool = False) -> TargetTable:
        key = table_key(schema, table)
        if refresh or key not in self.tables:
            self.tables[key] = describe(self.ji, schema, table)
        return self.tables[key]

    def forget(self, schema: str, table: str) -> None:
        self.tables.pop(table_key(schema, table), None)

    def halt(self, schema: str, table: str, ts: int, query: str, reason: str) -> None:
        key = table_key(schema, table)
        log.error("halting %s.%s at commit ts %s: %s (DDL: %s)", schema, table, ts, reason, query)
        self.state.halt(self.changefeed, schema, table, ts, query, reason)
        self.halted[key] = min(ts, self.halted.get(key, ts))
        if self.report is not None:
            self.report.halted.append({"table": f"{schema}.{table}", "ddl_ts": ts, "query": query, "reason": reason})
