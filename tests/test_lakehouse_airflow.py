"""The Airflow package pieces on their own: the hook's settings and secrets, the spark-submit command, the pools,
the publish metrics, the Kafka lag sensor (real broker) and the AIRFLOW_HOME helper."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.airflow_fixture import PLUGINS, REPO
from tests.broker_fixture import kafka_broker  # noqa: F401  (fixture)

pytestmark = pytest.mark.airflow

CATALOG_CONN = json.dumps({"conn_type": "postgres", "host": "pg.internal", "port": 5432, "schema": "iceberg",
                           "login": "lake", "password": "catalog-pw-8d1f",
                           "extra": {"warehouse": "s3a://lake/warehouse"}})
KAFKA_CONN = json.dumps({"conn_type": "kafka", "host": "k1:9093,k2:9093", "login": "cdc",
                         "password": "sasl-pw-77ae",
                         "extra": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}})
REGISTRY_CONN = json.dumps({"conn_type": "http", "host": "registry.internal", "port": 8081, "login": "sr",
                            "password": "registry-pw-31c0"})


@pytest.fixture
def home(tmp_path, monkeypatch):
    config = tmp_path / "lakehouse.toml"
    config.write_text('[changefeeds.orders]\nprotocol = "avro"\ntopics = ["tidb-orders"]\n')
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
    for var in list(os.environ):
        if var.startswith("AIRFLOW_CONN_LAKEHOUSE") or var in ("LAKEHOUSE_CATALOG_PASSWORD", "LAKEHOUSE_CATALOG_URI"):
            monkeypatch.delenv(var)
    return tmp_path


def test_hook_takes_catalog_kafka_and_registry_secrets_from_airflow_connections(home, monkeypatch):
    from lakehouse_airflow.hooks.lakehouse import LakehouseHook

    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE_DEFAULT", CATALOG_CONN)
    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE_KAFKA_ORDERS", KAFKA_CONN)
    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE_SCHEMA_REGISTRY_ORDERS", REGISTRY_CONN)
    settings = LakehouseHook().get_settings("orders")
    assert settings.catalog_uri == "jdbc:postgresql://pg.internal:5432/iceberg"
    assert (settings.catalog_user, settings.catalog_password) == ("lake", "catalog-pw-8d1f")
    assert settings.warehouse == "s3a://lake/warehouse"
    cf = settings.changefeed("orders")
    assert cf.topics == ("tidb-orders",) and cf.protocol == "avro"  # the TOML still applies
    assert cf.bootstrap_servers == "k1:9093,k2:9093"
    assert cf.kafka == {"sasl.username": "cdc", "sasl.password": "sasl-pw-77ae", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512"}
    assert cf.schema_registry_url == "http://registry.internal:8081"
    assert cf.schema_registry["basic.auth.user.info"] == "sr:registry-pw-31c0"
    printed = json.dumps(settings.masked())
    for secret in ("catalog-pw-8d1f", "sasl-pw-77ae", "registry-pw-31c0"):
        assert secret not in printed


def test_hook_registers_every_secret_with_the_log_masker(home, monkeypatch):
    from airflow.sdk._shared.secrets_masker import redact

    from lakehouse_airflow.hooks.lakehouse import LakehouseHook

    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE_KAFKA_ORDERS", KAFKA_CONN)
    monkeypatch.setenv("LAKEHOUSE_CATALOG_PASSWORD", "env-catalog-pw-5e2a")  # secrets from the environment too
    LakehouseHook().get_settings("orders")
    line = "connecting with sasl-pw-77ae and env-catalog-pw-5e2a"
    assert redact(line) == "connecting with *** and ***"


def test_hook_without_connections_is_the_cli_configuration(home):
    from lakehouse_airflow.hooks.lakehouse import LakehouseHook
    from ticdc_lakehouse.runtime.config import load_settings

    assert LakehouseHook().get_settings("orders").raw == load_settings().raw


def test_spark_submit_goes_to_the_configured_master_with_jars_and_no_secret_on_the_command_line(home, monkeypatch):
    from lakehouse_airflow.hooks.spark_submit import LakehouseSparkSubmitHook
    from lakehouse_airflow.hooks.spark_submit import MERGE_JOB, job_environment, submit_arguments, submit_plan
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import iceberg_runtime_jar

    monkeypatch.setenv("LAKEHOUSE_SPARK_MASTER", "spark://spark-master:7077")
    monkeypatch.setenv("LAKEHOUSE_CATALOG_PASSWORD", "never-on-argv-9f0c")
    settings = load_settings()
    plan = submit_plan(settings, "lakehouse-merge-orders")
    overrides = {"LAKEHOUSE_CATALOG_PASSWORD": "never-on-argv-9f0c"}
    hook = LakehouseSparkSubmitHook(
        master=plan["master"], conf=plan["conf"], jars=plan["jars"], driver_class_path=plan["driver_class_path"],
        driver_memory=plan["driver_memory"], name=plan["name"], conn_id="spark_default_missing",
        application_args=submit_arguments(settings, "orders", "avro", 42, "/tmp/result.json"),
        env_vars=job_environment(settings, overrides),
    )
    command = hook._build_spark_submit_command(MERGE_JOB)
    assert command[:3] == ["spark-submit", "--master", "spark://spark-master:7077"]
    assert str(iceberg_runtime_jar()) in command[command.index("--jars") + 1]
    assert f"spark.sql.catalog.{settings.catalog_name}.type=jdbc" in command
    assert command[command.index(MERGE_JOB):] == [MERGE_JOB, "--changefeed", "orders", "--result-file",
                                                  "/tmp/result.json", "--protocol", "avro", "--stop-ts", "42"]
    assert not any("never-on-argv-9f0c" in part for part in command)
    # the secret reaches the driver through its environment (client mode: Popen env)
    assert hook._env["LAKEHOUSE_CATALOG_PASSWORD"] == "never-on-argv-9f0c"
    assert hook._env["LAKEHOUSE_HOME"] == str(settings.home)
    assert hook._env["LAKEHOUSE_CONFIG"] == str(settings.source_file)


def test_merge_pools_one_slot_per_changefeed(home, tmp_path):
    from lakehouse_airflow.pools import pool_definitions
    from ticdc_lakehouse.runtime.config import load_settings

    assert pool_definitions(load_settings()) == {
        "lakehouse_merge_orders": {"slots": 1, "include_deferred": False,
                                   "description": "ticdc-lakehouse: one merge or maintenance of changefeed orders "
                                                  "at a time"},
    }
    out = tmp_path / "pools.json"
    subprocess.run([sys.executable, "-m", "lakehouse_airflow.pools", str(out)], check=True,
                   env={**os.environ, "PYTHONPATH": str(PLUGINS)})
    assert list(json.loads(out.read_text())) == ["lakehouse_merge_orders"]


def test_cut_metrics_tell_new_cut_tag_freshness_and_halts():
    from lakehouse_airflow.operators.publish import cut_metrics

    cut = (1_700_000_000_000 << 18) | 7
    merged = {"ok": False, "merge": {"changefeed": "orders", "run_id": "r1", "protocol": "open",
                                     "previous_resolved_ts": 100, "resolved_ts": cut, "events_read": 50,
                                     "tables_merged": ["shop.orders", "shop.items"], "ddls_applied": ["ALTER"],
                                     "halted": [{"table": "shop.items", "ddl_ts": 5}], "dead_letters": 2,
                                     "pending_tables": [], "seconds": 3.5}}
    metrics = cut_metrics("orders", merged, now=1_700_000_010.0)
    assert metrics["new_cut"] is True and metrics["tag"] == f"tso_{cut}"
    assert metrics["cut_time"] == "2023-11-14T22:13:20+00:00"
    assert metrics["freshness_seconds"] == 10.0
    assert (metrics["tables_merged"], metrics["ddls_applied"], metrics["dead_letters"]) == (2, 1, 2)
    assert metrics["halted_tables"] == ["shop.items"]
    same = cut_metrics("orders", {"merge": {**merged["merge"], "previous_resolved_ts": cut}})
    assert same["new_cut"] is False and same["tag"] is None
    avro = cut_metrics("orders", {"merge": {**merged["merge"], "protocol": "avro"}})
    assert avro["new_cut"] is True and avro["tag"] is None  # no resolved ts, no tag
    assert cut_metrics("orders", {})["resolved_ts"] == 0
    assert metrics["held_partitions"] == []
    held = cut_metrics("orders", {"merge": {**merged["merge"], "held": [{"topic": "t", "partition": 2, "offset": 9}]}})
    assert held["held_partitions"] == ["t/2/9"]  # as lakehouse skip-message takes it


def test_landing_can_be_narrowed_to_one_topic_of_the_changefeed(home):
    from lakehouse_airflow.operators.land import only_topics
    from ticdc_lakehouse.runtime.config import load_settings

    settings = load_settings()
    assert only_topics(settings, "orders", ["tidb-orders"]).changefeed("orders").topics == ("tidb-orders",)
    with pytest.raises(ValueError, match="not part of changefeed"):
        only_topics(settings, "orders", ["other"])


@pytest.mark.broker
def test_kafka_lag_sensor_sees_records_until_they_land(kafka_broker, tmp_path, monkeypatch):  # noqa: F811
    from lakehouse_airflow.sensors.kafka_lag import KafkaLagSensor
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.commands.pipeline import land

    from tests.test_airflow_sensors import unlanded_changefeed

    topic = unlanded_changefeed(kafka_broker, tmp_path, monkeypatch)
    sensor = KafkaLagSensor(task_id="wait", changefeed="cf", min_records=5)
    waiting = sensor.poke({})
    assert waiting.is_done is True
    assert waiting.xcom_value == {"changefeed": "cf", "lag": 5, "partitions": {f"{topic}/0": 3, f"{topic}/1": 2}}
    land(load_settings(), "cf")
    assert sensor.poke({}).is_done is False
    assert sensor.poke({}).xcom_value["lag"] == 0


def test_airflow_env_puts_airflow_home_under_lakehouse_home(tmp_path):
    from lakehouse_airflow.env import airflow_env

    env = airflow_env({"LAKEHOUSE_HOME": str(tmp_path / "lh"), "PATH": "/usr/bin"})
    assert env["AIRFLOW_HOME"] == str(tmp_path / "lh" / "airflow")
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path / 'lh' / 'airflow' / 'airflow.db'}"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO / "dags")
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(PLUGINS)
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(PLUGINS), str(REPO)]
    # a deployment's own database wins
    assert airflow_env({"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://x"})[
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == "postgresql://x"

    script = f"source {REPO / 'scripts' / 'airflow_env.sh'} && env"
    clean = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LAKEHOUSE_HOME": str(tmp_path / "lh")}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, env=clean,
                         cwd=tmp_path).stdout
    exported = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert exported["AIRFLOW_HOME"] == str(tmp_path / "lh" / "airflow")
    assert exported["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO / "dags")
    assert (tmp_path / "lh" / "airflow").is_dir()


def test_rendered_params_become_text_or_none():
    from lakehouse_airflow.hooks.lakehouse import text_or_none

    assert [text_or_none(v) for v in (None, "", "None", " ", "open", 123, "42")] == [None, None, None, None, "open",
                                                                                    "123", "42"]


def test_spark_job_entry_points_take_the_cli_arguments():
    import importlib.util

    def job(name):
        spec = importlib.util.spec_from_file_location(name, REPO / "spark_jobs" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.build_parser()

    merge = job("merge_job").parse_args(["--changefeed", "orders", "--protocol", "open", "--stop-ts", "42"])
    assert (merge.changefeed, merge.protocol, merge.stop_ts) == ("orders", "open", 42)
    backfill = job("backfill_job")
    assert backfill.parse_args(["--archive", "/a", "--stop-ts", "7"]).archive == "/a"
    with pytest.raises(SystemExit):
        backfill.parse_args(["--changefeed", "orders"])  # --archive is required
