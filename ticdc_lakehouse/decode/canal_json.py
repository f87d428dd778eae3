"""TiCDC Canal-JSON decoder (``canal-json``), with or without TiCDC's ``_tidb`` extension.

A message is one Canal "flat message": ``isDdl`` true is a DDL; ``type: TIDB_WATERMARK`` (extension only) is a
resolved ts; anything else is INSERT/UPDATE/DELETE with rows in ``data`` (and ``old`` for UPDATE). Several flat
messages may share one Kafka value separated by newlines (TiCDC's ``terminator`` option); each becomes its own
events, ordered by ``Position.seq``.

Commit ts:

* with ``enable-tidb-extension``: ``_tidb.commitTs`` (DML, DDL) and ``_tidb.watermarkTs`` (resolved);
* without it, Canal-JSON carries no TSO at all. We use ``es << 18``: ``es`` is the commit's physical time in ms
  (TiCDC writes ``commitTs >> 18``), so the result is a TSO with a zero logical part. It orders rows correctly to
  the millisecond; rows of different transactions in the same millisecond tie and are ordered by Kafka offset.
  There are no resolved events in that mode.

Values are strings: ENUM index and SET bitmask (bare ``enum``/``set`` descriptors), BIT an integer, binary types
(``mysqlType`` containing ``blob``/``binary``) are ISO-8859-1 text of the bytes, which we turn into base64.
Descriptors come from ``mysqlType`` (never from ``sqlType``, whose code depends on the value). An UPDATE whose
``old`` holds only the changed columns (``only-output-updated-columns``) gets the rest from ``data``, like
TiCDC's own decoder. ``onlyHandleKey`` rows need the upstream TiDB: they are decode errors. ``claimCheckLocation``
rows are read from the changefeed's claim-check storage, and values compressed with
``large-message-handle-compression`` are decompressed first (``large_messages``), as TiCDC's consumer does.
"""

from __future__ import annotations

from typing import Any, Optional

import orjson

from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.decode.common.converters import Converter, canonical_row, scalar_text
from ticdc_lakehouse.decode.common.ddl_kind import classify_query, schema_of_schema_ddl
from ticdc_lakehouse.decode.common.type_text import base_type, is_binary_descriptor, normalize_descriptor
from ticdc_lakehouse.decode.large_messages import LargeMessages
from ticdc_lakehouse.core import model
from ticdc_lakehouse.core.model import OPS_BY_NAME, DecodeError, Event
from ticdc_lakehouse.core.values import from_bytes

WATERMARK_TYPE = "TIDB_WATERMARK"
PHYSICAL_SHIFT = 18  # a TSO is (physical ms << 18) | logical


class CanalJsonDecoder:
    name = "canal-json"

    def __init__(self, options: Optional[DecoderOptions] = None) -> None:
        self.options = options or DecoderOptions()
        self._descriptor_cache: dict[str, tuple[str, Optional[Converter]]] = {}
        self.large = LargeMessages(self.options.large_messages)

    def decode(self, message: model.Message) -> list[Event]:
        value = message.value
        if not value:
            raise DecodeError(f"{self.name}: empty message value")
        if self.large.compressed:  # large-message-handle-compression: the whole value
            value = self.large.decompress(value, f"{self.name} value")
        events: list[Event] = []
        for document in _documents(value):
            try:
                self._decode_document(document, message, events)
            except DecodeError:
                raise
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                raise DecodeError(f"{self.name}: malformed message: {type(exc).__name__}: {exc}") from exc
        return events

    def _claim_checked(self, location: Any, message: model.Message, events: list[Event]) -> None:
        """The row TiCDC moved to claim-check storage: the stored value is the whole (compressed) message."""
        what = f"{self.name} claim-check row"
        if type(location) is not str:
            raise DecodeError(f"{what}: claimCheckLocation is not a string")
        _, value = self.large.claim_check(location, what)
        stored: list[Event] = []
        for document in _documents(self.large.decompress(value, f"{what}: stored value")):
            if isinstance(document, dict) and isinstance(document.get("_tidb"), dict) \
                    and document["_tidb"].get("claimCheckLocation"):
                raise DecodeError(f"{what}: the claim-check file at {location!r} points to another claim check")
            self._decode_document(document, message, stored)
        if not stored or any(type(event) is not model.RowChange for event in stored):
            raise DecodeError(f"{what}: the claim-check file at {location!r} does not hold rows")
        for event in stored:
            event.position = message.position(len(events))
            events.append(event)

    def _decode_document(self, doc: Any, message: model.Message, events: list[Event]) -> None:
        if not isinstance(doc, dict):
            raise DecodeError(f"{self.name}: message is not a JSON object")
        tidb = doc.get("_tidb")
        if tidb is not None and not isinstance(tidb, dict):
            raise DecodeError(f"{self.name}: '_tidb' is not an object")
        kind = doc.get("type")
        if doc.get("isDdl") is True:
            events.append(self._ddl(doc, tidb, message.position(len(events))))
            return
        if kind == WATERMARK_TYPE:
            if not tidb or "watermarkTs" not in tidb:
                raise DecodeError(f"{self.name}: TIDB_WATERMARK without _tidb.watermarkTs")
            events.append(model.ResolvedEvent(ts=_uint64(tidb["watermarkTs"], "watermarkTs"),
                                        position=message.position(len(events))))
            return
        op = OPS_BY_NAME.get(kind)  # type: ignore[arg-type]
        if op is None:
            raise DecodeError(f"{self.name}: unknown event type {kind!r}")
        if tidb:
            if tidb.get("onlyHandleKey"):
                raise DecodeError(
                    f"{self.name}: onlyHandleKey row (the row was too large and only its key was sent); completing "
                    "it needs the upstream TiDB, which the lakehouse does not query"
                )
            location = tidb.get("claimCheckLocation")
            if location:
                self._claim_checked(location, message, events)
                return
        schema, table = doc["database"], doc["table"]
        if not isinstance(schema, str) or not isinstance(table, str):
            raise DecodeError(f"{self.name}: DML without database/table names")
        commit_ts = _commit_ts(doc, tidb)
        made_up = not (tidb and "commitTs" in tidb)  # ``es``: milliseconds, not one transaction's TSO
        data = doc.get("data")
        if not isinstance(data, list) or not data:
            raise DecodeError(f"{self.name}: {kind} without rows in 'data'")
        old = doc.get("old") or []
        if not isinstance(old, list):
            raise DecodeError(f"{self.name}: 'old' is not a list")
        mysql_types = doc.get("mysqlType") or {}
        if not isinstance(mysql_types, dict):
            raise DecodeError(f"{self.name}: 'mysqlType' is not an object")
        # TiCDC writes [] for every table without a PRIMARY KEY (tiflow cdc/model/sink.go), its handle being a NOT
        # NULL UNIQUE key or none at all: the lake keys such a table by the handle its CREATE TABLE names, else
        # by the whole row (see merge.keyless)
        pk_names = doc.get("pkNames")
        if pk_names is None:
            pk_names = []
        if not isinstance(pk_names, list) or not all(type(name) is str for name in pk_names):
            raise DecodeError(f"{self.name}: 'pkNames' is not a list of column names")
        key_columns = tuple(pk_names)
        types, converters = self._plan(mysql_types)
        for index, raw in enumerate(data):
            converted = self._convert(raw, types, converters, f"row {index} of 'data'")
            after: Optional[dict[str, Optional[str]]] = converted
            before: Optional[dict[str, Optional[str]]] = None
            if op == model.DELETE:
                after, before = None, converted
            elif op == model.UPDATE and index < len(old) and old[index] is not None:
                changed = self._convert(old[index], types, converters, f"row {index} of 'old'")
                if changed.keys() == converted.keys():
                    before = changed
                else:  # only the changed columns were sent: the others did not change
                    before = {name: changed[name] if name in changed else value for name, value in converted.items()}
                    before.update((name, v) for name, v in changed.items() if name not in before)
            image_names = converted.keys() if before is None else converted.keys() | before.keys()
            column_types = dict(types) if image_names == types.keys() else {n: types[n] for n in image_names}
            # positional: measurably faster than keywords for this slotted dataclass
            events.append(model.RowChange(schema, table, commit_ts, op, after, before, key_columns, column_types,
                                    message.position(len(events)), None, None, made_up))

    def _plan(self, mysql_types: dict[str, Any]) -> tuple[dict[str, str], dict[str, Converter]]:
        """Descriptors of the message's columns, and converters for the few that need one."""
        types: dict[str, str] = {}
        converters: dict[str, Converter] = {}
        cache = self._descriptor_cache
        for name, mysql_type in mysql_types.items():
            cached = cache.get(mysql_type) if type(mysql_type) is str else None
            if cached is None:
                if not isinstance(mysql_type, str):
                    raise DecodeError(f"{self.name}: mysqlType of {name!r} is not a string")
                cached = self._describe(mysql_type)
            types[name] = cached[0]
            if cached[1] is not None:
                converters[name] = cached[1]
        return types, converters

    def _convert(
        self, raw: Any, types: dict[str, str], converters: dict[str, Converter], what: str
    ) -> dict[str, Optional[str]]:
        """Canonical values, in place in the parsed row."""
        if type(raw) is not dict:
            raise DecodeError(f"{self.name}: {what} is not an object")
        if not raw.keys() <= types.keys():
            missing = sorted(set(raw) - set(types))
            raise DecodeError(f"{self.name}: columns {missing} have no mysqlType")
        return canonical_row(raw, converters, _scalar_text)

    def _describe(self, mysql_type: str) -> tuple[str, Optional[Converter]]:
        """Descriptor and value converter for one ``mysqlType`` text (cached: tables repeat the same few)."""
        descriptor = normalize_descriptor(mysql_type, keep_elements=False)
        converter: Optional[Converter] = None
        if is_binary_descriptor(mysql_type.lower()):
            converter = _latin1_to_base64
        elif base_type(descriptor) in ("float", "double"):
            converter = _float_text
        result = (descriptor, converter)
        if len(self._descriptor_cache) < 1024:
            self._descriptor_cache[mysql_type] = result
        return result

    def _ddl(self, doc: dict[str, Any], tidb: Optional[dict[str, Any]], position: Any) -> model.DDLEvent:
        query = doc.get("sql") or ""
        if not isinstance(query, str):
            raise DecodeError(f"{self.name}: DDL 'sql' is not a string")
        schema = doc.get("database") or schema_of_schema_ddl(query) or ""
        table = doc.get("table") or ""
        if not isinstance(schema, str) or not isinstance(table, str):
            raise DecodeError(f"{self.name}: DDL database/table are not strings")
        hint = doc.get("type")
        return model.DDLEvent(
            schema=schema,
            table=table,
            commit_ts=_commit_ts(doc, tidb),
            query=query,
            ddl_type=classify_query(query, hint=hint if isinstance(hint, str) else None),
            position=position,
        )


def _documents(value: bytes) -> list[Any]:
    """One JSON document, or several separated by newlines (the txn/storage ``terminator`` form)."""
    try:
        return [orjson.loads(value)]
    except orjson.JSONDecodeError as first_error:
        lines = [line for line in value.split(b"\n") if line.strip()]
        if len(lines) <= 1:
            raise DecodeError(f"canal-json: invalid JSON: {first_error}") from first_error
        documents = []
        for number, line in enumerate(lines):
            try:
                documents.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise DecodeError(f"canal-json: invalid JSON in line {number + 1}: {exc}") from exc
        return documents


def _commit_ts(doc: dict[str, Any], tidb: Optional[dict[str, Any]]) -> int:
    if tidb and "commitTs" in tidb:
        return _uint64(tidb["commitTs"], "_tidb.commitTs")
    return _uint64(doc.get("es") or 0, "es") << PHYSICAL_SHIFT


def _uint64(value: Any, field: str) -> int:
    if type(value) is not int or value < 0:
        raise DecodeError(f"canal-json: {field} must be a non-negative integer, got {value!r}")
    return value


def _latin1_to_base64(value: Any) -> str:
    if type(value) is not str:
        raise DecodeError(f"canal-json: binary column value is not a string: {value!r}")
    try:
        return from_bytes(value.encode("latin-1"))
    except UnicodeEncodeError as exc:
        raise DecodeError(f"canal-json: binary value has characters above U+00FF: {exc}") from exc


def _float_text(value: Any) -> str:
    try:
        return repr(float(value))
    except (TypeError, ValueError):
        raise DecodeError(f"canal-json: invalid float value {value!r}") from None


def _scalar_text(value: Any) -> str:
    text = scalar_text(value)
    if text is None:
        raise DecodeError(f"canal-json: unexpected column value {value!r}")
    return text
