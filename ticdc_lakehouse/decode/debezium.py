"""TiCDC Debezium (JSON) decoder (``debezium``).

TiCDC writes Debezium-MySQL-shaped change events (``pkg/sink/codec/debezium``): ``payload.op`` ``c``/``u``/``d``
rows with ``before``/``after``; ``op: "m"`` checkpoints (resolved ts, new ticdc architecture); DDL messages with
``ddl`` and ``tableChanges`` (no ``op``). TiCDC adds ``source.commit_ts`` (the TSO) and, with
``enable-tidb-extension``, a ``tidb_type`` per column in the value schema. A message without ``source.commit_ts``
(plain Debezium) gets ``source.ts_ms << 18`` (a TSO with a zero logical part).

Debezium encodes values by Kafka Connect type, so decoding needs the column types:

1. the value ``schema`` sent with the message (``debezium-disable-schema=false``): ``tidb_type`` when present,
   else the Connect type and semantic name (``io.debezium.time.Date``, ``...MicroTimestamp``, ``...Bits``, ...);
2. otherwise the columns of the last DDL seen for the table (``tableChanges``);
3. otherwise nothing: values are emitted as their JSON text with empty ``column_types`` (the merge engine types
   them from the table) -- temporal and BIT values then stay in Debezium's numeric encodings, so keep the schema
   on, or let a DDL reach the decoder first.

Canonical forms produced: DATE from epoch days; DATETIME from epoch ms/µs (UTC, fraction without trailing zeros);
TIMESTAMP from the ``ZonedTimestamp`` text, in UTC; TIME from µs; BIT(1) booleans and little-endian ``Bits`` bytes
to the integer; DECIMAL (sent as a JSON double by TiCDC) to plain decimal text; BIGINT UNSIGNED above 2^63-1,
which TiCDC wraps to a negative int64, back to the unsigned value (only when the type says unsigned: plain
Debezium schemas do not, see ``col_bigint_unsigned`` in the golden file). ENUM/SET are member names (an invalid
value is ``""``), with ``enum('a',...)`` descriptors from ``allowed``.

A Kafka tombstone (nil value, written by Debezium after a delete) carries no change and decodes to no event.
"""

from __future__ import annotations

import base64
import binascii
from datetime import date, datetime, timedelta, timezone
from typing import Any, Optional

import orjson

from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.decode.common.converters import Converter, scalar_text, unsigned_or
from ticdc_lakehouse.decode.common.ddl_kind import classify_query, schema_of_schema_ddl
from ticdc_lakehouse.decode.common.json_object import json_object
from ticdc_lakehouse.decode.common.type_text import (
    UINT64_MASK,
    base_type,
    build_descriptor,
    decimal_text_from_float,
    is_binary_descriptor,
    normalize_descriptor,
    quote_elements,
    split_escaped_members,
)
from ticdc_lakehouse.core import model
from ticdc_lakehouse.core.model import DecodeError
from ticdc_lakehouse.core.values import from_decimal

ROW_OPS = {"c": model.INSERT, "r": model.INSERT, "u": model.UPDATE, "d": model.DELETE}
PHYSICAL_SHIFT = 18
EPOCH = datetime(1970, 1, 1)
EPOCH_DATE = date(1970, 1, 1)

Plan = dict[str, tuple[str, Converter]]  # column -> (descriptor, converter)

_TIME_NAMES = {
    "io.debezium.time.Date": "date",
    "io.debezium.time.Timestamp": "datetime",
    "io.debezium.time.MicroTimestamp": "datetime",
    "io.debezium.time.NanoTimestamp": "datetime",
    "io.debezium.time.ZonedTimestamp": "timestamp",
    "io.debezium.time.Time": "time",
    "io.debezium.time.MicroTime": "time",
    "io.debezium.time.NanoTime": "time",
    "io.debezium.time.Year": "year",
    "io.debezium.data.Bits": "bit",
    "io.debezium.data.Json": "json",
    "io.debezium.data.TiDBVectorFloat32": "text",
    "org.apache.kafka.connect.data.Decimal": "decimal",
}
_CONNECT_TYPES = {
    "boolean": "bit",
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "float32": "float",
    "double": "double",
    "float64": "double",
    "string": "varchar",
    "bytes": "varbinary",
}


class DebeziumDecoder:
    name = "debezium"

    def __init__(self, options: Optional[DecoderOptions] = None) -> None:
        self.options = options or DecoderOptions()
        self._ddl_plans: dict[tuple[str, str], Plan] = {}

    def decode(self, message: model.Message) -> list[model.Event]:
        if not message.value:
            return []  # Kafka tombstone: no change (the preceding 'd' event carried the delete)
        value = json_object(message.value, "debezium", "value")
        payload = value.get("payload")
        if not isinstance(payload, dict):
            raise DecodeError(f"{self.name}: value has no 'payload' object")
        position = message.position()
        try:
            op = payload.get("op")
            if op is None:
                if "ddl" in payload:
                    return [self._ddl(payload, position)]
                raise DecodeError(f"{self.name}: payload has neither 'op' nor 'ddl'")
            if op == "m":
                return [model.ResolvedEvent(ts=_commit_ts(payload), position=position)]
            row_op = ROW_OPS.get(op)
            if row_op is None:
                raise DecodeError(f"{self.name}: unknown op {op!r}")
            return [self._row(row_op, payload, value.get("schema"), message, position)]
        except DecodeError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
            raise DecodeError(f"{self.name}: malformed message: {type(exc).__name__}: {exc}") from exc

    # --- rows ------------------------------------------------------------------------------------------------
    def _row(
        self, op: str, payload: dict[str, Any], schema: Any, message: model.Message, position: model.Position
    ) -> model.RowChange:
        source = payload["source"]
        db, table = source["db"], source["table"]
        if not isinstance(db, str) or not isinstance(table, str):
            raise DecodeError(f"{self.name}: source without db/table")
        raw_after, raw_before = payload.get("after"), payload.get("before")
        if op == model.DELETE:
            if not isinstance(raw_before, dict):
                raise DecodeError(f"{self.name}: delete without 'before'")
            raw_after = None
        elif not isinstance(raw_after, dict):
            raise DecodeError(f"{self.name}: {op} without 'after'")
        if raw_before is not None and not isinstance(raw_before, dict):
            raise DecodeError(f"{self.name}: 'before' is not an object")
        if op == model.INSERT:
            raw_before = None
        plan = _plan_from_schema(schema)
        if plan is None:
            plan = self._ddl_plans.get((db, table))
            images = [image for image in (raw_after, raw_before) if image is not None]
            if plan is not None and any(name not in plan for image in images for name in image):
                plan = None  # the last DDL seen does not describe this row: leave typing to the merge engine
        column_types: dict[str, str] = {}
        after = _convert(raw_after, plan, column_types) if raw_after is not None else None
        before = _convert(raw_before, plan, column_types) if raw_before is not None else None
        if plan is None:
            column_types = {}
        key_columns: tuple[str, ...] = ()
        if message.key:
            key = json_object(message.key, "debezium", "key")
            key_payload = key.get("payload")
            if isinstance(key_payload, dict):
                key_columns = tuple(key_payload)
        # positional: measurably faster than keywords for this slotted dataclass; without source.commit_ts the ts
        # is ts_ms (milliseconds, not one transaction's TSO): made up
        return model.RowChange(db, table, _commit_ts(payload), op, after, before, key_columns, column_types, position,
                         None, None, payload["source"].get("commit_ts") is None)

    # --- DDL -------------------------------------------------------------------------------------------------
    def _ddl(self, payload: dict[str, Any], position: model.Position) -> model.DDLEvent:
        query = payload.get("ddl") or ""
        if not isinstance(query, str):
            raise DecodeError(f"{self.name}: 'ddl' is not a string")
        source = payload.get("source") or {}
        schema = source.get("db") or payload.get("databaseName") or schema_of_schema_ddl(query) or ""
        table = source.get("table") or ""
        changes = payload.get("tableChanges") or []
        hint = None
        table_schema = None
        if changes:
            change = changes[0]
            hint = {"CREATE": "CREATE", "DROP": "ERASE"}.get(change.get("type"))
            if isinstance(change.get("table"), dict):
                table_schema, plan = _table_from_change(schema, table, change["table"])
                self._ddl_plans[(schema, table)] = plan
        kind = classify_query(query, hint=hint if table else None)
        if kind in ("DROP_TABLE", "DROP_SCHEMA"):
            for key in [k for k in self._ddl_plans if k[0] == schema and (kind == "DROP_SCHEMA" or k[1] == table)]:
                del self._ddl_plans[key]
        return model.DDLEvent(
            schema=schema,
            table=table,
            commit_ts=_commit_ts(payload),
            query=query,
            ddl_type=kind,
            position=position,
            table_schema=table_schema,
        )


# --- message parts ----------------------------------------------------------------------------------------------


def _commit_ts(payload: dict[str, Any]) -> int:
    source = payload.get("source")
    if not isinstance(source, dict):
        raise DecodeError("debezium: payload has no 'source'")
    ts = source.get("commit_ts")
    if ts is None:
        ts_ms = source.get("ts_ms")
        if type(ts_ms) is not int or ts_ms < 0:
            raise DecodeError("debezium: source has neither commit_ts nor ts_ms")
        return ts_ms << PHYSICAL_SHIFT
    if type(ts) is not int or ts < 0:
        raise DecodeError(f"debezium: source.commit_ts must be a non-negative integer, got {ts!r}")
    return ts


def _convert(raw: dict[str, Any], plan: Optional[Plan], column_types: dict[str, str]) -> dict[str, Optional[str]]:
    out: dict[str, Optional[str]] = {}
    for name, value in raw.items():
        entry = plan.get(name) if plan is not None else None
        if entry is None:
            out[name] = None if value is None else _generic(value)
            continue
        descriptor, converter = entry
        column_types[name] = descriptor
        out[name] = None if value is None else converter(value)
    if plan is not None and len(column_types) < len(out):
        missing = [name for name in out if name not in column_types]
        raise DecodeError(f"debezium: columns {missing} are not in the schema")
    return out


def _plan_from_schema(schema: Any) -> Optional[Plan]:
    """Column plans from the value schema's ``after`` (or ``before``) struct, if the message has a schema."""
    if not isinstance(schema, dict):
        return None
    for field in schema.get("fields") or ():
        if isinstance(field, dict) and field.get("field") in ("after", "before") and field.get("fields"):
            return {spec["field"]: _spec_plan(spec) for spec in field["fields"]}
    return None


def _spec_plan(spec: dict[str, Any]) -> tuple[str, Converter]:
    """(descriptor, converter) of one Kafka Connect field schema."""
    connect_type = spec.get("type")
    semantic = spec.get("name")
    parameters = spec.get("parameters") or {}
    tidb_type = spec.get("tidb_type")
    if semantic in ("io.debezium.data.Enum", "io.debezium.data.EnumSet"):
        kind = "enum" if semantic.endswith("Enum") else "set"
        members = split_escaped_members(parameters.get("allowed", ""))
        return f"{kind}({quote_elements(members)})", _text
    if isinstance(tidb_type, str) and tidb_type:
        descriptor = normalize_descriptor(tidb_type)
    elif semantic in _TIME_NAMES:
        descriptor = _TIME_NAMES[semantic]
    else:
        descriptor = _CONNECT_TYPES.get(connect_type, "varchar")
    if descriptor == "bit" and str(parameters.get("length", "")).isdigit():  # Bits carries the BIT width
        descriptor = build_descriptor("bit", length=int(parameters["length"]))
    if semantic == "org.apache.kafka.connect.data.Decimal":
        scale = int(parameters.get("scale", 0))
        precision = parameters.get("connect.decimal.precision")
        descriptor = build_descriptor("decimal", length=int(precision) if precision else None, scale=scale)
        return descriptor, _connect_decimal(scale)
    return descriptor, _converter(descriptor, semantic, connect_type)


def _converter(descriptor: str, semantic: Optional[str], connect_type: Any, fsp: Optional[int] = None) -> Converter:
    kind = base_type(descriptor)
    if kind == "date":
        return _date
    if kind == "datetime":
        if semantic == "io.debezium.time.MicroTimestamp" or (semantic is None and fsp is not None and fsp > 3):
            return _epoch_micros
        if semantic == "io.debezium.time.NanoTimestamp":
            return _epoch_nanos
        return _epoch_millis
    if kind == "timestamp":
        return _zoned_timestamp
    if kind == "time":
        if semantic == "io.debezium.time.Time":
            return _time_millis
        if semantic == "io.debezium.time.NanoTime":
            return _time_nanos
        return _time_micros
    if kind == "bit":
        return _bits
    if kind == "decimal":
        return _decimal
    if kind in ("float", "double"):
        return _float
    if kind == "bigint" and descriptor.endswith("unsigned"):
        return _unsigned
    if is_binary_descriptor(descriptor) or connect_type == "bytes":
        return _text  # already base64, the canonical form
    return _generic


def _table_from_change(schema: str, table: str, raw: dict[str, Any]) -> tuple[model.TableSchema, Plan]:
    """A ``TableSchema`` and row plan from a ``tableChanges[].table`` object (for schema-less rows)."""
    columns: list[model.ColumnSchema] = []
    plan: Plan = {}
    for raw_column in raw.get("columns") or ():
        name = raw_column["name"]
        type_name = str(raw_column.get("typeName") or "varchar")
        base = normalize_descriptor(type_name, keep_elements=False)
        enum_values = raw_column.get("enumValues")
        if base in ("enum", "set") and enum_values:
            members = [v[1:-1].replace("''", "'") if len(v) >= 2 and v[0] == v[-1] == "'" else v for v in enum_values]
            descriptor = f"{base}({quote_elements(members)})"
        elif base == "decimal":
            descriptor = build_descriptor("decimal", length=raw_column.get("length"),
                                          scale=_int(raw_column.get("scale")))
        else:
            descriptor = base
        default = raw_column.get("defaultValueExpression")
        columns.append(
            model.ColumnSchema(
                name=name,
                mysql_type=descriptor,
                nullable=bool(raw_column.get("optional", True)),
                default=None if default is None else str(default),
                comment=raw_column.get("comment"),
            )
        )
        fsp = _int(raw_column.get("length")) if base_type(descriptor) == "datetime" else None
        converter = _text if base_type(descriptor) in ("enum", "set") else _converter(descriptor, None, None, fsp)
        plan[name] = (descriptor, converter)
    primary_key = tuple(raw.get("primaryKeyColumnNames") or ())
    return model.TableSchema(schema=schema, table=table, columns=tuple(columns), primary_key=primary_key), plan


def _int(value: Any) -> Optional[int]:
    if value is None:
        return None
    return int(value)


# --- value converters -------------------------------------------------------------------------------------------


def _generic(value: Any) -> str:
    if type(value) is str:
        return value
    text = scalar_text(value)
    return orjson.dumps(value).decode() if text is None else text


def _text(value: Any) -> str:
    return value if type(value) is str else _generic(value)


def _date(value: Any) -> str:
    if type(value) is not int:
        return _text(value)
    return (EPOCH_DATE + timedelta(days=value)).isoformat()


def _format_datetime(moment: datetime) -> str:
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text


def _epoch_micros(value: Any) -> str:
    if type(value) is not int:
        return _text(value)
    return _format_datetime(EPOCH + timedelta(microseconds=value))


def _epoch_millis(value: Any) -> str:
    if type(value) is not int:
        return _text(value)
    return _format_datetime(EPOCH + timedelta(milliseconds=value))


def _epoch_nanos(value: Any) -> str:
    if type(value) is not int:
        return _text(value)
    return _format_datetime(EPOCH + timedelta(microseconds=value // 1000))


def _zoned_timestamp(value: Any) -> str:
    """``2023-11-30T12:34:56.12346Z`` -> ``2023-11-30 12:34:56.12346`` (UTC)."""
    if type(value) is not str:
        return _generic(value)
    if value.endswith("Z"):
        return value[:-1].replace("T", " ", 1)
    moment = datetime.fromisoformat(value).astimezone(timezone.utc).replace(tzinfo=None)
    return _format_datetime(moment)


def _duration(micros: int) -> str:
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    text = f"{sign}{hours:02d}:{minute:02d}:{second:02d}"
    if fraction:
        text += f".{fraction:06d}".rstrip("0")
    return text


def _time_micros(value: Any) -> str:
    return _duration(value) if type(value) is int else _text(value)


def _time_millis(value: Any) -> str:
    return _duration(value * 1000) if type(value) is int else _text(value)


def _time_nanos(value: Any) -> str:
    return _duration(value // 1000) if type(value) is int else _text(value)


def _bits(value: Any) -> str:
    """BIT(1) is a boolean; BIT(n>1) is ``io.debezium.data.Bits``: base64 of little-endian bytes."""
    if value is True or value is False:
        return "1" if value else "0"
    if type(value) is str:
        try:
            return str(int.from_bytes(base64.b64decode(value, validate=True), "little"))
        except (binascii.Error, ValueError):
            raise DecodeError(f"debezium: invalid Bits value {value!r}") from None
    if type(value) is int:
        return str(value & UINT64_MASK)
    return _generic(value)


def _decimal(value: Any) -> str:
    """TiCDC sends DECIMAL as a JSON double (precision already lost upstream); strings are exact."""
    if type(value) is float:
        return decimal_text_from_float(value)
    if type(value) is str:
        return from_decimal(value)
    return _generic(value)


def _connect_decimal(scale: int) -> Converter:
    def convert(value: Any) -> str:
        if type(value) is str:
            try:
                unscaled = int.from_bytes(base64.b64decode(value, validate=True), "big", signed=True)
            except (binascii.Error, ValueError):
                raise DecodeError(f"debezium: invalid Decimal bytes {value!r}") from None
            return from_decimal(f"{unscaled}E-{scale}")
        return _decimal(value)

    return convert


def _float(value: Any) -> str:
    if type(value) in (float, int):
        return repr(float(value))
    return _generic(value)


#: BIGINT UNSIGNED above 2^63-1 arrives wrapped to a negative int64 (max uint64 is -1)
_unsigned = unsigned_or(_generic)
