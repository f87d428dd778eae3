"""What the driver needs to plan a run, gathered while the executors decode.

The planner needs small aggregates of the decoded events: per partition the greatest resolved ts, per table the
row count, ts range and widest column types, the DDL list, the number of undecodable messages. A Spark aggregate
over the staged events would cost a full extra pass over them (string maps and all, about a third of the decode
time); instead every decode task folds its own events into a ``StatsPart`` and hands it to the driver through a
Spark accumulator, which Spark merges as tasks finish. Only these small parts reach the driver, never events.

Every field is safe to merge twice (Spark re-runs a task whose cached output was lost, and the accumulator then
sees its part again): maxima, minima, the widest column types and the DDLs keyed by their Kafka position are
idempotent; the counts are only reported (events read, dead letters), where a re-run's over-count is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

from pyspark.accumulators import AccumulatorParam

from ticdc_lakehouse.merge.plan import DDLRecord, PartitionKey, TableKey, table_key
from ticdc_lakehouse.core.events_arrow import old_image
from ticdc_lakehouse.core.model import UPDATE, DDLEvent, DecodeFailure, Event, ResolvedEvent, RowChange

#: a DDL's Kafka position (topic, partition, offset, seq): the same DDL from a re-run task is the same key
DDLPosition = tuple[str, int, int, int]


@dataclass
class TableRows:
    """One table's row events in a part, under the names as they arrived (case merged in ``finish``)."""

    rows: int
    min_ts: int
    max_ts: int
    column_types: list[tuple[str, str]]  # the widest seen, in upstream column order
    key_columns: list[str]
    sample: dict[str, Optional[str]]  # the values of the event the widest types came from
    #: the column sets (lower case) of the insert and update images, each with the greatest commit ts it had;
    #: None when some image lacked a value for a column it typed, or there were too many sets to keep
    layouts: Optional[dict[frozenset[str], int]] = field(default_factory=dict)
    #: the greatest scale of any value of each column typed bare ``decimal`` (no precision on the wire)
    scales: dict[str, int] = field(default_factory=dict)
    #: the widest types came from a delete's image holding only key columns (TiCDC's
    #: ``delete-only-output-handle-key-columns``): any other image is preferred to it, and alone it must not
    #: define the table's columns (the table would keep its key alone)
    key_only: bool = False
    #: row events per op (I/U/D): only reported (the run's summary), so a re-run task's over-count is harmless
    ops: dict[str, int] = field(default_factory=dict)
    #: the columns whose value some update changed (its old image as the decode stage keeps it, ``old_image``),
    #: as the events named them: a key column among them moved its row (``changes.key_changes_possible``)
    changed: frozenset[str] = frozenset()

    def absorb(self, other: "TableRows") -> None:
        self.rows += other.rows
        self.changed = self.changed | other.changed
        self.scales = _max_scales(self.scales, other.scales)
        self.ops = {op: self.ops.get(op, 0) + other.ops.get(op, 0) for op in {*self.ops, *other.ops}}
        self.min_ts = min(self.min_ts, other.min_ts)
        self.max_ts = max(self.max_ts, other.max_ts)
        self.layouts = _merge_layouts(self.layouts, other.layouts)
        if (not other.key_only, len(other.column_types)) > (not self.key_only, len(self.column_types)):
            self.column_types, self.key_columns, self.sample = other.column_types, other.key_columns, other.sample
            self.key_only = other.key_only


def _key_only(event: RowChange) -> bool:
    """A delete whose image holds key columns only (``delete-only-output-handle-key-columns``)."""
    return event.after is None and bool(event.key_columns) and event.column_types.keys() <= set(event.key_columns)


def _image_rank(event: RowChange) -> tuple[bool, int]:
    """Which image's types describe a table best: any but a key-only one, then the widest."""
    return (not _key_only(event), len(event.column_types))


def _max_scales(one: dict[str, int], other: dict[str, int]) -> dict[str, int]:
    merged = dict(one)
    for name, scale in other.items():
        merged[name] = max(scale, merged.get(name, 0))
    return merged


def decimal_scale(text: str) -> int:
    """Digits after the point of a canonical decimal (plain text, ``values.from_decimal``)."""
    point = text.find(".")
    return 0 if point < 0 else len(text) - point - 1


#: more column sets than this in one table's images: the planner stops reasoning about them (see columns_sent)
MAX_LAYOUTS = 64


def _merge_layouts(one: Optional[dict[frozenset[str], int]],
                   other: Optional[dict[frozenset[str], int]]) -> Optional[dict[frozenset[str], int]]:
    if one is None or other is None:
        return None
    merged = dict(one)
    for names, ts in other.items():
        if ts > merged.get(names, -1):
            merged[names] = ts
    return merged if len(merged) <= MAX_LAYOUTS else None


def columns_sent(layouts: Optional[dict[frozenset[str], int]],
                 added_in_run: Optional[dict[str, int]] = None) -> Optional[frozenset[str]]:
    """The columns (lower case) whose value every insert and update image gives: the MERGE takes them from the
    change set, not from the table. None when there is no such image (only deletes).

    ``added_in_run``: columns added in this run, ahead of the rows below them (column -> DDL commit ts, see
    ``ddl_apply.deferrable``). An image older than such a column cannot carry it, and the table's value is
    still NULL then (added without a value for existing rows, nothing merged since), so it counts as sent
    when every image lacking it is older than its DDL."""
    if layouts is None:
        return frozenset()
    if not layouts:
        return None
    sent = frozenset.intersection(*layouts)
    for column, ddl_ts in (added_in_run or {}).items():
        if column not in sent and all(ts < ddl_ts for names, ts in layouts.items() if column not in names):
            sent = sent | {column}
    return sent


@dataclass
class StatsPart:
    """The aggregates of some of the decoded events (one task's, or all of them once merged)."""

    events: int = 0
    failures: int = 0
    max_commit_ts: int = 0
    resolved: dict[PartitionKey, int] = field(default_factory=dict)
    rows: dict[tuple[str, str], TableRows] = field(default_factory=dict)
    ddls: dict[DDLPosition, DDLRecord] = field(default_factory=dict)

    def absorb(self, other: "StatsPart") -> "StatsPart":
        self.events += other.events
        self.failures += other.failures
        self.max_commit_ts = max(self.max_commit_ts, other.max_commit_ts)
        for partition, ts in other.resolved.items():
            if ts > self.resolved.get(partition, -1):
                self.resolved[partition] = ts
        for name, table in other.rows.items():
            mine = self.rows.get(name)
            if mine is None:
                self.rows[name] = replace(table)  # a copy: absorbing more must not change ``other``
            else:
                mine.absorb(table)
        self.ddls.update(other.ddls)
        return self


class StatsParam(AccumulatorParam):
    """Spark's recipe for merging ``StatsPart`` accumulator values."""

    def zero(self, value: StatsPart) -> StatsPart:
        return StatsPart()

    def addInPlace(self, value1: StatsPart, value2: StatsPart) -> StatsPart:
        return value1.absorb(value2)


class StatsFolder:
    """Folds decoded events into a ``StatsPart`` inside a decode task; cheap per event (it runs for every one)."""

    def __init__(self) -> None:
        self.part = StatsPart()
        # per (schema, table): [rows, min ts, max ts, widest event, {column set of insert/update images: their
        # greatest ts}, every such image had all its typed columns, the types dict of the last image, its
        # column set, {bare decimal column: greatest scale}, (types dict, its bare decimal columns), {op: row
        # events}, {column an update changed}] (a list: updated in place for every row)
        self._tables: dict[tuple[str, str], list] = {}

    def add(self, events: Iterable[Event]) -> None:
        tables = self._tables
        part = self.part
        count = 0
        for event in events:
            count += 1
            if type(event) is RowChange:
                ts = event.commit_ts
                entry = tables.get((event.schema, event.table))
                if entry is None:
                    entry = tables[(event.schema, event.table)] = [0, ts, ts, event, {}, True, None, None, {},
                                                                   (None, ()), {}, set()]
                entry[0] += 1
                ops = entry[10]
                ops[event.op] = ops.get(event.op, 0) + 1
                if event.op == UPDATE and event.before:
                    entry[11].update(old_image(event))
                if ts < entry[1]:
                    entry[1] = ts
                elif ts > entry[2]:
                    entry[2] = ts
                types = event.column_types
                if len(types) > len(entry[3].column_types) or _key_only(entry[3]):
                    if _image_rank(event) > _image_rank(entry[3]):
                        entry[3] = event
                if types is not entry[9][0]:
                    entry[9] = (types, tuple(name for name, desc in types.items() if desc == "decimal"))
                if entry[9][1]:
                    _fold_scales(entry[8], entry[9][1], event)
                # which columns the images carry, and until when: consecutive images of one layout share their
                # types dict (the decoders' contract), so only a change of layout costs a set; an image without
                # all its typed columns spoils it
                after = event.after
                if after is not None:
                    if len(after) != len(types):
                        entry[5] = False
                    else:
                        if types is not entry[6]:
                            entry[6] = types
                            entry[7] = frozenset(name.lower() for name in types)
                        layouts = entry[4]
                        if ts > layouts.get(entry[7], -1):
                            layouts[entry[7]] = ts
                            if len(layouts) > MAX_LAYOUTS:
                                entry[5] = False
                                layouts.clear()
            elif type(event) is ResolvedEvent:
                partition = (event.position.topic, event.position.partition)
                if event.ts > part.resolved.get(partition, -1):
                    part.resolved[partition] = event.ts
            elif type(event) is DDLEvent:
                pos = event.position
                part.ddls[(pos.topic, pos.partition, pos.offset, pos.seq)] = DDLRecord.from_event(event)
                part.max_commit_ts = max(part.max_commit_ts, event.commit_ts)
            elif type(event) is DecodeFailure:
                part.failures += 1
        part.events += count

    def finish(self) -> StatsPart:
        """The part to hand to the accumulator (plain data: it is pickled to the driver)."""
        part = self.part
        for name, (rows, min_ts, max_ts, widest, layouts, complete, _, _, scales, _, ops, changed
                   ) in self._tables.items():
            part.max_commit_ts = max(part.max_commit_ts, max_ts)
            values = widest.after if widest.after is not None else (widest.before or {})
            part.rows[name] = TableRows(rows, min_ts, max_ts, list(widest.column_types.items()),
                                        list(widest.key_columns), dict(values), layouts if complete else None,
                                        scales, _key_only(widest), ops, frozenset(changed))
        self._tables = {}
        return part


def _fold_scales(scales: dict[str, int], names: tuple[str, ...], event: RowChange) -> None:
    for image in (event.after, event.before):
        if image:
            for name in names:
                value = image.get(name)
                if value:
                    scale = decimal_scale(value)
                    if scale > scales.get(name, -1):
                        scales[name] = scale


def infer_precision(types: list[tuple[str, str]], scales: dict[str, int]) -> list[tuple[str, str]]:
    """Row events type DECIMAL without precision (Open Protocol, Craft); TiDB writes every value with the
    column's scale, so a table created from rows takes the greatest scale of its values (every value of the
    run, not one sample that may be NULL) and the widest precision. A column with no value at all stays bare
    (``mysql_types.BARE_DECIMAL_ICEBERG``); a later value that does not fit it is a dead letter, never rounded."""
    result = []
    for name, descriptor in types:
        scale = scales.get(name)
        if descriptor == "decimal" and scale is not None:
            descriptor = f"decimal(38,{min(scale, 38)})"
        result.append((name, descriptor))
    return result


@dataclass
class TableStats:
    """One table's row events in the whole run, as the planner and the per-table work read them."""

    schema: str  # the upstream names as first seen (the key is case-insensitive)
    table: str
    rows: int
    min_ts: int
    max_ts: int
    column_types: list[tuple[str, str]]  # the widest seen, DECIMAL precision inferred (``infer_precision``)
    key_columns: list[str]
    layouts: Optional[dict[frozenset[str], int]]  # see ``TableRows.layouts`` and ``columns_sent``
    defines_columns: bool  # False: only key-only deletes typed it (see ``TableRows.key_only``)
    ops: dict[str, int]  # row events per op (I/U/D), only reported
    #: the columns (lower case) whose value some update changed, see ``TableRows.changed``
    changed_by_updates: frozenset[str] = frozenset()


@dataclass
class StagedStats:
    """The planner's view of all staged events: names merged case-insensitively, DDLs in one list."""

    resolved: dict[PartitionKey, int]  # partition -> greatest resolved ts seen
    rows: dict[TableKey, TableStats]
    failures: int
    max_commit_ts: int
    events: int = 0
    ddls: list[DDLRecord] = field(default_factory=list)  # in Kafka position order


def finish(part: StatsPart) -> StagedStats:
    """The merged part as the planner uses it: tables keyed case-insensitively (TiDB names are), each with the
    widest column types seen (DECIMAL precision inferred from a sample value)."""
    merged: dict[TableKey, TableRows] = {}
    names: dict[TableKey, tuple[str, str]] = {}
    for (schema, table), entry in sorted(part.rows.items()):
        key = table_key(schema, table)
        if key in merged:
            merged[key].absorb(entry)
        else:
            merged[key] = replace(entry)
            names[key] = (schema, table)
    rows = {
        key: TableStats(*names[key], entry.rows, entry.min_ts, entry.max_ts,
                        infer_precision(entry.column_types, entry.scales), list(entry.key_columns), entry.layouts,
                        not entry.key_only, dict(entry.ops), frozenset(name.lower() for name in entry.changed))
        for key, entry in merged.items()
    }
    ddls = [part.ddls[position] for position in sorted(part.ddls)]
    return StagedStats(dict(part.resolved), rows, part.failures, part.max_commit_ts, part.events, ddls)
