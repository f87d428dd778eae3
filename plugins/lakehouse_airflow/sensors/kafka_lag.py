"""``KafkaLagSensor``: wait until a changefeed has new records in Kafka that have not landed yet -- or, with
``max_lag``, until the landing has caught up with Kafka.

Why: a cycle on a quiet changefeed still pays a Spark session; a ``KafkaLagSensor`` in front of the landing task
(``soft_fail=True``, ``mode="reschedule"``) skips the cycle instead. TiCDC sends resolved events continuously, so
on a live changefeed it passes at once -- it is for changefeeds that are paused or idle. With ``max_lag`` it
gates the other way: a downstream step that needs everything in Kafka landed waits until at most ``max_lag``
records are left. The lag is computed like the landing does (``hooks.lakehouse.kafka_lag``). With
``deferrable=True`` the wait runs in the triggerer (``triggers.kafka_lag.KafkaLagTrigger``), no worker slot held.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from lakehouse_airflow.operators.base import LakehouseBaseOperator
from lakehouse_airflow.triggers.kafka_lag import KafkaLagTrigger, lag_condition_met


class KafkaLagSensor(LakehouseBaseOperator, BaseSensorOperator):
    """Done when the changefeed has at least ``min_records`` records in Kafka not landed yet (or, with
    ``max_lag``, at most ``max_lag``).

    XCom: ``{"changefeed", "lag", "partitions": {"topic/partition": lag}}``, deferrable: plus ``"deferred"``
    (whether it had to wait in the triggerer).

    :param changefeed: the changefeed (templated; default: the only or first configured one)
    :param min_records: how many records must be waiting
    :param max_lag: instead of ``min_records``: done once at most this many records wait (0: the landing caught up)
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param kafka_timeout_s: seconds Kafka gets to answer one metadata/offset request
    :param deferrable: wait in the triggerer (``KafkaLagTrigger``) instead of a worker slot
    """

    template_fields = ("changefeed",)
    ui_color = "#fff8dc"

    def __init__(self, *, min_records: int = 1, max_lag: Optional[int] = None,
                 kafka_timeout_s: float = 10.0, deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.min_records = min_records
        self.max_lag = max_lag
        self.kafka_timeout_s = kafka_timeout_s

    def _wanted(self) -> str:
        return f"at most {self.max_lag}" if self.max_lag is not None else f"at least {self.min_records}"

    def poke(self, context) -> PokeReturnValue:
        state = self.lakehouse_hook().kafka_lag(self.changefeed, self.kafka_timeout_s)
        self.log.info("changefeed %s: %s record(s) in Kafka not landed yet (waiting for %s)", state["changefeed"],
                      state["lag"], self._wanted())
        return PokeReturnValue(is_done=lag_condition_met(state["lag"], self.min_records, self.max_lag),
                               xcom_value=state)

    def execute(self, context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return {**first.xcom_value, "deferred": False}
        self.log.info("deferring to the triggerer until %s record(s) wait", self._wanted())
        self.defer(
            trigger=KafkaLagTrigger(self.changefeed or None, self.min_records, self.lakehouse_conn_id,
                                    self.config_file, self.kafka_timeout_s, self.poke_interval, self.max_lag),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "done":
            raise AirflowException(event.get("message") or f"waiting for Kafka lag failed: {event}")
        self.log.info("changefeed %s: %s record(s) not landed (waited for %s in the triggerer)", event["changefeed"],
                      event["lag"], self._wanted())
        return {"changefeed": event["changefeed"], "lag": event["lag"], "partitions": event["partitions"],
                "deferred": True}
