"""``TableCutSensor``: wait until a lake table is consistent up to a moment, without holding a worker slot.

A downstream DAG that needs "``shop.orders`` complete up to the end of my interval" puts this sensor first. The
table's cut is its watermark (``tidb.resolved-ts``, see ``hooks.lakehouse.table_watermark``): every upstream change
committed at or before it is in the table. Deferrable by default: after one check in the worker, the wait moves
to the triggerer (``triggers.table_cut.TableCutTrigger``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Optional, Sequence

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from lakehouse_airflow.operators.base import LakehouseBaseOperator
from lakehouse_airflow.triggers.base import DEFAULT_POLL_SECONDS
from lakehouse_airflow.triggers.table_cut import TableCutTrigger


def target_tso(min_ts: Any, min_time: Any) -> int:
    """The TSO to wait for: ``min_ts`` as given, else the TSO of ``min_time`` (a datetime or ISO-8601 text;
    without a zone it is UTC)."""
    from ticdc_lakehouse.commands.timetravel import datetime_to_tso

    if min_ts not in (None, "", "None"):
        return int(min_ts)
    if min_time in (None, "", "None"):
        raise AirflowException("TableCutSensor needs min_ts (a TSO) or min_time (e.g. '{{ data_interval_end }}')")
    moment = min_time if isinstance(min_time, datetime) else datetime.fromisoformat(str(min_time))
    return datetime_to_tso(moment)


class TableCutSensor(LakehouseBaseOperator, BaseSensorOperator):
    """Done when lake table ``table`` is consistent up to ``min_ts`` (or the moment ``min_time``).

    XCom: ``{"table", "resolved_ts", "min_ts", "deferred"}`` (``deferred``: whether it had to wait in the triggerer).

    :param table: the lake table, ``namespace.table`` (e.g. ``shop.orders``)
    :param min_ts: the TSO the table's cut must reach (templated)
    :param min_time: instead of ``min_ts``: the upstream moment, a datetime or ISO-8601 text (templated, e.g.
        ``"{{ data_interval_end }}"``)
    :param deferrable: wait in the triggerer (default) instead of poking from a worker slot
    :param poll_interval: seconds between two checks
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    """

    template_fields: Sequence[str] = ("table", "min_ts", "min_time")
    ui_color = "#fff8dc"

    def __init__(self, *, table: str, min_ts: Optional[int | str] = None, min_time: Any = None,
                 deferrable: bool = True, poll_interval: float = DEFAULT_POLL_SECONDS, **kwargs: Any) -> None:
        super().__init__(poke_interval=poll_interval, **kwargs)
        self.table = table
        self.min_ts = min_ts
        self.min_time = min_time
        self.deferrable = deferrable

    def _watermark(self) -> int:
        return self.lakehouse_hook().table_watermark(self.table)

    def poke(self, context) -> bool:
        watermark = self._watermark()
        self.log.info("%s is consistent up to %s (need %s)", self.table, watermark,
                      target_tso(self.min_ts, self.min_time))
        return watermark >= target_tso(self.min_ts, self.min_time)

    def execute(self, context) -> dict[str, Any]:
        wanted = target_tso(self.min_ts, self.min_time)
        if not self.deferrable:
            super().execute(context)
            return {"table": self.table, "resolved_ts": self._watermark(), "min_ts": wanted, "deferred": False}
        watermark = self._watermark()
        if watermark >= wanted:
            return {"table": self.table, "resolved_ts": watermark, "min_ts": wanted, "deferred": False}
        self.log.info("%s is consistent up to %s; deferring until it reaches %s", self.table, watermark, wanted)
        self.defer(
            trigger=TableCutTrigger(self.table, wanted, self.lakehouse_conn_id, self.config_file, self.poke_interval),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "done":
            raise AirflowException(event.get("message") or f"waiting for the cut of {self.table} failed: {event}")
        self.log.info("%s is consistent up to %s (needed %s)", self.table, event["resolved_ts"], event["min_ts"])
        return {"table": event["table"], "resolved_ts": event["resolved_ts"], "min_ts": event["min_ts"], "deferred": True}
