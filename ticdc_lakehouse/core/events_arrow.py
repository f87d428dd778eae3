"""The decoded-event stream as one fixed Arrow/Spark schema.

Decoding runs in Spark executors (``mapInArrow``) and must emit one schema whatever the upstream tables look like,
so row values are a ``map<string,string>`` of canonical strings (see ``ticdc_lakehouse.core.values``) and are typed later,
per table, by the target Iceberg column types. DDL, resolved and failure events share the same record.

A row's column types and key columns are not in the record: the planner gets them from the decode tasks' own
aggregates (``merge.staged_stats``) and the MERGE from the target table. Repeating them on every row was a third of
the cost of handing decoded events to Spark and caching them. Only what typing a value needs per row stays:
``named_enums``, the ENUM/SET columns whose values arrive as member names rather than index/bitmask.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Iterable, Optional

import pyarrow as pa

from ticdc_lakehouse.core.model import UPDATE, DDLEvent, DecodeFailure, Event, ResolvedEvent, RowChange, TableSchema

KIND_ROW = "row"
KIND_DDL = "ddl"
KIND_RESOLVED = "resolved"
KIND_ERROR = "error"

_STR_MAP = pa.map_(pa.string(), pa.string())

EVENT_ARROW_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("seq", pa.int32()),
        ("commit_ts", pa.int64()),
        ("schema_name", pa.string()),
        ("table_name", pa.string()),
        ("op", pa.string()),
        ("after", _STR_MAP),
        ("before", _STR_MAP),
        ("named_enums", pa.list_(pa.string())),
        ("schema_version", pa.int64()),
        ("ddl_query", pa.string()),
        ("ddl_type", pa.string()),
        ("table_schema", pa.string()),
        ("is_bootstrap", pa.bool_()),
        ("error", pa.string()),
        ("raw_key", pa.string()),
        ("raw_value", pa.string()),
        ("ts_made_up", pa.bool_()),
    ]
)

#: the same schema as a Spark DDL string, for ``mapInArrow``
EVENT_SPARK_SCHEMA = (
    "kind string, topic string, partition int, offset bigint, seq int, commit_ts bigint, schema_name string, "
    "table_name string, op string, after map<string,string>, before map<string,string>, "
    "named_enums array<string>, schema_version bigint, ddl_query string, "
    "ddl_type string, table_schema string, is_bootstrap boolean, error string, raw_key string, raw_value string, "
    "ts_made_up boolean"
)

_FIELDS = EVENT_ARROW_SCHEMA.names
#: fields only DDL and failure events fill
_RARE_FIELDS = ("ddl_query", "ddl_type", "table_schema", "is_bootstrap", "error", "raw_key", "raw_value")


def table_schema_to_json(schema: Optional[TableSchema]) -> Optional[str]:
    if schema is None:
        return None
    return json.dumps(asdict(schema), ensure_ascii=False)


def _raw(raw: Optional[bytes]) -> Optional[str]:
    """A failed message's key or value, whole (base64): the dead-letter table promises the raw bytes, and only
    failures carry them (the landed segment holding them may be deleted by landing retention)."""
    if raw is None:
        return None
    return base64.b64encode(raw).decode("ascii")


def event_to_row(event: Event) -> dict:
    """One event as a dict with every field of ``EVENT_ARROW_SCHEMA`` (absent fields None)."""
    pos = event.position
    row = dict.fromkeys(_FIELDS)
    row.update(topic=pos.topic, partition=pos.partition, offset=pos.offset, seq=pos.seq)
    if isinstance(event, RowChange):
        row.update(
            kind=KIND_ROW,
            commit_ts=event.commit_ts,
            schema_name=event.schema,
            table_name=event.table,
            op=event.op,
            after=list(event.after.items()) if event.after is not None else None,
            before=list(old_image(event).items()) if event.before is not None else None,
            named_enums=named_enums(event.column_types),
            schema_version=event.schema_version,
            ts_made_up=True if event.ts_made_up else None,
        )
    elif isinstance(event, ResolvedEvent):
        row.update(kind=KIND_RESOLVED, commit_ts=event.ts)
    elif isinstance(event, DDLEvent):
        row.update(
            kind=KIND_DDL,
            commit_ts=event.commit_ts,
            schema_name=event.schema,
            table_name=event.table,
            ddl_query=event.query,
            ddl_type=event.ddl_type,
            table_schema=table_schema_to_json(event.table_schema),
            is_bootstrap=event.is_bootstrap,
            schema_version=event.table_schema.version if event.table_schema else None,
        )
    elif isinstance(event, DecodeFailure):
        row.update(kind=KIND_ERROR, error=event.reason, raw_key=_raw(event.key), raw_value=_raw(event.value))
    else:  # pragma: no cover - the model is closed
        raise TypeError(f"not an event: {event!r}")
    return row


def named_enums(column_types: dict[str, str]) -> Optional[list[str]]:
    """The ENUM/SET columns whose values are member names: their descriptor keeps the members (``enum('a','b')``);
    a bare ``enum``/``set`` (or no descriptor) means the value is the index/bitmask. None when there are none."""
    names = [name for name, descriptor in column_types.items() if descriptor.startswith(("enum(", "set("))]
    return names or None


class _NamedEnums:
    """``named_enums`` per row, computed once per column-type dict: decoders share one dict among the rows of a
    layout (``RowChange.column_types`` is read-only), so the cache is keyed by identity, holding the dict alive."""

    __slots__ = ("cache",)

    def __init__(self) -> None:
        self.cache: dict[int, tuple[dict, Optional[list[str]]]] = {}

    def of(self, column_types: dict[str, str]) -> Optional[list[str]]:
        hit = self.cache.get(id(column_types))
        if hit is not None and hit[0] is column_types:
            return hit[1]
        names = named_enums(column_types)
        self.cache[id(column_types)] = (column_types, names)
        return names


_ABSENT = object()


def old_image(event: RowChange) -> Optional[dict]:
    """The ``before`` the merge gets: an update's old image keeps only the columns the update changed.

    The merge reads an update's old image for one thing, its key columns, to tell a key change (see
    ``merge.changes.typed_changes``, which takes a key column the old image does not hold as unchanged).
    TiCDC sends whole old rows by default: carrying them through the event cache would cost as much as the new
    rows, for nothing."""
    before, after = event.before, event.after
    if event.op != UPDATE or before is None or after is None:
        return before
    return {name: value for name, value in before.items() if after.get(name, _ABSENT) != value}


class _MapColumn:
    """Builds a ``map<string,string>`` Arrow column from dicts without a Python tuple per entry (hot path)."""

    __slots__ = ("offsets", "keys", "values", "nulls")

    def __init__(self) -> None:
        self.offsets = [0]
        self.keys: list = []
        self.values: list = []
        self.nulls: list = []

    def add(self, mapping: Optional[dict]) -> None:
        if mapping is None:
            self.nulls.append(True)
        else:
            self.nulls.append(False)
            self.keys.extend(mapping)
            self.values.extend(mapping.values())
        self.offsets.append(len(self.keys))

    def array(self) -> pa.Array:
        return pa.MapArray.from_arrays(
            pa.array(self.offsets, pa.int32()), pa.array(self.keys, pa.string()), pa.array(self.values, pa.string()),
            mask=pa.array(self.nulls, pa.bool_()),
        )


def events_to_batch(events: Iterable[Event]) -> pa.RecordBatch:
    """Events as one record batch, built column by column: decoding in executors spends its time here.

    Row events take the hot path (one append per field, maps without per-entry tuples). DDL, resolved and
    failure events are rare but present in almost every batch (TiCDC sends a resolved event per partition every
    second), so they go through ``event_to_row`` one by one into the same columns, and the fields only they use
    are kept sparse."""
    after, before = _MapColumn(), _MapColumn()
    kind, topic, partition, offset, seq, commit_ts, schema_name, table_name, op = ([] for _ in range(9))
    enums, versions = [], []
    enum_names = _NamedEnums()
    rare: dict[str, dict[int, object]] = {}
    index = 0
    for e in events:
        pos = e.position
        topic.append(pos.topic)
        partition.append(pos.partition)
        offset.append(pos.offset)
        seq.append(pos.seq)
        if type(e) is RowChange:
            kind.append(KIND_ROW)
            commit_ts.append(e.commit_ts)
            schema_name.append(e.schema)
            table_name.append(e.table)
            op.append(e.op)
            after.add(e.after)
            before.add(old_image(e))
            enums.append(enum_names.of(e.column_types))
            versions.append(e.schema_version)
            if e.ts_made_up:  # rare (see RowChange.ts_made_up): kept sparse
                rare.setdefault("ts_made_up", {})[index] = True
        else:
            row = event_to_row(e)
            kind.append(row["kind"])
            commit_ts.append(row["commit_ts"])
            schema_name.append(row["schema_name"])
            table_name.append(row["table_name"])
            op.append(None)
            after.add(None)
            before.add(None)
            enums.append(None)
            versions.append(row["schema_version"])
            for name in _RARE_FIELDS:
                if row[name] is not None:
                    rare.setdefault(name, {})[index] = row[name]
        index += 1
    arrays = {
        "kind": pa.array(kind, pa.string()),
        "topic": pa.array(topic, pa.string()),
        "partition": pa.array(partition, pa.int32()),
        "offset": pa.array(offset, pa.int64()),
        "seq": pa.array(seq, pa.int32()),
        "commit_ts": pa.array(commit_ts, pa.int64()),
        "schema_name": pa.array(schema_name, pa.string()),
        "table_name": pa.array(table_name, pa.string()),
        "op": pa.array(op, pa.string()),
        "after": after.array(),
        "before": before.array(),
        "named_enums": pa.array(enums, pa.list_(pa.string())),
        "schema_version": pa.array(versions, pa.int64()),
    }
    for name, values in rare.items():
        arrays[name] = pa.array([values.get(i) for i in range(index)], EVENT_ARROW_SCHEMA.field(name).type)
    return pa.RecordBatch.from_arrays(
        [arrays[name] if name in arrays else pa.nulls(index, EVENT_ARROW_SCHEMA.field(name).type) for name in _FIELDS],
        schema=EVENT_ARROW_SCHEMA,
    )
