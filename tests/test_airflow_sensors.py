"""``KafkaLagSensor`` in real ``dag.test()`` runs against the live broker fixture: with ``max_lag`` it waits while
records sit in Kafka unlanded and succeeds once the landing caught up; deferrable, the wait is handed to
``KafkaLagTrigger`` (run by ``dag.test()`` as the triggerer would) and no worker slot is held."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from tests.airflow_fixture import airflow_db, sync_dag  # noqa: F401  (fixture)
from tests.broker_fixture import create_topic, kafka_broker, produce, unique_topic  # noqa: F401  (fixture)
from tests.test_dag_runs import task_states, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.broker]

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
LAND_AFTER_S = 6


def unlanded_changefeed(kafka_broker: str, tmp_path, monkeypatch) -> str:
    """Changefeed ``cf`` (config file and home under ``tmp_path``) over a fresh two-partition topic with 5
    records produced, none landed; returns the topic."""
    topic = create_topic(kafka_broker, unique_topic("lag"), partitions=2)
    produce(kafka_broker, topic, [(b"k", b"v%d" % i, None, i % 2) for i in range(5)])
    config = tmp_path / "lakehouse.toml"
    config.write_text(f'[changefeeds.cf]\ntopics = ["{topic}"]\nbootstrap_servers = "{kafka_broker}"\n')
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
    return topic


@pytest.fixture()
def changefeed(kafka_broker, tmp_path, monkeypatch):  # noqa: F811
    return unlanded_changefeed(kafka_broker, tmp_path, monkeypatch)


def _run_landing_later(dag) -> tuple[object, float]:
    """``dag.test()`` while another thread lands the changefeed ``LAND_AFTER_S`` seconds in: (run, seconds)."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.commands.pipeline import land

    def land_later() -> None:
        time.sleep(LAND_AFTER_S)
        land(load_settings(), "cf")

    lander = threading.Thread(target=land_later)
    started = time.monotonic()
    lander.start()
    dagrun = dag.test()
    lander.join()
    return dagrun, time.monotonic() - started


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_kafka_lag_sensor_waits_until_the_landing_caught_up(changefeed, airflow_db, deferrable):  # noqa: F811
    from airflow.sdk import DAG

    from lakehouse_airflow.sensors.kafka_lag import KafkaLagSensor

    with DAG(f"caught_up_{'deferred' if deferrable else 'poke'}", schedule=None, start_date=START) as dag:
        KafkaLagSensor(task_id="caught_up", changefeed="cf", max_lag=0, deferrable=deferrable, poke_interval=1,
                       timeout=120)
    sync_dag(dag)
    dagrun, seconds = _run_landing_later(dag)
    assert task_states(dagrun) == {"caught_up": "success"}
    assert seconds >= LAND_AFTER_S  # it waited while 5 records were unlanded
    result = xcom(dagrun, "caught_up")
    assert result["lag"] == 0 and result["partitions"] == {f"{changefeed}/0": 0, f"{changefeed}/1": 0}
    if deferrable:  # the wait ran in KafkaLagTrigger, and the sensor resumed from its event
        assert result["deferred"] is True


def test_deferrable_kafka_lag_sensor_passes_at_once_when_records_wait(changefeed, airflow_db):  # noqa: F811
    from airflow.sdk import DAG

    from lakehouse_airflow.sensors.kafka_lag import KafkaLagSensor

    with DAG("records_waiting", schedule=None, start_date=START) as dag:
        KafkaLagSensor(task_id="waiting", changefeed="cf", min_records=5, deferrable=True, poke_interval=1)
    sync_dag(dag)
    dagrun = dag.test()
    assert task_states(dagrun) == {"waiting": "success"}
    assert xcom(dagrun, "waiting") == {"changefeed": "cf", "lag": 5, "deferred": False,
                                       "partitions": {f"{changefeed}/0": 3, f"{changefeed}/1": 2}}
