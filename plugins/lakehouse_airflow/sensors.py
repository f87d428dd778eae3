"""Sensors: wait until a changefeed has new records in Kafka that have not landed yet.

Why: a cycle on a quiet changefeed still pays a Spark session; a ``KafkaLagSensor`` in front of the landing task
(``soft_fail=True``, ``mode="reschedule"``) skips the cycle instead. TiCDC sends resolved events continuously, so
on a live changefeed it passes at once -- it is for changefeeds that are paused or idle. The lag is computed
like the landing does: Kafka's high watermark minus the landed end (or the low watermark when nothing landed).
With ``deferrable=True`` the wait runs in the triggerer (``triggers.KafkaLagTrigger``) and holds no worker slot.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional, Sequence

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from lakehouse_airflow.hooks import LakehouseHook


def kafka_lag(changefeed, landing_root, timeout_s: float = 10.0,
              topics: Optional[Sequence[str]] = None) -> dict[str, int]:
    """``"topic/partition" -> records in Kafka not landed yet`` for the changefeed's topics."""
    from confluent_kafka import Consumer, TopicPartition

    from ticdc_lakehouse.landing.kafka_source import ClientLog, consumer_config, plan_partition
    from ticdc_lakehouse.landing.segments import landed_end

    config = consumer_config(changefeed)
    config["logger"] = ClientLog()  # a down broker: not a thousand librdkafka lines in the task log
    consumer = Consumer(config)
    try:
        lag: dict[str, int] = {}
        for topic in topics or changefeed.topics:
            info = consumer.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise RuntimeError(f"topic {topic!r} of changefeed {changefeed.name!r} is not available: "
                                   f"{info.error if info is not None and info.error else 'no partitions'}")
            for partition in sorted(info.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s,
                                                           cached=False)
                plan = plan_partition(topic, partition, low, high,
                                      landed_end(landing_root, changefeed.name, topic, partition))
                lag[f"{topic}/{partition}"] = max(plan.high - plan.start, 0)
        return lag
    finally:
        consumer.close()


class KafkaLagSensor(BaseSensorOperator):
    """Done when the changefeed has at least ``min_records`` records in Kafka not landed yet.

    XCom: ``{"changefeed", "lag", "partitions": {"topic/partition": lag}}``.

    :param changefeed: the changefeed (default: the only or first configured one)
    :param min_records: how many records must be waiting
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param kafka_timeout_s: seconds Kafka gets to answer one metadata/offset request
    :param deferrable: wait in the triggerer (``KafkaLagTrigger``) instead of a worker slot
    """

    template_fields = ("changefeed",)
    ui_color = "#fff8dc"

    def __init__(self, *, changefeed: Optional[str] = None, min_records: int = 1,
                 lakehouse_conn_id: str = LakehouseHook.default_conn_name, config_file: Optional[str] = None,
                 kafka_timeout_s: float = 10.0, deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.changefeed = changefeed
        self.min_records = min_records
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file
        self.kafka_timeout_s = kafka_timeout_s

    def poke(self, context) -> PokeReturnValue:
        settings = LakehouseHook(self.lakehouse_conn_id, self.config_file).get_settings(self.changefeed or None)
        cf = settings.changefeed(self.changefeed or None)
        partitions = kafka_lag(cf, settings.landing_path, self.kafka_timeout_s)
        total = sum(partitions.values())
        self.log.info("changefeed %s: %s record(s) in Kafka not landed yet (need %s)", cf.name, total,
                      self.min_records)
        return PokeReturnValue(is_done=total >= self.min_records,
                               xcom_value={"changefeed": cf.name, "lag": total, "partitions": partitions})

    def execute(self, context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        from lakehouse_airflow.triggers import KafkaLagTrigger

        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=KafkaLagTrigger(self.changefeed or None, self.min_records, self.lakehouse_conn_id, self.config_file,
                                    self.kafka_timeout_s, self.poke_interval),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "done":
            raise AirflowException(event.get("message") or f"waiting for Kafka lag failed: {event}")
        return {"changefeed": event["changefeed"], "lag": event["lag"], "partitions": event["partitions"]}
