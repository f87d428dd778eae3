"""Small tables of different columns typed and collapsed by one Spark plan: their columns as slots of one frame,
each table's column names as data.

Why: a change set's plan types each column by a Spark expression naming it, so tables of different columns needed
a plan each, and the driver's JVM took about 0.3 s to analyse and plan one (2 cores): a run of 1,000 small tables
of their own columns spent five minutes planning, whatever its few changes. Most databases have no two tables of
the same columns.

A slot is a column of the shared frame with one column signature (Spark type, MySQL type, required): the tables'
keys (the same signatures in every table of a frame) take the first slots, in key order; each other column takes
the k-th slot of its signature when it is its table's k-th column of that signature. The frame reads a slot's value
from an event's image under the name its table has for the slot (a column of the broadcast ranges, see
``table_events.tables_rows``; ``TargetColumn.name_from``), so typing and every value check are one expression per
slot whatever the number of tables (``changes.checked_text``), and a slot its table does not use holds NULL and is
never checked. The write tasks take each table's slots back under its own names (``batch_write.file_writer``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

from ticdc_lakehouse.iceberg.columns import TargetColumn
from ticdc_lakehouse.merge.value_checks import never_a_problem

#: a slot's name in the frame, and the name of the frame column holding each event's table's name for it
SLOT_PREFIX = "_lakehouse_slot_"
NAME_PREFIX = "_lakehouse_name_"

#: what a slot's columns share: how a value is typed and checked, and how a failure describes the column
Signature = tuple[str, Optional[str], bool]


def signature(column: TargetColumn) -> Signature:
    """The column's Spark type, MySQL type descriptor and whether it is required; no MySQL type for a column no
    text of which is a problem (``value_checks.never_a_problem``: VARCHAR(32), TEXT and JSON columns are read
    the same and never fail, so they share slots)."""
    mysql_type = None if never_a_problem(column) else column.mysql_type
    return column.spark_type.lower(), mysql_type, column.required


def key_signatures(keys: Sequence[TargetColumn]) -> tuple[Signature, ...]:
    """What tables must share to be one frame's: their keys' signatures, in key order (the frame collapses each
    table's changes by its key slots)."""
    return tuple(signature(key) for key in keys)


@dataclass(frozen=True)
class SlotFrame:
    """The slots of a frame of tables (``columns``, keys first; ``keys`` the key slots) and, per table in frame
    order, its column name for each slot (``names``; None where the table has no column there)."""

    columns: tuple[TargetColumn, ...]
    keys: tuple[TargetColumn, ...]
    names: tuple[tuple[Optional[str], ...], ...]

    def slots_of(self, table: int, names: Sequence[str]) -> tuple[str, ...]:
        """The slot (frame column name) of each of the named columns of table ``table``, in that order."""
        where = {name: slot.name for slot, name in zip(self.columns, self.names[table]) if name is not None}
        missing = [name for name in names if name not in where]
        if missing:
            raise ValueError(f"table {table} has no slot for column(s) {missing}")
        return tuple(where[name] for name in names)


def slot_frame(tables: Sequence[tuple[Sequence[TargetColumn], Sequence[TargetColumn]]]) -> SlotFrame:
    """The slots of tables given as (columns, keys), all with the same ``key_signatures``."""
    if not tables:
        raise ValueError("no tables")
    keys_shape = key_signatures(tables[0][1])
    if any(key_signatures(keys) != keys_shape for _, keys in tables):
        raise ValueError("tables of one slot frame must have keys of the same signatures")
    positions: dict[tuple[Signature, int], int] = {}  # (signature, occurrence) -> value slot, first seen first
    assigned: list[dict[int, str]] = []  # per table: slot -> its column name
    for columns, keys in tables:
        names = {i: key.name for i, key in enumerate(keys)}
        key_names = {key.name.lower() for key in keys}
        seen: dict[Signature, int] = {}
        for column in columns:
            if column.name.lower() in key_names:
                continue
            kind = signature(column)
            occurrence = seen.get(kind, 0)
            seen[kind] = occurrence + 1
            slot = positions.setdefault((kind, occurrence), len(keys_shape) + len(positions))
            names[slot] = column.name
        assigned.append(names)
    kinds = [*keys_shape, *[kind for kind, _ in positions]]
    columns = tuple(TargetColumn(f"{SLOT_PREFIX}{j}", spark_type, mysql_type, required, f"{NAME_PREFIX}{j}")
                    for j, (spark_type, mysql_type, required) in enumerate(kinds))
    return SlotFrame(columns, columns[:len(keys_shape)],
                     tuple(tuple(names.get(j) for j in range(len(columns))) for names in assigned))


#: at most this many slots in a frame (unless one table alone has more columns): every row of a frame carries
#: each of its slots through the collapse's shuffle (NULL where its table has none), so a frame of a thousand
#: tables of varied types is cut into frames of tables of similar columns rather than one of hundreds of slots
MAX_SLOTS = 64


def packed(tables: Sequence[tuple[Sequence[TargetColumn], Sequence[TargetColumn]]],
           max_slots: int = MAX_SLOTS) -> list[list[int]]:
    """The tables (columns, keys; all with the same ``key_signatures``) cut into frames of at most ``max_slots``
    slots each, as positions in ``tables``: tables of similar columns next to each other (ordered by their
    columns' signatures), each added to the current frame while its slots stay within the bound."""

    def value_kinds(index: int) -> Counter:
        columns, keys = tables[index]
        key_names = {key.name.lower() for key in keys}
        return Counter(signature(c) for c in columns if c.name.lower() not in key_names)

    kinds = [value_kinds(i) for i in range(len(tables))]
    order = sorted(range(len(tables)), key=lambda i: sorted(map(repr, kinds[i].elements())))
    frames: list[list[int]] = []
    widest: Counter = Counter()  # the current frame's slots of each signature
    for index in order:
        grown = widest | kinds[index]  # the larger count of each signature
        if frames and sum(grown.values()) + len(tables[index][1]) <= max_slots:
            frames[-1].append(index)
            widest = grown
        else:
            frames.append([index])
            widest = Counter(kinds[index])
    return frames


def always_sent_slots(slots: SlotFrame, always_sent: Sequence[Optional[frozenset[str]]]
                      ) -> Optional[frozenset[str]]:
    """The frame's ``always_sent`` (see ``changes.partial_positions``): the slots (lower case) that every change
    of every table using them carried, from each table's ``always_sent`` (the lower-case names every change of it
    carried, None without updates); None when no table had updates. A slot some table's changes did not always
    carry gets presence flags in every table's rows (NULL where its table has no column there: never present)."""
    if all(sent is None for sent in always_sent):
        return None
    partial = {j for names, sent in zip(slots.names, always_sent) if sent is not None
               for j, name in enumerate(names) if name is not None and name.lower() not in sent}
    return frozenset(slot.name.lower() for j, slot in enumerate(slots.columns) if j not in partial)
