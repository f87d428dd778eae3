"""TiCDC Simple protocol encoders (JSON and Avro): model events -> Kafka (key, value) bytes as TiCDC writes them.

The wire forms follow tiflow ``pkg/sink/codec/simple`` (``message.go``, ``avro.go``): the Kafka key is nil, JSON
field order is Go's struct order with its ``omitempty`` rules, ``data``/``old`` maps are sorted by column name (Go
marshals maps that way) and Go's HTML-safe escaping of ``<``, ``>``, ``&`` is applied. Avro messages are the
``com.pingcap.simple.avro.Message`` branch of the official schema, schemaless.

Rows are encoded from their canonical values and ``column_types``: a row must carry a descriptor for every column
(the Simple wire form depends on the type: TIMESTAMP objects, unsigned BIGINT records, float vs double, ...).
``schema_version`` and ``table_id`` of a row become ``schemaVersion`` and ``tableID``.
"""

from __future__ import annotations

import base64
import io
import math
import time
from decimal import Decimal
from typing import Any, Callable, Iterable, Optional, Union

import orjson

from ticdc_lakehouse.decode.common.type_text import UINT64_MASK, base_type, is_binary_descriptor
from ticdc_lakehouse.decode.simple import SCHEMA_FILE
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, DDLEvent, ResolvedEvent, RowChange, TableSchema

SIMPLE_VERSION = 1
NS = "com.pingcap.simple.avro."

#: normalized DDL type -> Simple DDL type name (tiflow ``getDDLType``)
SIMPLE_DDL_TYPES: dict[str, str] = {
    "CREATE_TABLE": "CREATE",
    "DROP_TABLE": "ERASE",
    "TRUNCATE_TABLE": "TRUNCATE",
    "RENAME_TABLE": "RENAME",
    "RENAME_TABLES": "RENAME",
    "ADD_INDEX": "CINDEX",
    "DROP_INDEX": "DINDEX",
    "ADD_COLUMN": "ALTER",
    "DROP_COLUMN": "ALTER",
    "MODIFY_COLUMN": "ALTER",
    "SET_DEFAULT": "ALTER",
    "RENAME_COLUMN": "ALTER",
}
_DML_TYPES = {INSERT: "INSERT", UPDATE: "UPDATE", DELETE: "DELETE"}

_TEXT_TYPES = frozenset({"char", "varchar", "text", "tinytext", "mediumtext", "longtext", "enum", "set"})
_NUMERIC_TYPES = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "bigint", "float", "double", "bit", "year", "decimal"}
)
_LONG_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit", "enum", "set"})

Event = Union[RowChange, DDLEvent, ResolvedEvent]
KafkaRecord = tuple[Optional[bytes], bytes]


class _SimpleEncoder:
    def __init__(self, time_zone: str = "UTC", clock: Optional[Callable[[], int]] = None) -> None:
        """``time_zone`` is the changefeed's (sent with TIMESTAMP values); ``clock`` gives ``buildTs`` in ms."""
        self.time_zone = time_zone
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)

    def encode(self, event: Event) -> KafkaRecord:
        """One event -> (key, value). BOOTSTRAP is a ``DDLEvent`` with ``is_bootstrap`` and a ``table_schema``."""
        if isinstance(event, RowChange):
            return None, self.encode_row(event)
        if isinstance(event, ResolvedEvent):
            return None, self.encode_watermark(event.ts)
        if isinstance(event, DDLEvent):
            if event.is_bootstrap:
                if event.table_schema is None:
                    raise ValueError("a BOOTSTRAP event needs its table_schema")
                return None, self.encode_bootstrap(event.table_schema)
            return None, self.encode_ddl(event)
        raise TypeError(f"cannot encode {type(event).__name__} with the Simple protocol")

    def encode_row(self, row: RowChange) -> bytes:
        raise NotImplementedError

    def encode_ddl(self, ddl: DDLEvent) -> bytes:
        raise NotImplementedError

    def encode_bootstrap(self, table: TableSchema) -> bytes:
        raise NotImplementedError

    def encode_watermark(self, ts: int) -> bytes:
        raise NotImplementedError


class SimpleJsonEncoder(_SimpleEncoder):
    """``simple`` with ``encoding-format = "json"``."""

    def encode_row(self, row: RowChange) -> bytes:
        msg: dict[str, Any] = {"version": SIMPLE_VERSION, "database": row.schema, "table": row.table}
        if row.table_id:
            msg["tableID"] = row.table_id
        msg["type"] = _DML_TYPES[row.op]
        msg["commitTs"] = row.commit_ts
        msg["buildTs"] = self._clock()
        if row.schema_version:
            msg["schemaVersion"] = row.schema_version
        after, before = _dml_images(row)
        if after:
            msg["data"] = self._json_row(after, row.column_types)
        if before:
            msg["old"] = self._json_row(before, row.column_types)
        return _go_json(msg)

    def encode_ddl(self, ddl: DDLEvent) -> bytes:
        msg: dict[str, Any] = {
            "version": SIMPLE_VERSION,
            "type": SIMPLE_DDL_TYPES.get(ddl.ddl_type, "QUERY"),
            "sql": ddl.query,
            "commitTs": ddl.commit_ts,
            "buildTs": self._clock(),
        }
        if not ddl.query:
            del msg["sql"]
        if ddl.table_schema is not None:
            msg["tableSchema"] = _json_table_schema(ddl.table_schema)
        if ddl.pre_table_schema is not None:
            msg["preTableSchema"] = _json_table_schema(ddl.pre_table_schema)
        return _go_json(msg)

    def encode_bootstrap(self, table: TableSchema) -> bytes:
        msg = {
            "version": SIMPLE_VERSION,
            "type": "BOOTSTRAP",
            "commitTs": 0,
            "buildTs": self._clock(),
            "tableSchema": _json_table_schema(table),
        }
        return _go_json(msg)

    def encode_watermark(self, ts: int) -> bytes:
        return _go_json({"version": SIMPLE_VERSION, "type": "WATERMARK", "commitTs": ts, "buildTs": self._clock()})

    def _json_row(self, values: dict[str, Optional[str]], types: dict[str, str]) -> dict[str, Any]:
        return _wire_row(sorted(values), values, types, self._json_value)

    def _json_value(self, value: str, descriptor: str, kind: str) -> Any:
        if kind == "timestamp":
            return {"location": self.time_zone, "value": value}
        if kind in ("float", "double"):
            return go_float_text(value)
        if kind in ("enum", "set") and "(" in descriptor:
            return str(_member_number(descriptor, value))
        return value


class SimpleAvroEncoder(_SimpleEncoder):
    """``simple`` with ``encoding-format = "avro"``."""

    def __init__(self, time_zone: str = "UTC", clock: Optional[Callable[[], int]] = None) -> None:
        super().__init__(time_zone, clock)
        self._parsed: Any = None

    def _write(self, record_type: str, payload_type: str, payload: dict[str, Any]) -> bytes:
        import fastavro

        if self._parsed is None:
            self._parsed = fastavro.parse_schema(orjson.loads(SCHEMA_FILE.read_bytes()))
        out = io.BytesIO()
        message = {"type": record_type, "payload": (NS + payload_type, payload)}
        fastavro.schemaless_writer(out, self._parsed, (NS + "Message", message))
        return out.getvalue()

    def encode_row(self, row: RowChange) -> bytes:
        after, before = _dml_images(row)
        payload = {
            "version": SIMPLE_VERSION,
            "database": row.schema,
            "table": row.table,
            "tableID": row.table_id or 0,
            "type": _DML_TYPES[row.op],
            "commitTs": row.commit_ts,
            "buildTs": self._clock(),
            "schemaVersion": row.schema_version or 0,
            "claimCheckLocation": None,
            "handleKeyOnly": None,
            "checksum": None,
            "data": self._avro_row(after, row.column_types) if after else None,
            "old": self._avro_row(before, row.column_types) if before else None,
        }
        return self._write("DML", "DML", payload)

    def encode_ddl(self, ddl: DDLEvent) -> bytes:
        payload = {
            "version": SIMPLE_VERSION,
            "type": SIMPLE_DDL_TYPES.get(ddl.ddl_type, "QUERY"),
            "sql": ddl.query,
            "commitTs": ddl.commit_ts,
            "buildTs": self._clock(),
            "tableSchema": _avro_table_schema(ddl.table_schema) if ddl.table_schema is not None else None,
            "preTableSchema": (
                _avro_table_schema(ddl.pre_table_schema) if ddl.pre_table_schema is not None else None
            ),
        }
        return self._write("DDL", "DDL", payload)

    def encode_bootstrap(self, table: TableSchema) -> bytes:
        payload = {"version": SIMPLE_VERSION, "buildTs": self._clock(), "tableSchema": _avro_table_schema(table)}
        return self._write("BOOTSTRAP", "Bootstrap", payload)

    def encode_watermark(self, ts: int) -> bytes:
        payload = {"version": SIMPLE_VERSION, "commitTs": ts, "buildTs": self._clock()}
        return self._write("WATERMARK", "Watermark", payload)

    def _avro_row(self, values: dict[str, Optional[str]], types: dict[str, str]) -> dict[str, Any]:
        return _wire_row(values, values, types, self._avro_value)

    def _avro_value(self, value: str, descriptor: str, kind: str) -> tuple[str, Any]:
        if kind == "timestamp":
            return (NS + "Timestamp", {"location": self.time_zone, "value": value})
        if kind == "bigint" and descriptor.endswith("unsigned"):
            return (NS + "UnsignedBigint", {"value": _as_int64(int(value))})
        if kind in ("enum", "set") and "(" in descriptor:
            return ("long", _as_int64(_member_number(descriptor, value)))
        if kind in _LONG_TYPES:
            return ("long", _as_int64(int(value)))
        if kind == "float":
            return ("float", float(value))
        if kind == "double":
            return ("double", float(value))
        if is_binary_descriptor(descriptor):
            return ("bytes", base64.b64decode(value))
        return ("string", value)


# --- helpers ----------------------------------------------------------------------------------------------------


def _dml_images(row: RowChange) -> tuple[Optional[dict[str, Optional[str]]], Optional[dict[str, Optional[str]]]]:
    """(data, old) as Simple sends them: INSERT data only, DELETE old only, UPDATE both."""
    if row.op == INSERT:
        return row.after, None
    if row.op == DELETE:
        return None, row.before
    return row.after, row.before


def _wire_row(names: Iterable[str], values: dict[str, Optional[str]], types: dict[str, str],
              wire_value: Callable[[str, str, str], Any]) -> dict[str, Any]:
    """One row image on the wire: NULL stays None, any other value is ``wire_value(value, descriptor, kind)``."""
    out: dict[str, Any] = {}
    for name in names:
        value = values[name]
        if value is None:
            out[name] = None
            continue
        descriptor = _descriptor(types, name)
        out[name] = wire_value(value, descriptor, base_type(descriptor))
    return out


def _descriptor(types: dict[str, str], name: str) -> str:
    try:
        return types[name]
    except KeyError:
        raise ValueError(f"column {name!r} has no type descriptor; Simple needs one to pick the wire form") from None


def go_float_text(canonical: str) -> str:
    """Go ``strconv.FormatFloat(v, 'f', -1, ...)`` of a canonical float: never an exponent, no trailing ``.0``."""
    value = float(canonical)
    if not math.isfinite(value):
        return canonical
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _as_int64(value: int) -> int:
    """uint64 values above 2^63-1 travel as the same bits in a signed long (goavro ``int64(uint64)``)."""
    value &= UINT64_MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def parse_members(descriptor: str) -> list[str]:
    """``enum('a','b''c')`` -> ``['a', "b'c"]``."""
    inner = descriptor[descriptor.index("(") + 1 : descriptor.rindex(")")]
    members: list[str] = []
    i = 0
    while i < len(inner):
        if inner[i] != "'":
            i += 1
            continue
        i += 1
        chars: list[str] = []
        while i < len(inner):
            if inner[i] == "'":
                if inner[i + 1 : i + 2] == "'":
                    chars.append("'")
                    i += 2
                    continue
                break
            chars.append(inner[i])
            i += 1
        members.append("".join(chars))
        i += 1
    return members


def _member_number(descriptor: str, value: str) -> int:
    """ENUM name -> 1-based index; SET names -> bitmask (descriptor with members, value with names)."""
    members = parse_members(descriptor)
    if descriptor.startswith("enum"):
        return members.index(value) + 1 if value else 0
    mask = 0
    for name in filter(None, value.split(",")):
        mask |= 1 << members.index(name)
    return mask


def _data_type(descriptor: str) -> dict[str, Any]:
    """The Simple ``dataType`` parts of a descriptor (lengths other than DECIMAL's are unknown, sent as 0)."""
    kind = base_type(descriptor)
    result: dict[str, Any] = {"mysqlType": kind}
    text = kind in _TEXT_TYPES
    result["charset"] = "utf8mb4" if text else "binary"
    result["collate"] = "utf8mb4_bin" if text else "binary"
    result["length"] = 0
    result["decimal"] = None
    result["elements"] = None
    result["unsigned"] = None
    result["zerofill"] = None
    if kind == "decimal" and "(" in descriptor:
        precision, scale = descriptor[descriptor.index("(") + 1 : descriptor.index(")")].split(",")
        result["length"] = int(precision)
        result["decimal"] = int(scale)
    elif kind in ("enum", "set") and "(" in descriptor:
        result["elements"] = parse_members(descriptor)
    if kind in _NUMERIC_TYPES:
        result["unsigned"] = descriptor.endswith(" unsigned")
        result["zerofill"] = False
    return result


def _indexes(table: TableSchema) -> list[dict[str, Any]]:
    if not table.primary_key:
        return []
    return [{"name": "primary", "unique": True, "primary": True, "nullable": False, "columns": list(table.primary_key)}]


def _json_table_schema(table: TableSchema) -> dict[str, Any]:
    columns = []
    for column in table.columns:
        parts = _data_type(column.mysql_type)
        data_type: dict[str, Any] = {
            "mysqlType": parts["mysqlType"],
            "charset": parts["charset"],
            "collate": parts["collate"],
        }
        for key in ("length", "decimal", "elements", "unsigned", "zerofill"):  # Go omitempty
            if parts[key]:
                data_type[key] = parts[key]
        columns.append(
            {"name": column.name, "dataType": data_type, "nullable": column.nullable, "default": column.default}
        )
    return _table_schema(table, "schema", columns)


def _avro_table_schema(table: TableSchema) -> dict[str, Any]:
    columns = [
        {
            "name": column.name,
            "dataType": _data_type(column.mysql_type),
            "nullable": column.nullable,
            "default": column.default,
        }
        for column in table.columns
    ]
    return _table_schema(table, "database", columns)


def _table_schema(table: TableSchema, database_key: str, columns: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``tableSchema`` payload; its database field is ``schema`` in JSON and ``database`` in Avro."""
    return {
        database_key: table.schema,
        "table": table.table,
        "tableID": 0,
        "version": table.version or 0,
        "columns": columns,
        "indexes": _indexes(table),
    }


_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
               ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def _go_json(msg: dict[str, Any]) -> bytes:
    """``json.Marshal`` output: compact, HTML-safe escapes (these bytes only ever occur inside JSON strings)."""
    data = orjson.dumps(msg)
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data
