"""TiCDC Open Protocol encoder: the bytes TiCDC's own encoder writes, for demos, benchmarks and tests.

Two flavors, because the two TiCDC code bases write the same protocol slightly differently:

* ``"ticdc"`` (pingcap/ticdc, the current TiCDC): jsoniter writer; key ``ts,scm,tbl,t[,ptn]`` with scm/tbl
  always present; columns in table order; no HTML escaping.
* ``"tiflow"`` (pingcap/tiflow, TiCDC up to v8): Go ``encoding/json``; empty scm/tbl omitted; columns sorted by
  name (they are a Go map); ``<``, ``>``, ``&``, U+2028/9 escaped.

Framing is the same: key = ``u64be 1`` + per event ``u64be len`` + key JSON; value = per event ``u64be len`` +
value JSON, empty for a resolved event. ``encode_batch`` packs several events into one message the way TiCDC's
batch encoder packs rows (current TiCDC batches rows only; 2020 encoders also batched DDL and resolved events,
which ``encode_batch`` will produce if asked, to exercise decoders on legacy data).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
from typing import Optional, Sequence

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode.common.go_text import go_float_json, go_json_string, go_quote
from ticdc_lakehouse.decode.common.mysql_type_codes import (
    BLOB_CODES,
    FLAG_BINARY,
    STRING_CODES,
    TYPE_DOUBLE,
    TYPE_FLOAT,
    TYPE_GEOMETRY,
)
from ticdc_lakehouse.decode.common.tidb_ddl_actions import action_for_ddl_type
from ticdc_lakehouse.decode.large_messages import compress
from ticdc_lakehouse.sim.encode.batches import RowBatches
from ticdc_lakehouse.sim.encode.column_values import WireColumn, row_columns
from ticdc_lakehouse.core.model import DDLEvent, ResolvedEvent, RowChange

_U64 = struct.Struct(">Q")
VERSION_HEADER = _U64.pack(1)
FLAVORS = ("ticdc", "tiflow")


class OpenProtocolEncoder(RowBatches):
    """Encode model events as Open Protocol ``(key, value)`` messages."""

    def __init__(self, flavor: str = "ticdc", compression: str = "none") -> None:
        """``compression``: TiCDC's large-message-handle-compression, applied to every row and DDL value item."""
        if flavor not in FLAVORS:
            raise ValueError(f"unknown Open Protocol flavor {flavor!r}; expected one of {FLAVORS}")
        self.flavor = flavor
        self._html = flavor == "tiflow"
        self.compression = compression

    def encode(self, event: model.Event) -> tuple[Optional[bytes], bytes]:
        """One event as one message."""
        return self.encode_batch([event])

    def encode_batch(self, events: Sequence[model.Event]) -> tuple[Optional[bytes], bytes]:
        """Several events as one message; zero events give the empty batch (version-only key, empty value)."""
        key_parts = [VERSION_HEADER]
        value_parts = []
        for event in events:
            key_json, value_json = self.event_json(event)
            if value_json and self.compression != "none":
                value_json = compress(self.compression, value_json)
            key_parts.append(_U64.pack(len(key_json)))
            key_parts.append(key_json)
            value_parts.append(_U64.pack(len(value_json)))
            value_parts.append(value_json)
        return b"".join(key_parts), b"".join(value_parts)

    def encode_claim_check(self, row: RowChange, location: str) -> tuple[bytes, bytes, bytes]:
        """A row sent the claim-check way: ``(Kafka key, Kafka value, stored file)``. The Kafka message carries
        ``ccl`` and only the handle-key columns; the file is Go's JSON of the whole message TiCDC would have sent
        (``{"key": base64, "value": base64}``)."""
        key, value = self.encode(row)
        keys = set(row.key_columns)
        handle_only = dataclasses.replace(
            row, after=None if row.after is None else {k: v for k, v in row.after.items() if k in keys},
            before=None if row.before is None else {k: v for k, v in row.before.items() if k in keys})
        _, small_value = self.encode(handle_only)
        key_json = self._key(row.commit_ts, row.schema, row.table, 1)[:-1] + b',"ccl":' + \
            self._str(location).encode("utf-8") + b"}"
        stored = json.dumps({"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()})
        return VERSION_HEADER + _U64.pack(len(key_json)) + key_json, small_value, stored.encode()

    # --- JSON ---------------------------------------------------------------------------------------------------

    def event_json(self, event: model.Event) -> tuple[bytes, bytes]:
        """The key JSON and value JSON of one event (without framing)."""
        if isinstance(event, RowChange):
            return self._key(event.commit_ts, event.schema, event.table, 1), self._row_value(event)
        if isinstance(event, DDLEvent):
            value = '{"q":' + self._str(event.query) + ',"t":' + str(action_for_ddl_type(event.ddl_type)) + "}"
            return self._key(event.commit_ts, event.schema, event.table, 2), value.encode("utf-8")
        if isinstance(event, ResolvedEvent):
            return f'{{"ts":{event.ts},"t":3}}'.encode("ascii"), b""
        raise TypeError(f"Open Protocol cannot encode {type(event).__name__}")

    def _str(self, text: str) -> str:
        return go_json_string(text, html_escape=self._html)

    def _key(self, ts: int, schema: str, table: str, kind: int) -> bytes:
        parts = [f'{{"ts":{ts}']
        if schema or not self._html:
            parts.append(',"scm":' + self._str(schema))
        if table or not self._html:
            parts.append(',"tbl":' + self._str(table))
        parts.append(f',"t":{kind}}}')
        return "".join(parts).encode("utf-8")

    def _row_value(self, row: RowChange) -> bytes:
        if row.op == model.DELETE:
            if not row.before:
                raise ValueError("a DELETE needs the old row in `before`")
            groups = [("d", row.before)]
        else:
            if not row.after:
                raise ValueError(f"an {'UPDATE' if row.op == model.UPDATE else 'INSERT'} needs the new row in `after`")
            groups = [("u", row.after)]
            if row.op == model.UPDATE and row.before:
                groups.append(("p", row.before))
        parts = []
        for field, values in groups:
            columns = row_columns(values, row.column_types, row.key_columns)
            if self._html:
                columns.sort(key=lambda column: column.name)
            body = ",".join(self._str(column.name) + ":" + self._column(column) for column in columns)
            parts.append(f'"{field}":{{{body}}}')
        return ("{" + ",".join(parts) + "}").encode("utf-8")

    def _column(self, column: WireColumn) -> str:
        head = f'{{"t":{column.code}'
        if column.handle:
            head += ',"h":true'
        return f'{head},"f":{column.flags},"v":{self._value(column)}}}'

    def _value(self, column: WireColumn) -> str:
        value = column.value
        if value is None:
            return "null"
        code = column.code
        if type(value) is int:
            return str(value)
        if code == TYPE_FLOAT:
            return go_float_json(value, 32)
        if code == TYPE_DOUBLE:
            return go_float_json(value, 64)
        if code in STRING_CODES:
            if column.flags & FLAG_BINARY:
                return self._str(go_quote(value))
            return self._str(value)
        if code in BLOB_CODES or code == TYPE_GEOMETRY:
            raw = value if isinstance(value, bytes) else value.encode("utf-8")
            return '"' + base64.b64encode(raw).decode("ascii") + '"'
        return self._str(value)
