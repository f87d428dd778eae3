"""docker-compose.yml cannot run here (no Docker engine): parse it and check every service the code expects is
defined and wired to the others -- hosts, ports, databases, buckets, volumes, dependencies and the lakehouse
config the containers read."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
AIRFLOW_SERVICES = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor")
INTERPOLATION = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def resolve(value) -> str:
    """A compose value with ``${VAR:-default}`` replaced by its default (what an empty .env gives)."""
    return INTERPOLATION.sub(lambda m: m.group(2) or "", str(value))


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def lakehouse_toml(compose) -> dict:
    return tomllib.loads(compose["configs"]["lakehouse-toml"]["content"])


def env(service: dict) -> dict[str, str]:
    return {key: resolve(value) for key, value in (service.get("environment") or {}).items()}


def published(service: dict) -> dict[int, int]:
    """container port -> host port"""
    ports = {}
    for entry in service.get("ports", []):
        host, container = str(entry).split(":")
        ports[int(container)] = int(host)
    return ports


def mounts(service: dict) -> dict[str, str]:
    """container path -> source"""
    return {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}


def test_every_service_of_the_topology_is_defined(services):
    assert set(services) >= {"kafka", "postgres", "minio", "minio-init", "spark-master", "spark-worker",
                             "airflow-init", *AIRFLOW_SERVICES}
    assert "zookeeper" not in services


def test_dependencies_volumes_and_configs_all_exist(compose, services):
    for name, service in services.items():
        for target in service.get("depends_on", {}):
            assert target in services, f"{name} depends on undefined {target}"
        for source in mounts(service).values():
            assert source.startswith(".") or source in compose["volumes"], f"{name}: volume {source} undeclared"
        for config in service.get("configs", []):
            assert config["source"] in compose["configs"]


def test_kafka_runs_in_kraft_mode_and_the_changefeed_points_at_it(services, lakehouse_toml):
    kafka = env(services["kafka"])
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{kafka['KAFKA_NODE_ID']}@kafka:")
    advertised = dict(item.split("://") for item in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    for changefeed in lakehouse_toml["changefeeds"].values():
        assert changefeed["bootstrap_servers"] == advertised["PLAINTEXT"]  # kafka:9092 inside the network
    external_port = int(advertised["EXTERNAL"].rsplit(":", 1)[1])
    assert published(services["kafka"])[external_port] == external_port  # for TiCDC outside compose
    assert int(kafka["KAFKA_MESSAGE_MAX_BYTES"]) >= 10 * 1024 * 1024


def test_postgres_holds_the_iceberg_catalog_and_the_airflow_database(compose, services):
    init = compose["configs"]["postgres-init"]["content"]
    assert "CREATE DATABASE iceberg" in init and "CREATE DATABASE airflow" in init
    assert services["postgres"]["configs"][0]["target"].startswith("/docker-entrypoint-initdb.d/")
    for name in AIRFLOW_SERVICES + ("airflow-init",):
        variables = env(services[name])
        catalog = urlparse(variables["LAKEHOUSE_CATALOG_URI"].removeprefix("jdbc:"))
        assert (catalog.scheme, catalog.hostname, catalog.port, catalog.path) == ("postgresql", "postgres", 5432,
                                                                                  "/iceberg")
        metadata = urlparse(variables["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        assert (metadata.hostname, metadata.port, metadata.path) == ("postgres", 5432, "/airflow")
        assert variables["LAKEHOUSE_CATALOG_PASSWORD"]  # from ${LAKEHOUSE_CATALOG_PASSWORD:-...}
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    raw = services["airflow-scheduler"]["environment"]
    assert INTERPOLATION.search(str(raw["LAKEHOUSE_CATALOG_PASSWORD"]))  # never a literal secret


def test_the_warehouse_is_a_minio_bucket_that_minio_init_creates(services, lakehouse_toml):
    warehouse = urlparse(env(services["airflow-scheduler"])["LAKEHOUSE_WAREHOUSE"])
    assert warehouse.scheme == "s3"
    assert f"lake/{warehouse.hostname}" in " ".join(services["minio-init"]["command"])
    endpoint = urlparse(lakehouse_toml["s3"]["endpoint"])
    assert endpoint.hostname == "minio" and endpoint.port in published(services["minio"])
    assert lakehouse_toml["s3"]["path_style_access"] is True and lakehouse_toml["s3"]["checksums"] == "when_required"
    for name in AIRFLOW_SERVICES + ("spark-worker",):
        variables = env(services[name])
        assert variables["AWS_ACCESS_KEY_ID"] == env(services["minio"])["MINIO_ROOT_USER"]
        assert variables["AWS_SECRET_ACCESS_KEY"] == env(services["minio"])["MINIO_ROOT_PASSWORD"]
        assert services[name]["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"


def test_spark_master_and_worker_and_the_merges_submitted_to_them(services, lakehouse_toml):
    master_url = lakehouse_toml["spark"]["master"]
    host_port = urlparse(master_url)
    assert host_port.scheme == "spark" and host_port.hostname == "spark-master"
    assert f"--port {host_port.port}" in " ".join(services["spark-master"]["command"])
    assert master_url in " ".join(services["spark-worker"]["command"])
    assert "spark-master" in services["spark-worker"]["depends_on"]
    assert lakehouse_toml["spark"]["submit"] == "spark-submit"
    assert env(services["airflow-scheduler"])["LAKEHOUSE_SPARK_MASTER"] == master_url
    # executors read the landing zone the scheduler's tasks write: the same volume at the same path
    home = env(services["airflow-scheduler"])["LAKEHOUSE_HOME"]
    assert mounts(services["spark-worker"])[home] == mounts(services["airflow-scheduler"])[home]
    assert services["airflow-scheduler"]["hostname"] == "airflow-scheduler"  # the client-mode driver's address


def test_airflow_runs_the_repos_dags_with_the_local_executor(services):
    api_port = next(iter(published(services["airflow-api-server"])))
    for name in AIRFLOW_SERVICES:
        service = services[name]
        variables = env(service)
        assert variables["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        repo = mounts(service)
        assert repo["/opt/lakehouse"] == "./"
        assert variables["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/lakehouse/dags"
        assert variables["AIRFLOW__CORE__PLUGINS_FOLDER"] == "/opt/lakehouse/plugins"
        assert "/opt/lakehouse/plugins" in variables["PYTHONPATH"].split(":")
        assert variables["AIRFLOW_HOME"] == variables["LAKEHOUSE_HOME"] + "/airflow"
        assert variables["LAKEHOUSE_CONFIG"] == service["configs"][0]["target"]
        execution_api = urlparse(variables["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
        assert execution_api.hostname == "airflow-api-server" and execution_api.port == api_port
        assert service["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    commands = {name: services[name]["command"] for name in AIRFLOW_SERVICES}
    assert commands == {"airflow-api-server": "api-server", "airflow-scheduler": "scheduler",
                        "airflow-dag-processor": "dag-processor"}
    init = " ".join(services["airflow-init"]["command"])
    assert "airflow db migrate" in init
    assert "lakehouse_airflow.pools" in init and "airflow pools import" in init  # the merge pools exist


def test_the_containers_config_resolves_to_the_production_settings(compose, services, lakehouse_toml, tmp_path):
    from ticdc_lakehouse.runtime.config import load_settings

    config = tmp_path / "lakehouse.toml"
    config.write_text(compose["configs"]["lakehouse-toml"]["content"])
    settings = load_settings(config, env={**env(services["airflow-scheduler"]), "LAKEHOUSE_CONFIG": str(config)})
    assert settings.catalog_uri == "jdbc:postgresql://postgres:5432/iceberg"
    assert settings.warehouse == "s3://lakehouse/warehouse"
    from ticdc_lakehouse.runtime.spark_session import spark_plan

    conf = spark_plan(settings).conf  # the catalog writes the bucket through S3FileIO, path-style, at MinIO
    assert conf["spark.sql.catalog.lake.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert conf["spark.sql.catalog.lake.s3.endpoint"] == "http://minio:9000"
    assert conf["spark.sql.catalog.lake.s3.path-style-access"] == "true"
    assert "-Daws.requestChecksumCalculation=when_required" in conf["spark.driver.extraJavaOptions"]
    assert settings.spark.submit == "spark-submit"
    assert list(settings.changefeeds) == list(lakehouse_toml["changefeeds"])
    assert settings.raw["maintenance"]["schedule"] == "@daily"
    assert "lakehouse" not in str(settings.masked()["catalog"]["password"])


def test_the_image_runs_the_engine_make_setup_installs(compose):
    """Spark 4.1 from pyproject and the same Iceberg jars, fetched with Maven from jvm/runtime/pom.xml and checked
    against its checksums, where the sessions look for them; no jar fetched any other way."""
    build = compose["x-lakehouse-build"]["dockerfile_inline"]
    assert "openjdk-17-jre-headless" in build and "maven" in build
    assert "fetch_jvm_deps.sh /opt/lakehouse/jvm/runtime /opt/lakehouse-jars/runtime" in build
    assert "LAKEHOUSE_JVM_JARS=/opt/lakehouse-jars" in build
    assert ".jar" not in build and "hadoop-aws" not in build
    assert "COPY --chown=airflow:root jvm /opt/lakehouse/jvm" in build


def test_no_secret_is_on_a_command_line(services):
    """Command lines are public (``ps`` on the host lists every container's processes): secrets go through the
    environment or files, never into a service's command, entrypoint or healthcheck, neither as a shell variable
    (``$$MINIO_ROOT_PASSWORD``) nor interpolated by compose (``${...PASSWORD}``)."""
    for name, service in services.items():
        for part in ("command", "entrypoint", "healthcheck"):
            text = str(service.get(part) or "")
            assert not re.search(r"PASSWORD|SECRET|KEY\b|TOKEN", text, re.IGNORECASE), f"{name} {part}: {text}"


def test_continuous_mode_is_an_opt_in_service_of_the_same_image_and_settings(services):
    service = services["lakehouse-continuous"]
    assert service["profiles"] == ["continuous"]  # not started by a plain `docker compose up`
    assert service["image"] == services["airflow-scheduler"]["image"]
    assert service["entrypoint"][:3] == ["lakehouse", "run", "--every"] and float(service["entrypoint"][3]) > 0
    assert env(service)["LAKEHOUSE_CATALOG_URI"] == env(services["airflow-scheduler"])["LAKEHOUSE_CATALOG_URI"]
    assert mounts(service) == mounts(services["airflow-scheduler"])  # the same landing zone and repo
    assert service["restart"] == "unless-stopped" and service["stop_grace_period"]
    assert service["init"] is True  # the driver is not PID 1: tini forwards SIGTERM and reaps children
