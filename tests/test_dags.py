"""The DAG files, as Airflow's own DagBag loads them: no import errors, the task structure and the settings
(schedule, retries with backoff, max_active_runs, pools, params) that the lakehouse config asks for."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

from tests.airflow_fixture import DAGS, PLUGINS, REPO, dag_bag

pytestmark = pytest.mark.airflow

TWO_CHANGEFEEDS = """
[airflow]
schedule = "*/5 * * * *"
retries = 5
retry_delay_seconds = 30

[maintenance]
schedule = "@weekly"

[changefeeds.orders]
protocol = "open"
topics = ["tidb-orders-a", "tidb-orders-b"]
bootstrap_servers = "kafka-1:9092"

[changefeeds.users-eu]
protocol = "canal-json"
topics = ["tidb-users"]
"""


@pytest.fixture
def configured(tmp_path, monkeypatch):
    """Point the lakehouse config at a TOML file written by the test."""

    def write(text: str):
        path = tmp_path / "lakehouse.toml"
        path.write_text(textwrap.dedent(text))
        monkeypatch.setenv("LAKEHOUSE_CONFIG", str(path))
        monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "home"))
        for var in ("LAKEHOUSE__AIRFLOW__RETRIES", "LAKEHOUSE__SPARK__SUBMIT"):
            monkeypatch.delenv(var, raising=False)
        return path

    return write


def test_default_config_gives_one_changefeed_dag_plus_backfill_and_maintenance(configured):
    configured("")
    bag = dag_bag()
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["lakehouse_backfill", "lakehouse_default", "lakehouse_maintenance"]
    dag = bag.dags["lakehouse_default"]
    assert dag.schedule == "*/10 * * * *"
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    merge = dag.get_task("merge")
    assert merge.retries == 3
    assert merge.retry_delay == timedelta(seconds=60)
    assert merge.retry_exponential_backoff > 1
    assert merge.pool == "lakehouse_merge_default"


def test_one_dag_per_configured_changefeed_with_conf_schedule_and_retries(configured):
    configured(TWO_CHANGEFEEDS)
    bag = dag_bag()
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["lakehouse_backfill", "lakehouse_maintenance", "lakehouse_orders",
                                   "lakehouse_users-eu"]
    for dag_id, changefeed in (("lakehouse_orders", "orders"), ("lakehouse_users-eu", "users-eu")):
        dag = bag.dags[dag_id]
        assert dag.schedule == "*/5 * * * *"
        assert dag.max_active_runs == 1
        assert dag.catchup is False
        assert {t.task_id for t in dag.tasks} == {"land", "merge", "publish"}
        land, merge, publish = dag.get_task("land"), dag.get_task("merge"), dag.get_task("publish")
        assert land.downstream_task_ids == {"merge"}
        assert merge.downstream_task_ids == {"publish"}
        assert publish.downstream_task_ids == set()
        for task in (land, merge):
            assert task.retries == 5
            assert task.retry_delay == timedelta(seconds=30)
            assert task.retry_exponential_backoff == 2.0
            assert task.max_retry_delay is not None
        assert publish.retries == 0  # a halt is not fixed by retrying
        assert merge.pool == f"lakehouse_merge_{changefeed}"
        assert merge.changefeed == changefeed
        assert [getattr(a, "uri", None) for a in publish.outlets] == [f"lakehouse://changefeeds/{changefeed}", None]
        assert publish.outlets[1].name == f"lakehouse_{changefeed}_tables"  # the per-table asset events' alias
    # landing is mapped, one task per topic, one at a time (the landing lock is per changefeed)
    land = bag.dags["lakehouse_orders"].get_task("land")
    assert land.expand_input.value["topics"] == [["tidb-orders-a"], ["tidb-orders-b"]]
    assert land.partial_kwargs["max_active_tis_per_dagrun"] == 1

    maintenance = bag.dags["lakehouse_maintenance"]
    assert maintenance.schedule == "@weekly"
    assert maintenance.max_active_runs == 1
    pools = {t.task_id: t.pool for t in maintenance.tasks}
    assert pools == {"maintain_orders": "lakehouse_merge_orders", "maintain_users-eu": "lakehouse_merge_users-eu"}
    assert maintenance.params["dry_run"] is False


def test_backfill_dag_is_manual_with_params(configured):
    configured(TWO_CHANGEFEEDS)
    dag = dag_bag().dags["lakehouse_backfill"]
    assert dag.schedule is None
    assert dag.max_active_runs == 1
    assert dag.render_template_as_native_obj is True
    params = dag.params
    assert set(params.keys()) == {"archive", "changefeed", "protocol", "stop_ts"}
    assert params["changefeed"] == "orders"  # the first configured changefeed
    assert params["protocol"] is None and params["stop_ts"] is None
    assert "open" in params.get_param("protocol").schema["enum"]
    with pytest.raises(Exception):
        params.get_param("archive").resolve()  # required: no default
    land, merge, publish = dag.get_task("land_archive"), dag.get_task("merge"), dag.get_task("publish")
    assert land.downstream_task_ids == {"merge", "publish"}
    assert merge.trigger_rule == "all_done"  # merge what landed even after a corrupt batch
    assert publish.upstream_task_ids == {"land_archive", "merge"}  # ... but the run still fails
    assert land.archive == "{{ params.archive }}"
    assert merge.stop_ts == "{{ params.stop_ts }}"


def test_spark_submit_mode_merges_through_the_spark_provider(configured):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    configured('[spark]\nsubmit = "spark-submit"\nmaster = "spark://spark-master:7077"\n')
    bag = dag_bag()
    assert bag.import_errors == {}
    merge = bag.dags["lakehouse_default"].get_task("merge")
    assert isinstance(merge, SparkSubmitOperator)
    assert merge.application == str(REPO / "spark_jobs" / "merge_job.py")


def test_merge_pools_can_be_turned_off(configured):
    configured("[airflow]\nmerge_pools = false\n")
    bag = dag_bag()
    assert bag.dags["lakehouse_default"].get_task("merge").pool == "default_pool"


def test_broken_config_is_an_import_error_not_a_silent_default(configured, monkeypatch, tmp_path):
    configured("")
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(tmp_path / "missing.toml"))
    bag = dag_bag()
    assert any("missing.toml" in error for error in bag.import_errors.values())


def test_parsing_the_dags_imports_nothing_heavy(configured, tmp_path):
    """The dag-processor parses these files often: no pyspark, py4j or confluent_kafka at import."""
    configured(TWO_CHANGEFEEDS)
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(REPO)!r})
        from tests.airflow_fixture import dag_bag
        bag = dag_bag()
        heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'confluent_kafka'))
        print(json.dumps({{"errors": bag.import_errors, "dags": sorted(bag.dag_ids), "heavy": heavy}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["errors"] == {}
    assert len(report["dags"]) == 4
    assert report["heavy"] == []


def test_plugins_folder_is_not_imported_file_by_file():
    """Airflow imports each .py of the plugins folder as a top-level module; .airflowignore keeps ours out."""
    from airflow._shared.module_loading.file_discovery import find_path_from_directory

    assert [p for p in find_path_from_directory(str(PLUGINS), ".airflowignore") if p.endswith(".py")] == []
    assert DAGS.is_dir()
