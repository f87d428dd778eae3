"""End-to-end ``dag.test()`` runs of the DAGs: the scheduled cycle against a real Kafka-protocol broker, the
backfill of an archive, and maintenance -- each checked by reading the Iceberg tables with Spark SQL.

Tasks run in-process (``dag.test()`` without an executor), so the merge reuses this session's Spark JVM
(``get_spark`` registers each deployment's catalog in the running session).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.airflow_fixture import airflow_db, dag_bag, ensure_pools  # noqa: F401  (fixture)
from tests.broker_fixture import create_topic, kafka_broker, produce, unique_topic  # noqa: F401  (fixture)

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.broker]

TRANSACTIONS = 8


def lake_json(spark, settings, workload, ts: int, version: str | None = None) -> dict[str, list[dict]]:
    """Every upstream table at ``ts`` as the lake shows it (``lakehouse sql --format json`` values)."""
    from ticdc_lakehouse.commands.output import json_value
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    use_catalog(spark, settings)  # a spark-submit merge ran in another JVM: register the catalog here too
    catalog = settings.catalog_name

    result = {}
    for table in workload.state_at(ts).values():
        columns = [c.name for c in table.columns]
        select = ", ".join(f"`{c}`" for c in columns)
        order = ", ".join(f"`{k}`" for k in table.primary_key)
        at = f" VERSION AS OF '{version}'" if version else ""
        rows = spark.sql(f"SELECT {select} FROM `{catalog}`.`{table.schema}`.`{table.name}`{at} ORDER BY {order}")
        result[f"{table.schema}.{table.name}"] = [
            {c: json_value(v) for c, v in zip(columns, row)} for row in rows.collect()
        ]
    return result


def task_times(dagrun) -> dict[str, float]:
    return {ti.task_id: (ti.end_date - ti.start_date).total_seconds() for ti in dagrun.get_task_instances()
            if ti.start_date and ti.end_date}


def task_states(dagrun) -> dict[str, str]:
    return {
        ti.task_id + (f"[{ti.map_index}]" if ti.map_index >= 0 else ""): str(ti.state)
        for ti in dagrun.get_task_instances()
    }


def xcom(dagrun, task_id: str, key: str = "return_value", map_index: int = -1):
    ti = dagrun.get_task_instance(task_id, map_index=map_index)
    return ti.xcom_pull(task_ids=task_id, key=key, map_indexes=map_index)


def deploy(root: Path, monkeypatch, catalog: str, toml: str = "", spark: str = ""):
    """A fresh deployment under ``root`` whose config file is referenced by LAKEHOUSE_CONFIG."""
    from ticdc_lakehouse.runtime.config import load_settings

    config = root / "lakehouse.toml"
    config.write_text("\n".join([
        "[catalog]", f'name = "{catalog}"',
        "[spark]", "shuffle_partitions = 2", textwrap.dedent(spark),
        "[airflow]", "retries = 0",
        textwrap.dedent(toml),
    ]))
    monkeypatch.setenv("LAKEHOUSE_HOME", str(root / "home"))
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
    monkeypatch.delenv("LAKEHOUSE__CATALOG__NAME", raising=False)
    settings = load_settings()
    ensure_pools(settings)
    return settings


@pytest.fixture(scope="module")
def scheduled_run(tmp_path_factory, kafka_broker, spark_session, airflow_db):  # noqa: F811
    """Produce a TiCDC workload (Open Protocol) to a topic and run the changefeed's scheduled DAG once."""
    from ticdc_lakehouse.sim.workload import Workload, encode_partitions

    workload = Workload(seed=11, partitions=3)
    workload.run_script(transactions=TRANSACTIONS)
    topic = create_topic(kafka_broker, unique_topic("dagrun"), partitions=3)
    for partition, records in encode_partitions(workload.new_events(), "open").items():
        produce(kafka_broker, topic, [(key, value, None, partition) for key, value, _h, _ts in records])
    with pytest.MonkeyPatch.context() as monkeypatch:
        settings = deploy(tmp_path_factory.mktemp("scheduled"), monkeypatch, "lake_dag_scheduled", f"""
            [changefeeds.shop]
            protocol = "open"
            topics = ["{topic}"]
            bootstrap_servers = "{kafka_broker}"
        """)
        bag = dag_bag()
        assert bag.import_errors == {}
        dagrun = bag.dags["lakehouse_shop"].test()
        yield settings, workload, dagrun, bag, topic


def test_scheduled_dag_lands_and_merges_into_iceberg(scheduled_run, spark_session):
    settings, workload, dagrun, _, topic = scheduled_run
    print("task seconds", task_times(dagrun))
    assert task_states(dagrun) == {"land[0]": "success", "merge": "success", "publish": "success"}
    assert str(dagrun.state) == "success"
    cut = workload.global_resolved_ts()
    assert lake_json(spark_session, settings, workload, cut) == workload.expected_json(cut)

    merged = xcom(dagrun, "merge")
    assert merged["ok"] is True and merged["merge"]["resolved_ts"] == cut
    metrics = xcom(dagrun, "publish")
    assert metrics["resolved_ts"] == cut and metrics["new_cut"] is True
    assert metrics["tag"] == f"tso_{cut}"
    assert metrics["halted_tables"] == [] and metrics["dead_letters"] == 0
    landed = xcom(dagrun, "land", map_index=0)
    assert dagrun.get_task_instance("land", map_index=0).rendered_map_index == topic  # one mapped task per topic
    assert landed["landing"]["records"] == sum(len(events) for events in workload.sent.values())


def test_maintenance_dag_keeps_data_and_tagged_cuts_readable(scheduled_run, spark_session):
    settings, workload, _, bag, _ = scheduled_run
    dagrun = bag.dags["lakehouse_maintenance"].test()
    print("task seconds", task_times(dagrun))
    assert task_states(dagrun) == {"maintain_shop": "success"}
    cut = workload.global_resolved_ts()
    expected = workload.expected_json(cut)
    assert lake_json(spark_session, settings, workload, cut) == expected
    assert lake_json(spark_session, settings, workload, cut, version=f"tso_{cut}") == expected


def test_backfill_dag_lands_an_archive_and_merges_it(tmp_path, monkeypatch, spark_session, airflow_db):  # noqa: F811
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=5, partitions=2)
    workload.run_script(transactions=TRANSACTIONS)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "tidb-shop", "open")
    # the spark-submit path: the merge runs in a job of its own (merge_job.py), the result comes back as XCom
    settings = deploy(tmp_path, monkeypatch, "lake_dag_backfill",
                      spark='submit = "spark-submit"\nmaster = "local[2]"\ndriver_memory = "1g"')
    bag = dag_bag()
    assert bag.import_errors == {}
    dagrun = bag.dags["lakehouse_backfill"].test(
        run_conf={"archive": str(archive), "changefeed": "shop", "protocol": "open"})
    print("task seconds", task_times(dagrun))
    assert task_states(dagrun) == {"land_archive": "success", "merge": "success", "publish": "success"}
    cut = workload.global_resolved_ts()
    assert lake_json(spark_session, settings, workload, cut) == workload.expected_json(cut)
    assert xcom(dagrun, "merge")["merge"]["resolved_ts"] == cut
    assert xcom(dagrun, "publish")["tag"] == f"tso_{cut}"
