"""TiCDC Simple protocol decoders: ``simple-json`` and ``simple-avro``.

One Kafka message holds one event: WATERMARK (resolved ts), BOOTSTRAP (a table schema, re-sent periodically),
a DDL (with the table schema after and before it) or a DML row. DML rows carry no types, only ``schemaVersion``;
the decoder caches every schema it sees keyed by (database, table, version) and types rows from that cache.

A row whose schema is not cached yet (a consumer that starts mid-stream, before the next BOOTSTRAP) is **not**
held back or dropped: it is emitted with empty ``column_types``/``key_columns`` and its ``schema_version`` set, so
the merge engine can type it from the table (see ``row_column_types`` for the descriptors to use). Its values are
still canonical strings except ENUM/SET, which Simple always sends as index/bitmask (bare ``enum``/``set``).

Value forms on the wire (tiflow ``pkg/sink/codec/simple``):

* JSON: every value is a string (binary types base64, BIT an integer, ENUM/SET index/bitmask, FLOAT/DOUBLE Go
  ``'f'`` format) except TIMESTAMP, an object ``{"location", "value"}``.
* Avro: a union of null, long, float, double, string, bytes, ``Timestamp`` and ``UnsignedBigint`` (the uint64
  bits stored in a long).

``handleKeyOnly`` messages need the upstream TiDB to be completed, which the lakehouse does not query: they are
decode errors (dead-letter), never partial rows. ``claimCheckLocation`` rows are read from the changefeed's
claim-check storage, and values compressed with ``large-message-handle-compression`` are decompressed first
(``large_messages``), as TiCDC's consumer does.

Speed (JSON): DML rows are the bulk of a topic, and reading them from an orjson dict costs a dozen ``dict.get``
calls and type checks per row. ``SimpleJsonDecoder`` first reads a message with a typed msgspec decoder
(``_DmlMessage``: every member and its JSON type declared, nothing else allowed), which does those checks in C
while it parses. Whatever that decoder does not accept (WATERMARK, BOOTSTRAP, DDL, an unknown member, a value of
an unexpected JSON type, bad JSON, an integer beyond int64) is decoded by the reference path, the dict-based code
below, which also raises the precise errors; so the typed path only answers for messages it reads exactly as
the reference path does (``tests/test_decode_simple.py`` checks that with hypothesis).
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import msgspec
import orjson

from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.decode.common.converters import (
    Converter,
    canonical_row,
    double_or,
    float32_or,
    scalar_text,
    unsigned_or,
)
from ticdc_lakehouse.decode.common.ddl_kind import CREATE_TABLE, classify_query, schema_of_schema_ddl
from ticdc_lakehouse.decode.common.positions import make_position
from ticdc_lakehouse.decode.common.json_object import json_object
from ticdc_lakehouse.decode.common.type_text import (
    UINT64_MASK,
    base_type,
    build_descriptor,
    dml_column_types,
    float32_text,
    is_float32_exact,
)
from ticdc_lakehouse.decode.large_messages import LargeMessages
from ticdc_lakehouse.core import model
from ticdc_lakehouse.core.model import OPS_BY_NAME, DecodeError, RowChange, TableSchema
from ticdc_lakehouse.core.values import from_bytes

SCHEMA_FILE = Path(__file__).with_name("simple_message.avsc")

#: union branch index of ``com.pingcap.simple.avro.Message`` in the top-level union, zigzag-encoded
AVRO_MESSAGE_BRANCH_BYTE = 0x16

DDL_TYPES = frozenset({"CREATE", "RENAME", "CINDEX", "DINDEX", "ERASE", "TRUNCATE", "ALTER", "QUERY"})

#: how many table schemas one decoder remembers (BOOTSTRAP re-sends them, so forgetting old ones is safe)
MAX_CACHED_SCHEMAS = 4096



def row_column_types(table: TableSchema) -> dict[str, str]:
    """Descriptors for Simple rows of ``table``: its own, except ENUM/SET are bare (the wire value is the index)."""
    return dml_column_types(table)


@dataclass(frozen=True, slots=True)
class _CachedSchema:
    table: TableSchema
    types: dict[str, str]
    fixes: dict[str, Converter]  # per-column conversions that depend on the column type


class _SimpleDecoder:
    """The message-kind logic shared by the JSON and Avro variants; subclasses only parse bytes and values."""

    name = "simple"
    _schema_key = "schema"  # TableSchema's database field: "schema" in JSON, "database" in Avro

    def __init__(self, options: Optional[DecoderOptions] = None) -> None:
        self.options = options or DecoderOptions()
        self._schemas: dict[tuple[str, str, int], _CachedSchema] = {}
        self.large = LargeMessages(self.options.large_messages)

    # --- subclass hooks --------------------------------------------------------------------------------------
    def _parse(self, value: bytes) -> tuple[str, dict[str, Any]]:
        """Return (message kind, fields): kind is WATERMARK, BOOTSTRAP, DDL or DML."""
        raise NotImplementedError

    def _convert_row(self, raw: Any, fixes: Optional[dict[str, Converter]]) -> dict[str, Optional[str]]:
        raise NotImplementedError

    def _fixes_for(self, table: TableSchema) -> dict[str, Converter]:
        raise NotImplementedError

    # --- decoding --------------------------------------------------------------------------------------------
    def decode(self, message: model.Message) -> list[model.Event]:
        """TiCDC compresses the whole value with large-message-handle-compression: undone first."""
        if self.large.compressed and message.value:
            message = dataclasses.replace(message, value=self.large.decompress(message.value, f"{self.name} value"))
        return self._decode(message)

    def _decode(self, message: model.Message) -> list[model.Event]:
        value = message.value
        if not value:
            raise DecodeError(f"{self.name}: empty message value")
        kind, fields = self._parse(value)
        position = make_position(message.topic, message.partition, message.offset, 0)
        try:
            if kind == "DML":
                return [self._row(fields, position)]
            if kind == "WATERMARK":
                return [model.ResolvedEvent(ts=_uint64(fields["commitTs"], "commitTs"), position=position)]
            if kind == "BOOTSTRAP":
                return [self._bootstrap(fields, position)]
            return [self._ddl(fields, position)]
        except DecodeError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DecodeError(f"{self.name}: malformed {kind} message: {type(exc).__name__}: {exc}") from exc

    def _claim_checked(self, location: Any, position: model.Position) -> RowChange:
        """The row TiCDC moved to claim-check storage: the stored value is the whole (compressed) message."""
        what = f"{self.name} claim-check message"
        if type(location) is not str:
            raise DecodeError(f"{what}: claimCheckLocation is not a string")
        _, value = self.large.claim_check(location, what)
        value = self.large.decompress(value, f"{what}: stored value")
        inner = self._decode(model.Message(position.topic, position.partition, position.offset, None, value))
        if len(inner) != 1 or type(inner[0]) is not RowChange:
            raise DecodeError(f"{what}: the claim-check file at {location!r} does not hold one row")
        row = inner[0]
        row.position = position
        return row

    def _row(self, msg: dict[str, Any], position: model.Position) -> RowChange:
        get = msg.get
        location = get("claimCheckLocation")
        if location:
            return self._claim_checked(location, position)
        if get("handleKeyOnly"):
            raise DecodeError(
                f"{self.name}: handle-key-only message (only the key columns were sent because the row was too "
                "large); completing it needs the upstream TiDB, which the lakehouse does not query"
            )
        op = OPS_BY_NAME.get(get("type"))  # type: ignore[arg-type]
        if op is None:
            raise DecodeError(f"{self.name}: unknown DML type {get('type')!r}")
        schema, table = get("database"), get("table")
        if type(schema) is not str or type(table) is not str:
            raise DecodeError(f"{self.name}: DML without database/table names")
        version = get("schemaVersion") or 0
        commit_ts = get("commitTs")
        if type(version) is not int or version < 0 or type(commit_ts) is not int or commit_ts < 0:
            raise DecodeError(f"{self.name}: commitTs/schemaVersion must be non-negative integers")
        cached = self._schemas.get((schema, table, version))
        fixes = cached.fixes if cached is not None else None
        data, old = get("data"), get("old")
        after = self._convert_row(data, fixes) if data is not None else None
        before = self._convert_row(old, fixes) if old is not None else None
        if op == model.DELETE:
            if before is None:
                raise DecodeError(f"{self.name}: DELETE without 'old'")
            after = None
        elif after is None:
            raise DecodeError(f"{self.name}: {msg['type']} without 'data'")
        elif op == model.INSERT:
            before = None
        column_types, key_columns = _types_and_keys(cached, after, before)
        # positional: measurably faster than keywords for this slotted dataclass
        return RowChange(schema, table, commit_ts, op, after, before, key_columns, column_types, position,
                         get("tableID"), version)

    def _bootstrap(self, msg: dict[str, Any], position: model.Position) -> model.DDLEvent:
        table = self._table_schema(msg.get("tableSchema"))
        if table is None:
            raise DecodeError(f"{self.name}: BOOTSTRAP without tableSchema")
        return model.DDLEvent(
            schema=table.schema,
            table=table.table,
            commit_ts=_uint64(msg.get("commitTs") or 0, "commitTs"),
            query="",
            ddl_type=CREATE_TABLE,
            position=position,
            table_schema=table,
            is_bootstrap=True,
        )

    def _ddl(self, msg: dict[str, Any], position: model.Position) -> model.DDLEvent:
        ddl_type_name = msg.get("type")
        if ddl_type_name not in DDL_TYPES:
            raise DecodeError(f"{self.name}: unknown message type {ddl_type_name!r}")
        query = msg.get("sql") or ""
        if not isinstance(query, str):
            raise DecodeError(f"{self.name}: DDL 'sql' is not a string")
        table = self._table_schema(msg.get("tableSchema"))
        pre_table = self._table_schema(msg.get("preTableSchema"))
        reference = table or pre_table
        if reference is not None:
            schema, table_name = reference.schema, reference.table
        else:  # CREATE/DROP DATABASE carry no table schema
            schema, table_name = schema_of_schema_ddl(query) or "", ""
        return model.DDLEvent(
            schema=schema,
            table=table_name,
            commit_ts=_uint64(msg["commitTs"], "commitTs"),
            query=query,
            ddl_type=classify_query(query, hint=ddl_type_name),
            position=position,
            table_schema=table,
            pre_table_schema=pre_table,
        )

    # --- table schemas ---------------------------------------------------------------------------------------
    def _table_schema(self, raw: Any) -> Optional[TableSchema]:
        """Build (and cache) a ``TableSchema`` from a Simple ``TableSchema`` object."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise DecodeError(f"{self.name}: tableSchema is not an object")
        columns = tuple(_column_schema(column) for column in raw["columns"])
        version = _uint64(raw.get("version") or 0, "tableSchema.version")
        table = TableSchema(
            schema=raw[self._schema_key],
            table=raw["table"],
            columns=columns,
            primary_key=_primary_key(raw.get("indexes") or ()),
            version=version,
        )
        if not isinstance(table.schema, str) or not isinstance(table.table, str):
            raise DecodeError(f"{self.name}: tableSchema without database/table names")
        self._remember(table)
        return table

    def _remember(self, table: TableSchema) -> None:
        key = (table.schema, table.table, table.version or 0)
        if key in self._schemas:
            return
        if len(self._schemas) >= MAX_CACHED_SCHEMAS:
            del self._schemas[next(iter(self._schemas))]
        self._schemas[key] = _CachedSchema(table=table, types=row_column_types(table), fixes=self._fixes_for(table))

    def cached_schema(self, schema: str, table: str, version: int) -> Optional[TableSchema]:
        """The table schema this decoder has seen for (schema, table, version), if any."""
        cached = self._schemas.get((schema, table, version))
        return cached.table if cached else None


class SimpleJsonDecoder(_SimpleDecoder):
    """``simple-json``: one JSON document per message."""

    name = "simple-json"
    _schema_key = "schema"

    def _parse(self, value: bytes) -> tuple[str, dict[str, Any]]:
        msg = json_object(value, self.name, "message")
        if msg.get("data") is not None or msg.get("old") is not None:
            return "DML", msg
        kind = msg.get("type")
        if kind in ("WATERMARK", "BOOTSTRAP"):
            return kind, msg
        if kind in DDL_TYPES:
            return "DDL", msg
        if kind in OPS_BY_NAME:
            raise DecodeError(f"{self.name}: {kind} message without 'data' or 'old'")
        raise DecodeError(f"{self.name}: unknown message type {kind!r}")

    def _decode(self, message: model.Message) -> list[model.Event]:
        """The typed path for DML rows; every other message, or a row it does not read, goes to the reference."""
        value = message.value
        if value:
            try:
                msg: Optional[_DmlMessage] = _decode_dml(value)
            except Exception:  # noqa: BLE001 - msgspec's DecodeError/ValidationError, UnicodeDecodeError...:
                msg = None  # whatever it is, the reference path judges it
            if msg is not None:
                row = self._typed_row(msg, message)
                if row is not None:
                    return [row]
        return super()._decode(message)

    def _typed_row(self, msg: _DmlMessage, message: model.Message) -> Optional[RowChange]:
        """``_row`` for a message ``_decode_dml`` accepted, or None when only the reference path may answer.

        The types already guarantee what ``_row`` checks (names are strings, the type is a DML type, the integers
        are in range, rows are objects of string/null/Timestamp values); what is left is ``_row``'s logic minus
        its errors: a message ``_row`` would reject returns None instead. Like ``_row``, both images are
        converted even when the operation does not keep one (a failure there is an error).
        """
        data, old = msg.data, msg.old
        if msg.handleKeyOnly or msg.claimCheckLocation:
            return None
        schema, table = msg.database, msg.table
        version = msg.schemaVersion or 0
        cached = self._schemas.get((schema, table, version))
        if cached is not None and cached.fixes:
            fixes = cached.fixes
            if data is not None and not _typed_fixes(data, fixes):
                return None
            if old is not None and not _typed_fixes(old, fixes):
                return None
        # TIMESTAMP objects become their value, in place (the dicts are msgspec's, fresh for this message)
        timestamp = _Timestamp
        if data is not None:
            for name, value in data.items():
                if type(value) is timestamp:
                    data[name] = value.value
        if old is not None:
            for name, value in old.items():
                if type(value) is timestamp:
                    old[name] = value.value
        op = OPS_BY_NAME[msg.type]
        if op == model.DELETE:
            if old is None:
                return None
            data = None
        elif data is None:
            return None
        elif op == model.INSERT:
            old = None
        column_types, key_columns = _types_and_keys(cached, data, old)
        return RowChange(schema, table, msg.commitTs, op, data, old, key_columns, column_types,
                         make_position(message.topic, message.partition, message.offset, 0), msg.tableID, version)

    def _convert_row(self, raw: Any, fixes: Optional[dict[str, Converter]]) -> dict[str, Optional[str]]:
        """Canonical values, in place in the parsed dict (rows are mostly strings already: no copy needed)."""
        if type(raw) is not dict:
            raise DecodeError(f"{self.name}: row data is not an object")
        return canonical_row(raw, fixes, _json_value)

    def _fixes_for(self, table: TableSchema) -> dict[str, Converter]:
        fixes: dict[str, Converter] = {}
        for column in table.columns:
            if base_type(column.mysql_type) in ("float", "double"):
                fixes[column.name] = _json_float
        return fixes


class SimpleAvroDecoder(_SimpleDecoder):
    """``simple-avro``: schemaless Avro of the official ``message.json`` schema, no framing."""

    name = "simple-avro"
    _schema_key = "database"

    def __init__(self, options: Optional[DecoderOptions] = None) -> None:
        super().__init__(options)
        self._parsed_schema: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_parsed_schema"] = None  # re-parsed lazily on the executor
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _schema(self) -> Any:
        if self._parsed_schema is None:
            import fastavro

            self._parsed_schema = fastavro.parse_schema(orjson.loads(SCHEMA_FILE.read_bytes()))
        return self._parsed_schema

    def _parse(self, value: bytes) -> tuple[str, dict[str, Any]]:
        if value[0] != AVRO_MESSAGE_BRANCH_BYTE:
            raise DecodeError(
                f"{self.name}: first byte 0x{value[0]:02x} is not the Message union branch (0x16); "
                "is this really a Simple Avro message?"
            )
        import fastavro

        stream = io.BytesIO(value)
        try:
            record = fastavro.schemaless_reader(stream, self._schema())
        except Exception as exc:  # noqa: BLE001 - fastavro raises many types on bad bytes
            raise DecodeError(f"{self.name}: invalid Avro body: {type(exc).__name__}: {exc}") from exc
        if stream.tell() != len(value):
            raise DecodeError(f"{self.name}: {len(value) - stream.tell()} trailing bytes after the Avro message")
        if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
            raise DecodeError(f"{self.name}: Avro message has no payload")
        return record["type"], record["payload"]

    def _convert_row(self, raw: Any, fixes: Optional[dict[str, Converter]]) -> dict[str, Optional[str]]:
        """Canonical values, in place in the map fastavro returned; typed fixes first (they need the raw type)."""
        return canonical_row(raw, fixes, _avro_value)

    def _fixes_for(self, table: TableSchema) -> dict[str, Converter]:
        fixes: dict[str, Converter] = {}
        for column in table.columns:
            kind = base_type(column.mysql_type)
            if kind == "float":
                fixes[column.name] = _avro_float32
            elif kind == "double":
                fixes[column.name] = _avro_double
            elif kind in ("bit", "set"):
                fixes[column.name] = _avro_unsigned
        return fixes


# --- the typed path of JSON DML messages -----------------------------------------------------------------------
#
# Every member is declared with the JSON types the reference path reads without an error, and unknown members are
# forbidden: msgspec does not validate the members it skips (it would accept invalid UTF-8 or an infinite number
# there, which orjson rejects), so a skipped member could make the two paths disagree. Integers are bounded to
# int64: msgspec reads integers beyond uint64 exactly, where orjson turns them into floats.

_INT64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
_UINT63 = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]  # msgspec's upper bound; a TSO is far below it


class _Timestamp(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A TIMESTAMP column value ``{"location", "value"}``; the reference path keeps ``value`` only."""

    value: str
    location: str = ""


class _Checksum(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The row checksum (sent when row-level checksums are on); neither path uses it."""

    version: _INT64 = 0
    corrupted: bool = False
    current: _INT64 = 0
    previous: _INT64 = 0


_Row = dict[str, Union[str, None, _Timestamp]]


class _DmlMessage(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A Simple JSON DML message, exactly as far as the reference path reads one without an error."""

    type: Literal["INSERT", "UPDATE", "DELETE"]
    database: str
    table: str
    commitTs: _UINT63
    version: Optional[_INT64] = None
    tableID: Optional[_INT64] = None
    buildTs: Optional[_INT64] = None
    schemaVersion: Optional[_UINT63] = None
    data: Optional[_Row] = None
    old: Optional[_Row] = None
    handleKeyOnly: Optional[bool] = None
    claimCheckLocation: Optional[str] = None
    checksum: Optional[_Checksum] = None


_decode_dml = msgspec.json.Decoder(_DmlMessage).decode


def _typed_fixes(raw: dict[str, Any], fixes: dict[str, Converter]) -> bool:
    """The type fixes of ``canonical_row`` on a typed row, in place; False where the reference would raise.

    Only strings go through a fix: a TIMESTAMP object in a FLOAT/DOUBLE column keeps its ``value`` in the
    reference path too (``_json_float`` of an object is ``_json_value``), which the caller's pass then takes.
    """
    for name, fix in fixes.items():
        value = raw.get(name)
        if type(value) is str:
            try:
                raw[name] = fix(value)
            except DecodeError:
                return False
    return True


# --- value conversion -----------------------------------------------------------------------------------------


def _types_and_keys(
    cached: Any, after: Optional[dict[str, Any]], before: Optional[dict[str, Any]]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """A row's column descriptors and key columns from its cached schema (none while the schema is unknown)."""
    if cached is None:
        return {}, ()
    column_types = _row_types(cached.types, after, before)
    return column_types, (cached.table.primary_key if column_types else ())


def _row_types(
    types: dict[str, str], after: Optional[dict[str, Any]], before: Optional[dict[str, Any]]
) -> dict[str, str]:
    """Descriptors of the columns present; empty when the cached schema does not know one of them."""
    image = after if after is not None else before
    assert image is not None
    if image.keys() == types.keys() and (before is None or before is image or before.keys() == types.keys()):
        return types  # the common case: every column present (shared: RowChange.column_types is read-only)
    names = set(image) | set(before or ())
    if not names.issubset(types):
        return {}
    return {name: types[name] for name in image} | {name: types[name] for name in names if name not in image}


def _json_value(value: Any) -> str:
    """A non-string JSON column value: TIMESTAMP objects, and numbers should an encoder ever send them."""
    if isinstance(value, dict):
        inner = value.get("value")
        if not isinstance(inner, str):
            raise DecodeError(f"simple-json: TIMESTAMP object without a string 'value': {value!r}")
        return inner
    text = scalar_text(value)
    if text is None:
        raise DecodeError(f"simple-json: unexpected column value {value!r}")
    return text


def _json_float(value: Any) -> str:
    """FLOAT/DOUBLE arrive in Go ``'f'`` format ("95", "100000000000000000000"); canonical is Python ``repr``."""
    if type(value) is str:
        try:
            return repr(float(value))
        except ValueError:
            raise DecodeError(f"simple-json: invalid float value {value!r}") from None
    return _json_value(value)


def _avro_value(value: Any) -> str:
    """A typed Avro union value whose column type is not known (or needs no type-specific handling)."""
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is bytes:
        return from_bytes(value)
    if kind is float:
        return float32_text(value) if is_float32_exact(value) else repr(value)
    if kind is dict:
        if "location" in value:  # Timestamp {location, value}
            return value["value"]
        return str(value["value"] & UINT64_MASK)  # UnsignedBigint: uint64 bits in a long
    if kind is str:
        return value
    raise DecodeError(f"simple-avro: unexpected column value {value!r}")


_avro_float32 = float32_or(_avro_value)
_avro_double = double_or(_avro_value)
#: BIT and SET are uint64 sent as long: undo the wrap of values above 2^63-1
_avro_unsigned = unsigned_or(_avro_value)


# --- table schema parts ---------------------------------------------------------------------------------------


def _column_schema(raw: dict[str, Any]) -> model.ColumnSchema:
    data_type = raw["dataType"]
    descriptor = build_descriptor(
        data_type["mysqlType"],
        length=data_type.get("length"),
        scale=data_type.get("decimal"),
        unsigned=bool(data_type.get("unsigned")),
        elements=data_type.get("elements"),
    )
    default = raw.get("default")
    if default is not None and not isinstance(default, str):
        default = _json_value(default)
    name = raw["name"]
    if not isinstance(name, str):
        raise DecodeError("simple: column name is not a string")
    return model.ColumnSchema(name=name, mysql_type=descriptor, nullable=bool(raw.get("nullable", True)),
                              default=default)


def _primary_key(indexes: Any) -> tuple[str, ...]:
    """The primary key, else the first unique index on NOT NULL columns (TiCDC's handle key), else none."""
    fallback: tuple[str, ...] = ()
    for index in indexes:
        if index.get("primary"):
            return tuple(index["columns"])
        if not fallback and index.get("unique") and not index.get("nullable"):
            fallback = tuple(index["columns"])
    return fallback


def _uint64(value: Any, field: str) -> int:
    if type(value) is not int or value < 0:
        raise DecodeError(f"simple: {field} must be a non-negative integer, got {value!r}")
    return value
