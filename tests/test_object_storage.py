"""The warehouse and the landing zone on object storage: Iceberg's S3FileIO and pyarrow's S3 filesystem against a
real S3 API (moto's server, path-style requests), through the CLI's backfill and through a scheduled Airflow run
landing from Kafka, with the tables read back from the bucket."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow_fixture import airflow_db, dag_bag  # noqa: F401  (fixture)
from tests.broker_fixture import create_topic, kafka_broker, produce, unique_topic  # noqa: F401  (fixture)
from tests.s3_fixture import s3_api  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
LAKEHOUSE = [sys.executable, "-m", "ticdc_lakehouse.commands.cli"]


def run(args: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(LAKEHOUSE + args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"lakehouse {args[0]} failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return result.stdout


def test_s3_settings_become_catalog_properties_for_spark_and_pyiceberg():
    from ticdc_lakehouse.runtime.object_storage import aws_java_options, iceberg_s3_properties, pyiceberg_s3_properties

    raw = {"s3": {"endpoint": "http://minio:9000", "path_style_access": True, "region": "eu-west-1",
                  "checksums": "when_required"}}
    assert iceberg_s3_properties("s3://b/w", raw) == {
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO", "s3.endpoint": "http://minio:9000",
        "s3.path-style-access": "true", "client.region": "eu-west-1"}
    assert iceberg_s3_properties("/data/warehouse", raw) == {} and aws_java_options("hdfs://n/w", raw) == ""
    assert "-Daws.requestChecksumCalculation=when_required" in aws_java_options("s3a://b/w", raw)
    assert aws_java_options("s3://b/w", {"s3": {"checksums": "when_supported"}}) == ""
    with pytest.raises(ValueError, match="s3.checksums = 'never': use one of when_supported, when_required"):
        aws_java_options("s3://b/w", {"s3": {"checksums": "never"}})
    assert pyiceberg_s3_properties("s3://b/w", raw, env={"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}) == {
        "s3.endpoint": "http://minio:9000", "s3.force-virtual-addressing": "false", "s3.region": "eu-west-1",
        "s3.access-key-id": "k", "s3.secret-access-key": "s"}


@pytest.mark.spark
def test_a_backfill_keeps_every_table_file_in_the_bucket(s3_api, spark_session, tmp_path, monkeypatch):
    from tests.test_dag_runs import lake_json
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=23, partitions=2)
    workload.run_script(transactions=8)
    write_to_archive(workload, tmp_path / "archive", "tidb-shop", "open")
    bucket = s3_api.new_bucket()
    deployment = {**s3_api.environment(f"s3://{bucket}/warehouse"), "LAKEHOUSE_HOME": str(tmp_path / "home"),
                  "LAKEHOUSE__CATALOG__NAME": "lake_s3_backfill", "LAKEHOUSE_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE", "AWS_"))}

    run(["backfill", "--archive", str(tmp_path / "archive"), "--protocol", "open"], {**env, **deployment})

    for key, value in deployment.items():
        monkeypatch.setenv(key, value)
    s3_api.sign_in(spark_session)
    cut = workload.global_resolved_ts()
    assert lake_json(spark_session, load_settings(), workload, cut) == workload.expected_json(cut)
    keys = s3_api.keys(bucket, "warehouse/")
    for table in workload.state_at(cut).values():  # data and metadata of each table, under the warehouse prefix
        prefix = f"warehouse/{table.schema}/{table.name}/"  # the JDBC catalog's default table location
        assert any(k.startswith(prefix + "data/") and k.endswith(".parquet") for k in keys), (prefix, keys[:5])
        assert any(k.startswith(prefix + "metadata/") and k.endswith(".metadata.json") for k in keys), prefix
    assert not (tmp_path / "home" / "warehouse").exists()  # nothing went to the local default

    from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog  # pyiceberg reads the bucket through pyarrow's S3

    table = next(iter(workload.state_at(cut).values()))
    rows = pyiceberg_catalog(load_settings()).load_table(f"{table.schema}.{table.name}").scan().to_arrow()
    assert rows.num_rows == len(workload.expected_json(cut)[f"{table.schema}.{table.name}"])


@pytest.mark.spark
@pytest.mark.airflow
def test_a_scheduled_run_lands_from_kafka_and_merges_into_the_bucket(
        s3_api, kafka_broker, spark_session, airflow_db, tmp_path, monkeypatch):  # noqa: F811
    from tests.test_dag_runs import deploy, lake_json as spark_lake_json, task_states
    from ticdc_lakehouse.sim.workload import Workload, encode_partitions

    workload = Workload(seed=31, partitions=2)
    workload.run_script(transactions=6)
    topic = create_topic(kafka_broker, unique_topic("s3run"), partitions=2)
    for partition, records in encode_partitions(workload.new_events(), "open").items():
        produce(kafka_broker, topic, [(key, value, None, partition) for key, value, _h, _ts in records])
    bucket = s3_api.new_bucket()
    for key, value in s3_api.environment(f"s3://{bucket}/warehouse").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LAKEHOUSE_LANDING", f"s3://{bucket}/landing")  # the land task writes to the bucket too
    settings = deploy(tmp_path, monkeypatch, "lake_s3_scheduled", f"""
        [changefeeds.shop]
        protocol = "open"
        topics = ["{topic}"]
        bootstrap_servers = "{kafka_broker}"
    """)
    assert settings.warehouse == f"s3://{bucket}/warehouse"
    s3_api.sign_in(spark_session)  # the merge runs in this process's Spark JVM

    dagrun = dag_bag().dags["lakehouse_shop"].test()

    assert task_states(dagrun) == {"land[0]": "success", "merge": "success", "publish": "success"}
    cut = workload.global_resolved_ts()
    assert spark_lake_json(spark_session, settings, workload, cut) == workload.expected_json(cut)
    assert any(k.endswith(".parquet") and "/data/" in k for k in s3_api.keys(bucket, "warehouse/"))
    landed = [k for k in s3_api.keys(bucket, f"landing/shop/{topic}/") if k.endswith(".parquet")]
    assert {k.rsplit("/", 2)[-2] for k in landed} == {"0", "1"}, landed
    assert not (tmp_path / "home" / "landing").exists()


@pytest.mark.spark
def test_a_backfill_with_the_landing_zone_in_the_bucket_too(s3_api, spark_session, tmp_path, monkeypatch):
    """``landing.path = s3://...``: segments land as objects (pyarrow's S3 filesystem), the merge reads them from
    there in the executors, and a second backfill of the grown archive lands and merges only what is new."""
    from tests.test_dag_runs import lake_json
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.landing.segments import list_segments
    from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=29, partitions=2)
    workload.run_script(transactions=8)
    write_to_archive(workload, tmp_path / "archive", "tidb-shop", "open")
    bucket = s3_api.new_bucket()
    deployment = {**s3_api.environment(f"s3://{bucket}/warehouse"), "LAKEHOUSE_HOME": str(tmp_path / "home"),
                  "LAKEHOUSE_LANDING": f"s3://{bucket}/landing", "LAKEHOUSE__CATALOG__NAME": "lake_s3_landing",
                  "LAKEHOUSE_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE", "AWS_"))}
    for key, value in deployment.items():
        monkeypatch.setenv(key, value)
    s3_api.sign_in(spark_session)

    def backfill_and_check() -> list[str]:
        run(["backfill", "--archive", str(tmp_path / "archive"), "--protocol", "open"], {**env, **deployment})
        cut = workload.global_resolved_ts()
        assert lake_json(spark_session, load_settings(), workload, cut) == workload.expected_json(cut)
        catalog = pyiceberg_catalog(load_settings())  # pyiceberg reads the same tables from the bucket
        for name, rows in workload.expected_json(cut).items():
            assert catalog.load_table(name).scan().to_arrow().num_rows == len(rows), name
        return s3_api.keys(bucket, "landing/")

    first = backfill_and_check()
    segments = [k for k in first if k.endswith(".parquet")]
    assert {k.rsplit("/", 2)[-2] for k in segments} == {"0", "1"}, first  # one object per segment, per partition
    assert all(k.startswith("landing/default/tidb-shop/") for k in segments), first
    assert "landing/default/tidb-shop/_partitions.json" in first
    assert not any("/." in k or k.endswith(".tmp") for k in first)  # whole objects: no temp names
    assert not (tmp_path / "home" / "landing").exists()  # nothing went to the local default
    landed = list_segments(load_settings().landing_path, "default")
    assert sorted(str(s.path) for items in landed.values() for s in items) == [f"s3://{bucket}/{k}" for k in segments]

    workload.run_script(transactions=6, with_ddl=False)  # the archive grows: the second backfill lands only the new offsets
    write_to_archive(workload, tmp_path / "archive", "tidb-shop", "open")
    second = backfill_and_check()
    assert set(segments) < set(second) and len([k for k in second if k.endswith(".parquet")]) > len(segments)
    assert not (tmp_path / "home" / "landing").exists()


def test_the_landing_layout_on_s3_segments_quarantine_data_loss_and_lock(s3_api, tmp_path, monkeypatch):
    """Every piece of the landing layout through the S3 storage: whole objects, listing, the quarantine's move,
    the data-loss record, and the landing lock as a local file under LAKEHOUSE_HOME."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.landing.kafka_source import _record_data_loss
    from ticdc_lakehouse.landing.lock import LandingBusyError, landing_lock
    from ticdc_lakehouse.landing.progress import DataLoss
    from ticdc_lakehouse.landing.quarantine import check_landed, read_quarantined
    from ticdc_lakehouse.landing.segments import (
        SegmentWriter, clean_temp_files, known_partitions, list_segments, read_segment, write_partition_count)
    from ticdc_lakehouse.commands.status import landed_view

    bucket = s3_api.new_bucket()
    for key, value in {**s3_api.environment(f"s3://{bucket}/warehouse"), "LAKEHOUSE_HOME": str(tmp_path / "home"),
                       "LAKEHOUSE_LANDING": f"s3://{bucket}/landing/"}.items():
        monkeypatch.setenv(key, value)
    root = load_settings().landing_path
    assert str(root) == f"s3://{bucket}/landing"

    write_partition_count(root, "cf", "t", 2)
    for start, end in ((0, 3), (3, 5)):
        with SegmentWriter(root, "cf", "t", 1, start) as writer:
            writer.extend(list(range(start, end)), [None] * (end - start), [b"k"] * (end - start),
                          [b"v%d" % o for o in range(start, end)], [None] * (end - start))
            writer.commit(end)
    with SegmentWriter(root, "cf", "t", 1, 5) as writer:  # aborted: nothing appears in the bucket
        writer.append(5, None, b"k", b"v5")
    assert s3_api.keys(bucket) == [f"landing/cf/t/1/{0:020d}-{3:020d}.parquet",
                                   f"landing/cf/t/1/{3:020d}-{5:020d}.parquet", "landing/cf/t/_partitions.json"]
    segments = list_segments(root, "cf")
    assert [(s.start, s.end) for s in segments[("t", 1)]] == [(0, 3), (3, 5)] and known_partitions(root, "cf", "t") == [0, 1]
    assert read_segment(segments[("t", 1)][1].path).column("value").to_pylist() == [b"v3", b"v4"]
    assert clean_temp_files(root, "cf") == []

    s3_api.client().put_object(Bucket=bucket, Key=f"landing/cf/t/1/{0:020d}-{3:020d}.parquet", Body=b"PAR1 cut")
    check = check_landed(root, "cf", list_segments(root, "cf"), {})
    assert check.segments == {} and check.missing == {("t", 1): [(0, 3)]}
    [moved] = read_quarantined(root, "cf")
    assert moved.file.startswith(f"s3://{bucket}/landing/cf/_quarantine/t/1/") and "unreadable Parquet" in moved.reason
    assert any(k.startswith("landing/cf/_quarantine/t/1/") for k in s3_api.keys(bucket))

    _record_data_loss(root, "cf", DataLoss("t", 0, 0, 7, "retention"), accepted=False)
    assert [(d["partition"], d["start"], d["end"]) for d in landed_view(root, "cf").data_loss] == [(0, 0, 7)]
    assert "landing/cf/t/_data_loss.json" in s3_api.keys(bucket)

    with landing_lock(root, "cf") as lock:
        assert str(lock).startswith(str(tmp_path / "home" / "locks" / "landing"))
        with pytest.raises(LandingBusyError):
            with landing_lock(root, "cf"):
                pass
    assert not (tmp_path / "home" / "landing").exists()


def test_a_landing_bucket_that_does_not_exist_is_one_line_before_anything_lands(s3_api, tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE", "AWS_"))},
           **s3_api.environment(str(tmp_path / "warehouse")), "LAKEHOUSE_HOME": str(tmp_path / "home"),
           "LAKEHOUSE_LANDING": "s3://no-such-bucket-here/landing", "LAKEHOUSE_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    (tmp_path / "archive").mkdir()
    result = subprocess.run(LAKEHOUSE + ["backfill", "--archive", str(tmp_path / "archive"), "--protocol", "open"],
                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "error: landing zone: cannot use s3://no-such-bucket-here/landing (bucket 'no-such-bucket-here' does not "
        "exist); fix landing.path (LAKEHOUSE_LANDING), the [s3] settings or the AWS credentials")
