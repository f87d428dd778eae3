"""``KafkaLagTrigger``: wait in the triggerer for a changefeed's Kafka lag (records in Kafka not landed yet) to
reach ``min_records``, or to fall to ``max_lag`` (the landing caught up); the same computation as
``KafkaLagSensor`` (``hooks.lakehouse.kafka_lag``)."""

from __future__ import annotations

from typing import Any, Optional

from lakehouse_airflow.triggers.base import DEFAULT_POLL_SECONDS, LakehouseTrigger


def lag_condition_met(lag: int, min_records: int, max_lag: Optional[int]) -> bool:
    """With ``max_lag``: the landing caught up (lag at most ``max_lag``); else at least ``min_records`` wait."""
    return lag <= max_lag if max_lag is not None else lag >= min_records


class KafkaLagTrigger(LakehouseTrigger):
    """Fires when the changefeed has at least ``min_records`` records in Kafka that have not landed yet, or, with
    ``max_lag``, when at most ``max_lag`` have not.

    :param changefeed: the changefeed (default: the only or first configured one)
    :param min_records: how many records must be waiting
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param kafka_timeout_s: seconds Kafka gets to answer one metadata/offset request
    :param poll_interval: seconds between two checks
    :param max_lag: instead of ``min_records``: fire once at most this many records wait (0: caught up)
    """

    def __init__(self, changefeed: Optional[str] = None, min_records: int = 1,
                 lakehouse_conn_id: str = "lakehouse_default", config_file: Optional[str] = None,
                 kafka_timeout_s: float = 10.0, poll_interval: float = DEFAULT_POLL_SECONDS,
                 max_lag: Optional[int] = None) -> None:
        super().__init__(lakehouse_conn_id, config_file, poll_interval)
        self.changefeed = changefeed
        self.min_records = int(min_records)
        self.kafka_timeout_s = float(kafka_timeout_s)
        self.max_lag = None if max_lag is None else int(max_lag)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{__name__}.KafkaLagTrigger", {
            "changefeed": self.changefeed, "min_records": self.min_records, "kafka_timeout_s": self.kafka_timeout_s,
            "max_lag": self.max_lag, **self.common_kwargs()})

    def check(self) -> dict[str, Any]:
        return self.hook().kafka_lag(self.changefeed, self.kafka_timeout_s)

    def done(self, state: dict[str, Any]) -> bool:
        return lag_condition_met(state["lag"], self.min_records, self.max_lag)

    def failure(self, exc: Exception) -> dict[str, Any]:
        return {"message": f"Kafka lag of changefeed {self.changefeed}: {type(exc).__name__}: {exc}"}
