"""``TableCutTrigger``: wait in the triggerer until a lake table is consistent up to a TSO.

The table's cut is read from its Iceberg metadata with pyiceberg (the watermark ``tidb.resolved-ts`` in the
summary of the newest snapshot that has one, ``hooks.lakehouse.table_watermark``), no Spark.
"""

from __future__ import annotations

from typing import Any, Optional

from lakehouse_airflow.triggers.base import DEFAULT_POLL_SECONDS, LakehouseTrigger


class TableCutTrigger(LakehouseTrigger):
    """Fires when lake table ``table`` is consistent up to at least ``min_ts`` (a TSO).

    :param table: the lake table, ``namespace.table`` (e.g. ``shop.orders``)
    :param min_ts: the TSO the table's cut must reach
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param poll_interval: seconds between two checks
    """

    def __init__(self, table: str, min_ts: int, lakehouse_conn_id: str = "lakehouse_default",
                 config_file: Optional[str] = None, poll_interval: float = DEFAULT_POLL_SECONDS) -> None:
        super().__init__(lakehouse_conn_id, config_file, poll_interval)
        self.table = table
        self.min_ts = int(min_ts)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.TableCutTrigger", {"table": self.table, "min_ts": self.min_ts, **self.common_kwargs()})

    def check(self) -> dict[str, Any]:
        return {"table": self.table, "resolved_ts": self.hook().table_watermark(self.table), "min_ts": self.min_ts}

    def done(self, state: dict[str, Any]) -> bool:
        return state["resolved_ts"] >= self.min_ts

    def failure(self, exc: Exception) -> dict[str, Any]:
        return {"table": self.table, "message": f"reading the cut of {self.table}: {type(exc).__name__}: {exc}"}
