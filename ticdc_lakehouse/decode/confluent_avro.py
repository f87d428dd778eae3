"""TiCDC Avro decoder (``avro``): Confluent wire format with a Confluent Schema Registry.

Framing (tiflow/ticdc ``pkg/sink/codec/avro``): key and value are each ``0x00`` + big-endian int32 schema id +
schemaless Avro. The key record holds the handle-key columns, the value record all columns, followed by the TiDB
extension fields when ``enable-tidb-extension=true``: ``_tidb_op`` (``c`` insert, ``u`` update, ``d`` delete in
the newer ticdc), ``_tidb_commit_ts``, ``_tidb_commit_physical_time`` and, with row checksums,
``_tidb_row_level_checksum``/``_tidb_corrupted``/``_tidb_checksum_version``.

* A delete is a **Kafka tombstone**: key, no value. Its columns come from the key.
* With the testing-only ``avro-enable-watermark``: value ``0x01`` + DDL JSON ``{query, type, schema, table,
  commitTs}`` and ``0x02`` + u64be resolved ts (both with a nil key); deletes then carry a value with
  ``_tidb_op = "d"``. Production Avro streams have no DDL and no resolved events.
* AWS Glue framing (``0x03 0x00`` + UUID) is not supported.

Writer schemas are fetched by id through confluent-kafka's ``SchemaRegistryClient`` (created lazily, so the
decoder pickles to Spark executors) and parsed once per id. The table is the record name, the schema is the part of
the namespace after the first dot (``default.testdb``). Column types come from ``connect.parameters.tidb_type``;
values become canonical strings: DECIMAL (``bytes.decimal`` or string mode) as plain text, BIT bytes (big-endian)
as the integer, BIGINT UNSIGNED in long mode (wrapped to negative above 2^63-1) back to the unsigned value, binary
as base64, FLOAT as its shortest float32 text; ENUM/SET are member names (descriptors with the ``allowed`` list).

Commit ts: ``_tidb_commit_ts``. Rows without it (extension off, and every tombstone) get 0 and are marked
``ts_made_up``: the merge gives them the greatest real commit ts before them on their partition in Kafka order
(``merge.made_up_ts``), so the value never depends on which Spark task decoded them, and orders them by Kafka
position, as TiCDC's own Avro decoder applies tombstones (tiflow ``pkg/sink/codec/avro/decoder.go``). Without the extension an insert cannot be told
from an update: such rows are UPDATE (an upsert of the full row).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Optional

import orjson

from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.decode.common.converters import Converter, double_or, float32_or, scalar_text, unsigned_or
from ticdc_lakehouse.decode.common.ddl_kind import OTHER, classify_query
from ticdc_lakehouse.decode.common.positions import make_position
from ticdc_lakehouse.decode.common.tidb_ddl_actions import ddl_type_for_action
from ticdc_lakehouse.decode.common.type_text import build_descriptor, split_escaped_members
from ticdc_lakehouse.core import model
from ticdc_lakehouse.core.model import DecodeError, Message, RowChange, SourceUnavailable
from ticdc_lakehouse.core.values import from_bytes, from_decimal

MAGIC_BYTE = 0x00
DDL_BYTE = 0x01
CHECKPOINT_BYTE = 0x02
GLUE_HEADER_BYTE = 0x03
HEADER = struct.Struct(">bI")  # magic byte, schema id
RESOLVED = struct.Struct(">Q")

TIDB_OP = "_tidb_op"
TIDB_COMMIT_TS = "_tidb_commit_ts"
TIDB_CORRUPTED = "_tidb_corrupted"
EXTENSION_PREFIXES = ("_tidb_", "_ticdc_")
OPS = {"c": model.INSERT, "u": model.UPDATE, "d": model.DELETE}


#: tidb_type -> (descriptor, converter name)
_TIDB_TYPES: dict[str, str] = {
    "INT": "int",
    "INT UNSIGNED": "int unsigned",
    "BIGINT": "bigint",
    "BIGINT UNSIGNED": "bigint unsigned",
    "FLOAT": "float",
    "DOUBLE": "double",
    "BIT": "bit",
    "DECIMAL": "decimal",
    "TEXT": "text",
    "BLOB": "blob",
    "JSON": "json",
    "DATE": "date",
    "DATETIME": "datetime",
    "TIMESTAMP": "timestamp",
    "TIME": "time",
    "YEAR": "year",
    "TIDBVECTORFLOAT32": "text",
}
_AVRO_TYPES = {"int": "int", "long": "bigint", "float": "float", "double": "double", "string": "text",
               "bytes": "blob", "boolean": "tinyint"}


@dataclass(frozen=True, slots=True)
class _WriterSchema:
    """A registered schema, parsed for fastavro, with its columns' descriptors and converters."""

    parsed: Any
    schema: str
    table: str
    columns: tuple[tuple[str, str, Converter], ...]  # (name, descriptor, converter), extension fields excluded
    #: what every row of the schema shares, computed once: the column names, their descriptors (one dict for
    #: all rows: RowChange.column_types is read-only by contract), the optional before-image fields (newer ticdc)
    #: and the converter of a decoded record (see _record_converter)
    column_names: tuple[str, ...] = ()
    types: dict[str, str] = field(default_factory=dict)
    before_fields: tuple[str, ...] = ()
    convert: Callable[[dict[str, Any]], dict[str, Optional[str]]] = lambda record: {}


def registry_failure(schema_id: int, exc: Exception, url: Optional[str]) -> Exception:
    """What a failed schema lookup means. Only the registry's own "no such schema" (HTTP 404) is the message's
    fault (a ``DecodeError``: dead letter); anything else (connection refused, timeout, 401/403, 5xx) says
    nothing about the message, and dead-lettering it would take good rows out of the lake, so the run fails
    (``SourceUnavailable``) and is retried."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    if isinstance(exc, SchemaRegistryError) and exc.http_status_code == 404:
        return DecodeError(f"avro: schema id {schema_id} is not in the schema registry: {exc}")
    from ticdc_lakehouse.core.redaction import mask_uri_password

    return SourceUnavailable(mask_uri_password(
        f"avro: the schema registry at {url} could not be asked for schema id {schema_id} "
        f"({type(exc).__name__}: {exc}); nothing was committed, rerun when it is reachable"))


class ConfluentAvroDecoder:
    name = "avro"

    def __init__(self, options: Optional[DecoderOptions] = None) -> None:
        self.options = options or DecoderOptions()
        self._client: Any = None
        self._writers: dict[int, _WriterSchema] = {}

    def __getstate__(self) -> dict[str, Any]:
        """The registry client (sockets, locks) and parsed schemas stay behind; executors rebuild them."""
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]
        self._client = None
        self._writers = {}

    # --- registry --------------------------------------------------------------------------------------------
    def _registry(self) -> Any:
        if self._client is None:
            url = self.options.schema_registry_url
            if not url:
                # a configuration error, not the message's: every message would be dead-lettered
                raise SourceUnavailable("avro: no schema registry configured (changefeeds.<name>.schema_registry_url)")
            from confluent_kafka.schema_registry import SchemaRegistryClient

            self._client = SchemaRegistryClient({**dict(self.options.schema_registry_config), "url": url})
        return self._client

    def _writer(self, schema_id: int) -> _WriterSchema:
        writer = self._writers.get(schema_id)
        if writer is None:
            try:
                registered = self._registry().get_schema(schema_id)
            except (DecodeError, SourceUnavailable):
                raise
            except Exception as exc:  # noqa: BLE001 - registry client errors vary (HTTP, transport)
                raise registry_failure(schema_id, exc, self.options.schema_registry_url) from exc
            writer = _writer_schema(registered.schema_str, schema_id)
            self._writers[schema_id] = writer
        return writer

    # --- decoding --------------------------------------------------------------------------------------------
    def decode(self, message: Message) -> list[model.Event]:
        key, value = message.key, message.value
        if not value:
            if not key:
                raise DecodeError("avro: message with neither key nor value")
            return [self._tombstone(key, message)]
        first = value[0]
        if first == MAGIC_BYTE:
            return [self._row(key, value, message)]
        if key:
            raise DecodeError(f"avro: row value does not start with the Confluent magic byte 0 (got 0x{first:02x})")
        if first == CHECKPOINT_BYTE:
            if len(value) != 1 + RESOLVED.size:
                raise DecodeError(f"avro: watermark message must be 9 bytes, got {len(value)}")
            return [model.ResolvedEvent(ts=RESOLVED.unpack_from(value, 1)[0], position=message.position())]
        if first == DDL_BYTE:
            return [self._ddl(value, message)]
        if first == GLUE_HEADER_BYTE:
            raise DecodeError("avro: AWS Glue schema registry framing (0x03) is not supported")
        raise DecodeError(f"avro: unknown leading byte 0x{first:02x}")

    def _read(self, data: bytes, what: str) -> tuple[_WriterSchema, dict[str, Any]]:
        if len(data) < HEADER.size:
            raise DecodeError(f"avro: {what} is {len(data)} bytes, shorter than the 5-byte Confluent header")
        magic, schema_id = HEADER.unpack_from(data)
        if magic != MAGIC_BYTE:
            raise DecodeError(f"avro: {what} does not start with the Confluent magic byte 0")
        writer = self._writers.get(schema_id) or self._writer(schema_id)
        stream = io.BytesIO(data)
        stream.seek(HEADER.size)
        try:
            record = _schemaless_reader()(stream, writer.parsed)
        except Exception as exc:  # noqa: BLE001 - fastavro raises many types on bad bytes
            raise DecodeError(
                f"avro: invalid Avro {what} (schema id {schema_id}): {type(exc).__name__}: {exc}"
            ) from exc
        if stream.tell() != len(data):
            raise DecodeError(f"avro: {len(data) - stream.tell()} trailing bytes after the Avro {what}")
        if not isinstance(record, dict):
            raise DecodeError(f"avro: {what} is not an Avro record")
        return writer, record

    def _row(self, key: Optional[bytes], value: bytes, message: Message) -> RowChange:
        writer, record = self._read(value, "value")
        if record.get(TIDB_CORRUPTED):
            raise DecodeError("avro: TiCDC flagged this row as corrupted (_tidb_corrupted = true)")
        raw_op = record.get(TIDB_OP)
        if raw_op:
            op = OPS.get(raw_op)
            if op is None:
                raise DecodeError(f"avro: unknown _tidb_op {raw_op!r}")
        else:
            op = model.UPDATE
        values = writer.convert(record)
        before = None
        for before_field in writer.before_fields:  # newer ticdc: optional before-image record
            extra = record.get(before_field)
            if isinstance(extra, dict):
                before = _convert(writer, extra)
        after: Optional[dict[str, Optional[str]]] = values
        if op == model.DELETE:
            after, before = None, values
        key_columns: tuple[str, ...] = ()
        if key:
            if len(key) < HEADER.size or key[0] != MAGIC_BYTE:
                raise DecodeError("avro: key does not start with the Confluent header")
            key_schema_id = HEADER.unpack_from(key)[1]
            key_columns = (self._writers.get(key_schema_id) or self._writer(key_schema_id)).column_names
        commit_ts = record.get(TIDB_COMMIT_TS)
        return self._row_change(writer, op, after, before, key_columns, writer.types, commit_ts, message)

    def _tombstone(self, key: bytes, message: Message) -> RowChange:
        writer, record = self._read(key, "key")
        return self._row_change(writer, model.DELETE, None, writer.convert(record), writer.column_names, writer.types,
                                None, message)

    def _row_change(
        self,
        writer: _WriterSchema,
        op: str,
        after: Optional[dict[str, Optional[str]]],
        before: Optional[dict[str, Optional[str]]],
        key_columns: tuple[str, ...],
        column_types: dict[str, str],
        commit_ts: Any,
        message: Message,
    ) -> RowChange:
        made_up = not (type(commit_ts) is int and commit_ts > 0)
        # positional: measurably faster than keywords for this slotted dataclass
        return RowChange(writer.schema, writer.table, 0 if made_up else commit_ts, op, after, before, key_columns,
                         column_types, make_position(message.topic, message.partition, message.offset, 0), None,
                         None, made_up)

    def _ddl(self, value: bytes, message: Message) -> model.DDLEvent:
        try:
            doc = orjson.loads(value[1:])
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"avro: invalid DDL JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise DecodeError("avro: DDL message is not a JSON object")
        query, action = doc.get("query") or "", doc.get("type")
        schema, table, commit_ts = doc.get("schema") or "", doc.get("table") or "", doc.get("commitTs")
        if not isinstance(query, str) or not isinstance(schema, str) or not isinstance(table, str):
            raise DecodeError("avro: DDL query/schema/table must be strings")
        if type(commit_ts) is not int or commit_ts < 0:
            raise DecodeError(f"avro: DDL commitTs must be a non-negative integer, got {commit_ts!r}")
        ddl_type = ddl_type_for_action(action, query) if type(action) is int else OTHER
        if ddl_type == OTHER:
            ddl_type = classify_query(query)
        return model.DDLEvent(
            schema=schema,
            table=table,
            commit_ts=commit_ts,
            query=query,
            ddl_type=ddl_type,
            position=message.position(),
        )


# --- schemas ----------------------------------------------------------------------------------------------------


def _writer_schema(schema_str: Optional[str], schema_id: int) -> _WriterSchema:
    import fastavro

    try:
        schema = orjson.loads(schema_str or "")
        parsed = fastavro.parse_schema(schema)
    except Exception as exc:  # noqa: BLE001 - invalid JSON or Avro schema
        raise DecodeError(f"avro: schema id {schema_id} is not a valid Avro schema: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise DecodeError(f"avro: schema id {schema_id} is not an Avro record schema")
    namespace = schema.get("namespace") or ""
    name = schema.get("name") or ""
    if "." in name:  # a full name
        namespace, name = name.rsplit(".", 1)
    database = namespace.split(".", 1)[1] if "." in namespace else namespace
    columns = tuple(
        _column(field)
        for field in schema.get("fields") or ()
        if not field["name"].startswith(EXTENSION_PREFIXES)
    )
    before_fields = tuple(field["name"] for field in schema.get("fields") or ()
                          if field["name"].startswith("_ticdc_before"))
    return _WriterSchema(parsed=parsed, schema=database, table=name, columns=columns,
                         column_names=tuple(name for name, _, _ in columns),
                         types={name: descriptor for name, descriptor, _ in columns}, before_fields=before_fields,
                         convert=_record_converter(columns))


def _record_converter(columns: tuple[tuple[str, str, Converter], ...]) -> Callable[[dict[str, Any]], dict]:
    """A function generated for one writer schema (as ``dataclasses`` generates ``__init__``) that converts a
    decoded record: straight-line code per column instead of a loop of converter calls. Strings and ints, the
    bulk of any row, are converted inline; other types call the column's converter, exactly as ``_convert``.
    Records missing a column (a key record, an older writer) go through ``_convert``.
    """
    lines = ["def convert(record, str=str, type=type, repr=repr):", "    try:"]
    for position, (name, _, converter) in enumerate(columns):
        value = f"v{position}"
        lines.append(f"        {value} = record[{name!r}]")
        if converter is _text:  # what _text does to a str (nothing) and to an int, inline
            lines += [f"        if {value} is not None and type({value}) is not str:",
                      f"            {value} = str({value}) if type({value}) is int else c{position}({value})"]
        elif converter is _double:
            lines += [f"        if type({value}) is float: {value} = repr({value})",
                      f"        elif {value} is not None: {value} = c{position}({value})"]
        else:
            lines.append(f"        if {value} is not None: {value} = c{position}({value})")
    lines += ["    except KeyError:", "        return convert_slowly(record)",
              "    return {" + ", ".join(f"{name!r}: v{i}" for i, (name, _, _) in enumerate(columns)) + "}"]
    namespace: dict[str, Any] = {f"c{i}": converter for i, (_, _, converter) in enumerate(columns)}
    writer_columns = columns

    def convert_slowly(record: dict[str, Any]) -> dict[str, Optional[str]]:
        return _convert_columns(writer_columns, record)

    namespace["convert_slowly"] = convert_slowly
    exec("\n".join(lines), namespace)  # noqa: S102 - source built from repr() literals and fixed templates
    return namespace["convert"]


def _column(field: dict[str, Any]) -> tuple[str, str, Converter]:
    """Descriptor and converter of one value/key field, whatever the union branch order."""
    branch: Any = field["type"]
    if isinstance(branch, list):
        branch = next((b for b in branch if b != "null"), "null")
    avro_type = branch.get("type") if isinstance(branch, dict) else branch
    params = branch.get("connect.parameters") or {} if isinstance(branch, dict) else {}
    tidb_type = str(params.get("tidb_type", "")).upper()
    name = field["name"]
    if isinstance(branch, dict) and branch.get("logicalType") == "decimal":
        return name, build_descriptor("decimal", length=branch.get("precision"), scale=branch.get("scale", 0)), _decimal
    if tidb_type in ("ENUM", "SET"):
        members = split_escaped_members(params.get("allowed", ""))
        return name, build_descriptor(tidb_type.lower(), elements=members), _text
    descriptor = _TIDB_TYPES.get(tidb_type) or _AVRO_TYPES.get(avro_type, "text")
    converter = _TYPED_CONVERTERS.get(descriptor) or (_bytes if avro_type == "bytes" else _text)
    return name, descriptor, converter


def _convert(writer: _WriterSchema, record: dict[str, Any]) -> dict[str, Optional[str]]:
    return writer.convert(record)


def _convert_columns(columns: tuple[tuple[str, str, Converter], ...],
                     record: dict[str, Any]) -> dict[str, Optional[str]]:
    """The reference conversion: column by column, skipping the columns the record does not have."""
    out: dict[str, Optional[str]] = {}
    for name, _, converter in columns:
        if name not in record:
            continue
        value = record[name]
        out[name] = None if value is None else converter(value)
    return out


# --- value converters -------------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return value
    if kind is bytes:
        return from_bytes(value)
    if kind is Decimal:
        return from_decimal(value)
    text = scalar_text(value)
    if text is None:
        raise DecodeError(f"avro: unexpected value {value!r}")
    return text


def _bytes(value: Any) -> str:
    return from_bytes(value) if type(value) is bytes else _text(value)


def _bit(value: Any) -> str:
    """BIT travels as its big-endian bytes (``683`` -> ``b"\\x02\\xab"``)."""
    if type(value) is bytes:
        return str(int.from_bytes(value, "big"))
    return _text(value)


def _decimal(value: Any) -> str:
    return from_decimal(value) if type(value) is Decimal or type(value) is str else _text(value)


_unsigned = unsigned_or(_text)
_float32 = float32_or(_text)
_double = double_or(_text)


#: the converter of each descriptor whose wire form needs one (any other: ``_bytes`` for Avro bytes, else ``_text``)
_TYPED_CONVERTERS: dict[str, Converter] = {
    "bit": _bit, "bigint unsigned": _unsigned, "decimal": _decimal, "float": _float32, "double": _double,
}


def _schemaless_reader() -> Callable[..., Any]:
    """fastavro's reader, imported on first use (the module loads without fastavro's import cost)."""
    global _READER
    if _READER is None:
        import fastavro

        _READER = fastavro.schemaless_reader
    return _READER


_READER: Optional[Callable[..., Any]] = None


def confluent_frame(schema_id: int, body: bytes) -> bytes:
    """``0x00`` + big-endian schema id + Avro body (what TiCDC writes; used by tests and tools)."""
    return HEADER.pack(MAGIC_BYTE, schema_id) + body

