"""TiCDC Canal-JSON encoder (tiflow ``pkg/sink/codec/canal/canal_json_message.go``), for tests and demos.

What it writes the way TiCDC does: every value as a string (or null), ``mysqlType`` per column, ``pkNames`` the
PRIMARY KEY columns and ``[]`` for a table without one (tiflow ``cdc/model/sink.go``: a NOT NULL UNIQUE handle key
is not named there), an update's ``old`` with the previous row, a delete's row in ``data``, ``es`` the commit's
physical time in ms (``commit_ts >> 18``). With ``tidb_extension`` (``enable-tidb-extension``) rows and DDL carry
``_tidb.commitTs`` and resolved events become ``TIDB_WATERMARK`` messages; without it resolved events are not
sent at all (``encode`` returns None for them). Only the value kinds that are plain text in Canal-JSON are
supported (numbers, decimals, strings, temporal types): binary values raise.
"""

from __future__ import annotations

import json
from typing import Optional

from ticdc_lakehouse.core import model
from ticdc_lakehouse.core.model import DELETE, INSERT, DDLEvent, ResolvedEvent, RowChange

PHYSICAL_SHIFT = 18
_TYPES = {model.INSERT: "INSERT", model.UPDATE: "UPDATE", model.DELETE: "DELETE"}


class CanalJsonEncoder:
    """Encode model events as Canal-JSON ``(key, value)`` messages (no Kafka key: TiCDC sends none)."""

    def __init__(self, tidb_extension: bool = True) -> None:
        self.tidb_extension = tidb_extension

    def encode(self, event: model.Event) -> Optional[tuple[Optional[bytes], bytes]]:
        if isinstance(event, ResolvedEvent):
            if not self.tidb_extension:
                return None
            doc = self._base("", "", None, "TIDB_WATERMARK", 0, False)
            doc["_tidb"] = {"watermarkTs": event.ts}
        elif isinstance(event, DDLEvent):
            doc = self._base(event.schema, event.table, None, "QUERY", event.commit_ts, True)
            doc["sql"] = event.query
            if self.tidb_extension:
                doc["_tidb"] = {"commitTs": event.commit_ts}
        elif isinstance(event, RowChange):
            doc = self._row(event)
        else:
            raise TypeError(f"cannot encode {event!r} as Canal-JSON")
        return None, json.dumps(doc, ensure_ascii=False).encode()

    def _base(self, schema: str, table: str, pk_names, kind: str, commit_ts: int, is_ddl: bool) -> dict:
        return {"id": 0, "database": schema, "table": table, "pkNames": pk_names, "isDdl": is_ddl, "type": kind,
                "es": commit_ts >> PHYSICAL_SHIFT, "ts": (commit_ts >> PHYSICAL_SHIFT) + 1, "sql": "",
                "sqlType": None, "mysqlType": None, "data": None, "old": None}

    def _row(self, row: RowChange) -> dict:
        for descriptor in row.column_types.values():
            if "blob" in descriptor or "binary" in descriptor:
                raise ValueError(f"binary column values are not supported by this encoder ({descriptor})")
        doc = self._base(row.schema, row.table, list(row.key_columns), _TYPES[row.op], row.commit_ts, False)
        image = row.before if row.op == DELETE else row.after
        assert image is not None
        doc["mysqlType"] = {name: row.column_types[name] for name in image}
        doc["sqlType"] = {name: 0 for name in image}  # JDBC codes: not read by consumers of this project
        doc["data"] = [dict(image)]
        if row.op not in (INSERT, DELETE) and row.before is not None:
            doc["old"] = [dict(row.before)]
        if self.tidb_extension:
            doc["_tidb"] = {"commitTs": row.commit_ts}
        return doc
