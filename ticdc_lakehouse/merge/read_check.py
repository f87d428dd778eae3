"""Every applied range read the changes the planner counted: no table's rows vanish in a run that says it worked.

Why: the planner decides from the decode tasks' aggregates (``staged_stats``, ``table_work.has_rows``) that a table
has row events in a range; the change set that applies them is a separate chain of DataFrame steps over the cached
events (``changes.change_set``). Should the two ever disagree (a filter that misses the table's name, a range off by
one, events staged where the change set does not look), the apply would commit the range's watermark with none of
its rows, and the run would report success: the rows would be gone unseen, since the next run starts above that
watermark. It happened once, in an experiment (bench/RESULTS.md, 2026-11-28 evening): four tables committed with 0
rows, noticed only by the bench's value check.

So each change set is observed as it is computed (Spark's ``Observation``: the changes it held per table,
aggregated by the write itself, no extra job), and a range the planner counted rows in must have read at least one
change before its commit counts: the write jobs check before they commit (``table_commit.append_tables``), the
staged apply before its fast-forward, and a MERGE, which commits itself, right after its statement, rolling the
table back to its snapshot before it (``flush``). The run then fails naming the table; the rerun starts from the
same checkpoint.

Not an exact count: the decode tasks' aggregates may count a re-run task twice (``staged_stats``), and a change set
holds the last change of each key, not every event; but a range with events has at least one change, whatever they
were. A keyless table's range is checked by a job of its own before its apply (``flush``: its changes net out into
row counts that may cancel). A range whose values were set aside (``value_checks``: fewer events on purpose) is
not checked.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ticdc_lakehouse.merge.table_events import TABLE_INDEX

log = logging.getLogger(__name__)

#: how long to wait for Spark to hand over a finished write's observations (its listener bus delivers them a few
#: milliseconds after the action returns); past it the check is skipped with a warning, never failed
WAIT_S = 30.0

_names = itertools.count()


class ChangesNotRead(RuntimeError):
    """A range the planner counted row events in was applied with none of them: nothing of it is committed."""


@dataclass(frozen=True)
class ObservedChanges:
    """One change set under observation: its ``labels`` (one table, or a several-table change set's tables in
    ``TABLE_INDEX`` order) and Spark's observation of it (the JVM's ``org.apache.spark.sql.Observation``)."""

    labels: tuple[str, ...]
    observation: Any
    several: bool

    def tables_read(self, deadline: float) -> Optional[frozenset[str]]:
        """The labels of the tables whose changes the write read; None when Spark did not report by ``deadline``
        (``time.monotonic``). Read from the JVM's observation: pyspark's ``Observation.get`` waits without bound
        and fails on the empty row of a plan the optimizer proved empty (which read nothing)."""
        row = self.observation._jo.getRowOrEmpty()  # waits up to 100 ms
        while not row.isDefined():
            if time.monotonic() > deadline:
                return None
            row = self.observation._jo.getRowOrEmpty()
        row = row.get()
        if row.size() == 0:  # the observed plan was optimized away: provably empty
            return frozenset()
        if not self.several:
            return frozenset(self.labels) if int(row.getLong(0)) > 0 else frozenset()
        seen = str(row.getString(1) or "")
        return frozenset(self.labels[int(index)] for index in seen.split(",") if index)


def observe(source, labels: Sequence[str]):
    """``source`` (a change set: ``changes.change_set``, or ``tables_change_set`` with ``TABLE_INDEX``) observed as
    it is computed, and its ``ObservedChanges``. ``labels``: its table, or its tables in ``TABLE_INDEX`` order."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    several = TABLE_INDEX in source.columns
    observation = Observation(f"lakehouse_changes_read_{next(_names)}")
    metrics = [F.count(F.lit(1)).alias("changes")]
    if several:
        metrics.append(F.array_join(F.array_sort(F.collect_set(F.col(TABLE_INDEX))), ",").alias("tables"))
    observed = source.observe(observation, *metrics)
    return observed, ObservedChanges(tuple(labels), observation, several)


@dataclass(frozen=True)
class Expected:
    """A table whose range the planner counted row events in, and the upstream range, for the failure's line."""

    label: str
    upstream: str
    lower: int
    upto_ts: int


def check_read(observed: Sequence[ObservedChanges], expected: Sequence[Expected], wait_s: float = WAIT_S) -> None:
    """Raise ``ChangesNotRead`` naming every ``expected`` table that no observed change set read a change of
    (call after the writes ran, before committing them). A change set whose observation Spark did not report in
    ``wait_s`` is not held against its tables (logged)."""
    deadline = time.monotonic() + wait_s
    read: set[str] = set()
    unknown: set[str] = set()
    for entry in observed:
        tables = entry.tables_read(deadline)
        if tables is None:
            unknown.update(entry.labels)
            log.warning("no report of the changes read for %s: not checked", ", ".join(entry.labels))
        else:
            read.update(tables)
    missing = [e for e in expected if e.label not in read and e.label not in unknown]
    if missing:
        raise ChangesNotRead(not_read_line(missing))


def not_read_line(missing: Sequence[Expected]) -> str:
    """The one line of a ``ChangesNotRead``: which tables, which range, and what to do."""
    first = missing[0]
    more = f" (and {len(missing) - 1} more table(s): {', '.join(e.label for e in missing[1:4])}" \
           f"{'...' if len(missing) > 4 else ''})" if len(missing) > 1 else ""
    return (f"{first.label}: the run counted row events of {first.upstream} in commit ts ({first.lower}, "
            f"{first.upto_ts}] but its change set read none{more}; nothing of it was committed. This is a bug: "
            f"keep the landed segments and the log (-v), and report it; the next run retries from the same "
            f"checkpoint")
