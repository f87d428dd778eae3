"""Airflow beyond the lakehouse DAGs (real ``dag.test()`` runs): one asset event per changed Iceberg table with
the cut in its extra (a DAG scheduled on ``shop.orders`` is queued), OpenLineage events of the land and merge
tasks (Kafka topics in, Iceberg tables out), and the deferrable ``TableCutSensor`` waiting in a trigger."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from tests.airflow_fixture import airflow_db, dag_bag, lineage_events, sync_dag  # noqa: F401  (fixture)
from tests.test_dag_runs import deploy, task_states, xcom

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

CATALOG = "lake_assets"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _grow(workload, transactions: int) -> None:
    for _ in range(transactions):
        workload.transaction(4)
    workload.resolve(final=True)


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory, spark_session, airflow_db):  # noqa: F811
    """The backfill DAG run once over an archived topic, with a DAG scheduled on ``shop.orders`` deployed."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, Asset

    from lakehouse_airflow.lineage import table_asset_uri
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=17, partitions=2)
    workload.create_sample_tables()
    _grow(workload, 8)
    root = tmp_path_factory.mktemp("assets")
    archive = root / "archive"
    write_to_archive(workload, archive, "tidb-shop", "open")
    with DAG("orders_consumer", schedule=[Asset(table_asset_uri(CATALOG, "shop.orders"))], start_date=START) as dag:
        EmptyOperator(task_id="read_orders")
    sync_dag(dag)
    with pytest.MonkeyPatch.context() as monkeypatch:
        settings = deploy(root, monkeypatch, CATALOG)
        bag = dag_bag()
        assert bag.import_errors == {}
        dagrun = bag.dags["lakehouse_backfill"].test(
            run_conf={"archive": str(archive), "changefeed": "shop", "protocol": "open"})
        yield settings, workload, dagrun, archive, monkeypatch


def _asset_events(uri: str) -> list:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        events = (session.query(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                  .filter(AssetModel.uri == uri).order_by(AssetEvent.id).all())
        return [(e.source_dag_id, e.source_task_id, dict(e.extra or {})) for e in events]


def test_publish_emits_one_asset_event_per_table_with_the_cut(backfilled):
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session

    from lakehouse_airflow.lineage import table_asset_uri

    settings, workload, dagrun, _, _ = backfilled
    assert task_states(dagrun) == {"land_archive": "success", "merge": "success", "publish": "success"}
    cut = workload.global_resolved_ts()
    for table in ("shop.orders", "shop.customers", "shop.order_items"):
        events = _asset_events(table_asset_uri(CATALOG, table))
        assert len(events) == 1, table
        source_dag, source_task, extra = events[0]
        assert (source_dag, source_task) == ("lakehouse_backfill", "publish")
        assert extra["table"] == table and extra["resolved_ts"] == cut and extra["tag"] == f"tso_{cut}"
        assert extra["changefeed"] == "shop" and extra["rows_written"] > 0
        assert extra["cut_time"].startswith(str(datetime.now(timezone.utc).year)[:2])
    merged = xcom(dagrun, "merge")["merge"]["tables"]["shop.orders"]
    assert _asset_events(table_asset_uri(CATALOG, "shop.orders"))[0][2]["events"] == merged["events"]
    with create_session() as session:  # the DAG scheduled on shop.orders is queued to run
        queued = session.query(AssetDagRunQueue).filter(AssetDagRunQueue.target_dag_id == "orders_consumer").all()
    assert len(queued) == 1


def test_land_and_merge_emit_openlineage_kafka_in_iceberg_out(backfilled):
    settings, _, dagrun, _, _ = backfilled
    complete = {}
    for event in lineage_events():
        if event.get("eventType") == "COMPLETE" and event["run"]["facets"].get("airflow", {}).get(
                "dagRun", {}).get("run_id") in (None, dagrun.run_id):
            complete[event["job"]["name"]] = event
    merge = complete["lakehouse_backfill.merge"]
    # the topics the merge read (the archived topic, landed), named as on the changefeed's brokers
    assert [(d["namespace"], d["name"]) for d in merge["inputs"]] == [("kafka://localhost:9092", "tidb-shop")]
    outputs = {d["facets"]["symlinks"]["identifiers"][0]["name"]: d for d in merge["outputs"]}
    assert set(outputs) == {"shop.orders", "shop.customers", "shop.order_items"}
    orders = outputs["shop.orders"]
    assert orders["namespace"] == "file" and orders["name"].endswith("/warehouse/shop/orders")
    assert orders["facets"]["symlinks"]["identifiers"][0] == {
        "namespace": f"iceberg://{CATALOG}", "name": "shop.orders", "type": "TABLE"}
    land = complete["lakehouse_backfill.land_archive"]
    assert [d["name"] for d in land["inputs"]] == ["tidb-shop"]
    assert [d["namespace"] for d in land["outputs"]] == ["file"]


def test_table_cut_sensor_defers_and_completes_when_the_cut_moves(backfilled, spark_session):
    from airflow.sdk import DAG

    from lakehouse_airflow.sensors.table_cut import TableCutSensor
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.sim.workload import write_to_archive

    settings, workload, _, archive, _ = backfilled
    first = workload.global_resolved_ts()
    _grow(workload, 3)
    write_to_archive(workload, archive, "tidb-shop", "open")
    second = workload.global_resolved_ts()
    with DAG("orders_wait", schedule=None, start_date=START) as dag:
        TableCutSensor(task_id="wait", table="shop.orders", min_ts=first + 1, poll_interval=1, timeout=600)
    sync_dag(dag)

    def merge_later() -> None:  # the next merge, a few seconds after the sensor started waiting
        time.sleep(8)
        backfill(settings, archive, "shop", "open", spark=spark_session)

    merger = threading.Thread(target=merge_later)
    merger.start()
    started = time.monotonic()
    dagrun = dag.test()
    merger.join()
    assert task_states(dagrun) == {"wait": "success"}
    assert time.monotonic() - started >= 8
    result = xcom(dagrun, "wait")
    assert result == {"table": "shop.orders", "resolved_ts": second, "min_ts": first + 1, "deferred": True}


def test_table_cut_sensor_passes_at_once_when_the_cut_is_there(backfilled):
    from airflow.sdk import DAG

    from lakehouse_airflow.sensors.table_cut import TableCutSensor

    _, workload, _, _, _ = backfilled
    with DAG("orders_ready", schedule=None, start_date=START) as dag:
        TableCutSensor(task_id="wait", table="shop.orders", min_time="2001-01-01T00:00:00+00:00")
    sync_dag(dag)
    dagrun = dag.test()
    assert task_states(dagrun) == {"wait": "success"}
    assert xcom(dagrun, "wait")["deferred"] is False


def test_triggers_serialize_and_a_kafka_check_that_fails_ends_the_wait_with_its_reason(tmp_path, monkeypatch):
    """The triggerer rebuilds a trigger from ``serialize()``; a broker nobody answers on fails the sensor with the
    reason (a trigger event), not a silent endless wait."""
    import asyncio
    import importlib
    import socket

    from lakehouse_airflow.triggers.kafka_lag import KafkaLagTrigger
    from lakehouse_airflow.triggers.table_cut import TableCutTrigger

    for trigger in (TableCutTrigger("shop.orders", 5, config_file="/c.toml", poll_interval=2),
                    KafkaLagTrigger("shop", 3, config_file="/c.toml", kafka_timeout_s=1, poll_interval=2)):
        path, kwargs = trigger.serialize()
        module, _, name = path.rpartition(".")
        again = getattr(importlib.import_module(module), name)(**kwargs)
        assert again.serialize() == (path, kwargs)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "lakehouse.toml"
    config.write_text(f'[changefeeds.shop]\ntopics = ["t"]\nbootstrap_servers = "127.0.0.1:{port}"\n')
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "home"))

    async def first_event():
        trigger = KafkaLagTrigger("shop", 1, config_file=str(config), kafka_timeout_s=1, poll_interval=1)
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(asyncio.wait_for(first_event(), 60))
    assert payload["status"] == "error" and payload["message"].startswith("Kafka lag of changefeed shop: ")


def test_merge_task_with_a_wrong_protocol_fails_at_once_in_one_line(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from lakehouse_airflow.operators.merge import MergeChangefeedOperator

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    task = MergeChangefeedOperator(task_id="merge", changefeed="shop", protocol="opn")
    with pytest.raises(AirflowFailException) as failure:  # no retries, no Spark session started
        task.execute({})
    assert str(failure.value).startswith("unknown protocol 'opn' (task merge: protocol); use one of ")


def test_tables_changed_only_by_ddl_get_their_asset_event_with_the_cut(backfilled):
    """A run whose only change to a table is a DDL (a table created with no rows, a column added) still emits that
    table's asset event with the cut; a table the run did not touch gets none."""
    from lakehouse_airflow.lineage import table_asset_uri
    from ticdc_lakehouse.sim.workload import write_to_archive

    _, workload, _, archive, _ = backfilled
    orders_before = len(_asset_events(table_asset_uri(CATALOG, "shop.orders")))
    customers_before = len(_asset_events(table_asset_uri(CATALOG, "shop.customers")))
    workload.create_table("audit", [("id", "bigint", False), ("note", "varchar(40)", True)], ("id",))
    workload.add_column("customers", "tier", "int")
    workload.resolve(final=True)
    write_to_archive(workload, archive, "tidb-shop", "open")
    cut = workload.global_resolved_ts()
    dagrun = dag_bag().dags["lakehouse_backfill"].test(
        run_conf={"archive": str(archive), "changefeed": "shop", "protocol": "open"})
    assert task_states(dagrun) == {"land_archive": "success", "merge": "success", "publish": "success"}
    assert xcom(dagrun, "merge")["merge"]["tables_merged"] == []  # no rows in this run
    for table, before in (("shop.audit", 0), ("shop.customers", customers_before)):
        events = _asset_events(table_asset_uri(CATALOG, table))
        assert len(events) == before + 1, table
        extra = events[-1][2]
        assert extra["table"] == table and extra["resolved_ts"] == cut and extra["tag"] == f"tso_{cut}"
        assert extra["ddl"] is True and extra["rows_written"] == 0
    assert len(_asset_events(table_asset_uri(CATALOG, "shop.orders"))) == orders_before
