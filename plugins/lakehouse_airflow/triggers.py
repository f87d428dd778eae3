"""Triggers: wait in Airflow's triggerer (no worker slot held) for a lake table's cut or for Kafka lag.

Why: a sensor that waits for "``shop.orders`` is consistent up to the end of this interval" or "the changefeed has
new records" can wait for hours; poking holds a worker slot, rescheduling re-runs a task each time. A deferred
sensor hands the wait to one of these triggers, whose checks are cheap and run off the event loop:

- a table's cut is read from its Iceberg metadata with pyiceberg (the watermark ``tidb.resolved-ts`` in the
  summary of the newest snapshot that has one), no Spark;
- Kafka lag is the same computation as ``KafkaLagSensor`` (high watermark minus the landed end).

Each trigger fires one event: ``{"status": "done", ...}`` when the condition holds, ``{"status": "error",
"message": ...}`` when the check itself fails (the sensor then fails with that message).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Optional

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: seconds between two checks
DEFAULT_POLL_SECONDS = 30.0


def _settings(lakehouse_conn_id: str, config_file: Optional[str], changefeed: Optional[str]):
    from lakehouse_airflow.hooks import LakehouseHook

    return LakehouseHook(lakehouse_conn_id, config_file).get_settings(changefeed)


def table_watermark(settings, table: str) -> int:
    """The greatest upstream commit ts (TSO) applied to lake table ``namespace.table`` (0: none yet).

    Read with pyiceberg from the catalog both share; maintenance snapshots carry no watermark, so the ancestry is
    walked back to the newest snapshot that has one (as ``iceberg.java_api.watermark_of`` does in the JVM)."""
    from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY
    from ticdc_lakehouse.spark_session import pyiceberg_catalog

    metadata = pyiceberg_catalog(settings).load_table(table).metadata
    snapshot = metadata.current_snapshot()
    while snapshot is not None:
        value = snapshot.summary.get(RESOLVED_TS_PROPERTY) if snapshot.summary is not None else None
        if value:
            return int(value)
        snapshot = (metadata.snapshot_by_id(snapshot.parent_snapshot_id)
                    if snapshot.parent_snapshot_id is not None else None)
    return 0


class TableCutTrigger(BaseTrigger):
    """Fires when lake table ``table`` is consistent up to at least ``min_ts`` (a TSO).

    :param table: the lake table, ``namespace.table`` (e.g. ``shop.orders``)
    :param min_ts: the TSO the table's cut must reach
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param poll_interval: seconds between two checks
    """

    def __init__(self, table: str, min_ts: int, lakehouse_conn_id: str = "lakehouse_default",
                 config_file: Optional[str] = None, poll_interval: float = DEFAULT_POLL_SECONDS) -> None:
        super().__init__()
        self.table = table
        self.min_ts = int(min_ts)
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("lakehouse_airflow.triggers.TableCutTrigger", {
            "table": self.table, "min_ts": self.min_ts, "lakehouse_conn_id": self.lakehouse_conn_id,
            "config_file": self.config_file, "poll_interval": self.poll_interval})

    def check(self) -> int:
        return table_watermark(_settings(self.lakehouse_conn_id, self.config_file, None), self.table)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                watermark = await asyncio.to_thread(self.check)
            except Exception as exc:  # noqa: BLE001 - reported to the sensor, which fails with it
                yield TriggerEvent({"status": "error", "table": self.table,
                                    "message": f"reading the cut of {self.table}: {type(exc).__name__}: {exc}"})
                return
            if watermark >= self.min_ts:
                yield TriggerEvent({"status": "done", "table": self.table, "resolved_ts": watermark,
                                    "min_ts": self.min_ts})
                return
            self.log.info("%s is consistent up to %s; waiting for %s", self.table, watermark, self.min_ts)
            await asyncio.sleep(self.poll_interval)


class KafkaLagTrigger(BaseTrigger):
    """Fires when the changefeed has at least ``min_records`` records in Kafka that have not landed yet.

    :param changefeed: the changefeed (default: the only or first configured one)
    :param min_records: how many records must be waiting
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param kafka_timeout_s: seconds Kafka gets to answer one metadata/offset request
    :param poll_interval: seconds between two checks
    """

    def __init__(self, changefeed: Optional[str] = None, min_records: int = 1,
                 lakehouse_conn_id: str = "lakehouse_default", config_file: Optional[str] = None,
                 kafka_timeout_s: float = 10.0, poll_interval: float = DEFAULT_POLL_SECONDS) -> None:
        super().__init__()
        self.changefeed = changefeed
        self.min_records = int(min_records)
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file
        self.kafka_timeout_s = float(kafka_timeout_s)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("lakehouse_airflow.triggers.KafkaLagTrigger", {
            "changefeed": self.changefeed, "min_records": self.min_records,
            "lakehouse_conn_id": self.lakehouse_conn_id, "config_file": self.config_file,
            "kafka_timeout_s": self.kafka_timeout_s, "poll_interval": self.poll_interval})

    def check(self) -> dict[str, Any]:
        from lakehouse_airflow.sensors import kafka_lag

        settings = _settings(self.lakehouse_conn_id, self.config_file, self.changefeed)
        cf = settings.changefeed(self.changefeed)
        partitions = kafka_lag(cf, settings.landing_path, self.kafka_timeout_s)
        return {"changefeed": cf.name, "lag": sum(partitions.values()), "partitions": partitions}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                state = await asyncio.to_thread(self.check)
            except Exception as exc:  # noqa: BLE001 - reported to the sensor, which fails with it
                yield TriggerEvent({"status": "error", "message": f"Kafka lag of changefeed {self.changefeed}: "
                                                                  f"{type(exc).__name__}: {exc}"})
                return
            if state["lag"] >= self.min_records:
                yield TriggerEvent({"status": "done", **state})
                return
            self.log.info("changefeed %s: %s record(s) waiting in Kafka (need %s)", state["changefeed"],
                          state["lag"], self.min_records)
            await asyncio.sleep(self.poll_interval)
