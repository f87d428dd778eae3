"""The typed values a table's flush takes and gives: the table and the range of its changes it applies
(``ChangeRange``), and what the apply did (``FlushResult``). Their own module so that the flush paths
(``flush``, ``table_commit``) and the steps that plan them (``table_work``, ``batch_flush``) share them without an
import circle."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Optional

from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY
from ticdc_lakehouse.iceberg.tables import TargetTable
from ticdc_lakehouse.merge.changes import change_set
from ticdc_lakehouse.merge.read_check import Expected


@dataclass(frozen=True)
class FlushResult:
    table: str
    after_ts: int
    upto_ts: int
    merged: bool  # a MERGE ran (False: nothing in range, only the watermark moved)
    #: rows the apply wrote to data files, and rows it removed (delete files, deletion vectors, rewritten files),
    #: from the summaries of the snapshots it committed (see ``snapshot_changes``)
    written: int = 0
    removed: int = 0


@dataclass(frozen=True)
class ChangeRange:
    """One table and the range of its changes one flush applies: the row events of upstream
    ``upstream_schema.upstream_table`` with ``lower < commit_ts <= upto_ts``, into ``target``.

    ``after_ts`` overrides the lower bound (-1 for protocols without resolved ts, which rely on offsets);
    ``has_rows``: whether the range holds any row event (else only the watermark moves); ``summary``: the run's
    snapshot properties; ``always_sent``: see ``merge_sql``; ``row_events``: the table's row events in the run
    (an upper bound of the change set, see ``can_stage``)."""

    target: TargetTable
    upstream_schema: str
    upstream_table: str
    upto_ts: int
    has_rows: bool
    summary: Mapping[str, str]
    after_ts: Optional[int] = None
    always_sent: Optional[frozenset[str]] = frozenset()
    row_events: Optional[int] = None
    #: columns renamed in the run ahead of the rows below them: (ts, old, new) (see ``changes.carry_renames``)
    renames: tuple[tuple[int, str, str], ...] = ()
    #: an update among the rows may have changed a key (``changes.key_changes_possible``)
    keys_move: bool = True
    #: the range's events are those the planner counted: a change set reading none of them fails the run
    #: (``read_check``); False for a range whose invalid values were set aside (fewer events on purpose)
    check_read: bool = True

    @property
    def lower(self) -> int:
        return self.target.watermark if self.after_ts is None else self.after_ts

    @property
    def label(self) -> str:
        return f"{self.target.namespace}.{self.target.name}"

    def properties(self) -> dict[str, str]:
        """The snapshot summary of the commit that applies the range: the run's summary and the watermark."""
        return {**self.summary, RESOLVED_TS_PROPERTY: str(self.upto_ts)}

    def source(self, events, partitions: Optional[int] = None):
        """The typed change set of the range (``changes.change_set``; ``partitions``: see
        ``changes.collapse_to_last``): never collected."""
        target = self.target
        return change_set(events, self.upstream_schema, self.upstream_table, self.lower, self.upto_ts,
                          target.columns, target.keys, self.always_sent, self.renames, self.keys_move, partitions)

    def set_aside_to(self, upto_ts: int) -> "ChangeRange":
        """The range up to ``upto_ts`` over events whose invalid values were set aside (``value_checks``): fewer
        than the planner counted, so ``read_check`` does not hold them to its count."""
        return replace(self, upto_ts=upto_ts, check_read=False)

    def expected(self) -> Optional[Expected]:
        """What ``read_check`` holds the range's change set to: None when it need read nothing (no rows in
        range, or not the planner's events, see ``check_read``)."""
        if not (self.has_rows and self.check_read):
            return None
        return Expected(self.label, f"{self.upstream_schema}.{self.upstream_table}", self.lower, self.upto_ts)
