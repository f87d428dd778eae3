"""Bad landed data and lost Kafka offsets, end to end on the real broker, Spark and Iceberg.

* A landed segment cut short (a disk, a copy, a person) is found before the merge reads it, moved aside, landed
  again from Kafka by the same ``lakehouse run``, and the tables end equal to the upstream; status says so.
* When Kafka no longer holds its offsets, the run names them as data loss and fails, and status shows them.
* Offsets Kafka's retention removed before they ever landed are data loss too, even on a first landing: the
  ``lakehouse land`` command exits non-zero naming them unless the user accepts the loss.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker_fixture import changefeed_config, create_topic, kafka_broker, produce, unique_topic  # noqa: F401
from tests.lake_helpers import assert_lake_equals_upstream

ROOT = Path(__file__).resolve().parents[1]
CHANGEFEED = "faultcf"


def _settings(root: Path, bootstrap: str, topic: str, catalog: str, extra: str = ""):
    from ticdc_lakehouse.runtime.config import load_settings

    env = {"LAKEHOUSE_HOME": str(root / "home"), "LAKEHOUSE__CATALOG__NAME": catalog,
           "LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS": "2"}
    return load_settings(changefeed_config(root, bootstrap, topic, CHANGEFEED, extra), env=env)


def _produce_workload(bootstrap: str, topic: str, seed: int):
    from ticdc_lakehouse.sim.workload import Workload, encode_partitions

    workload = Workload.started(seed=seed, partitions=2, transactions=12)
    workload.resolve(final=True)
    create_topic(bootstrap, topic, partitions=2)
    for partition, records in encode_partitions(workload.new_events(), "open").items():
        produce(bootstrap, topic, [(key, value, None, partition) for key, value, _h, _ts in records])
    return workload


def _truncate_first_segment(settings, topic: str, partition: int, how: str = "truncate"):
    """Cut the partition's first segment short, or (``"page"``) overwrite the header of its first data page: the
    footer still reads, only Spark's read of the page fails."""
    import pyarrow.parquet as pq

    from ticdc_lakehouse.landing.segments import partition_segments

    segment = partition_segments(settings.landing_path, CHANGEFEED, topic, partition)[0]
    size = segment.path.stat().st_size
    value_column = pq.ParquetFile(segment.path).metadata.schema.names.index("value")
    page = pq.ParquetFile(segment.path).metadata.row_group(0).column(value_column).data_page_offset
    with open(segment.path, "r+b") as handle:
        if how == "truncate":
            handle.truncate(size // 2)
        else:
            handle.seek(page)
            handle.write(b"\xff" * 24)
    return segment


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        future.result(timeout=15)


@pytest.mark.spark
@pytest.mark.parametrize("damage", ["truncate", "page"])
def test_a_truncated_segment_is_moved_aside_landed_again_and_merged(spark_session, tmp_path, kafka_broker,  # noqa: F811
                                                                    damage):
    from ticdc_lakehouse.commands.pipeline import land, run_cycle
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.commands.status import collect_status, render_status

    topic = unique_topic("truncated")
    workload = _produce_workload(kafka_broker, topic, seed=41)
    settings = _settings(tmp_path, kafka_broker, topic, f"lake_trunc_{damage}")
    use_catalog(spark_session, settings)
    land(settings, CHANGEFEED)
    bad = _truncate_first_segment(settings, topic, 0, damage)

    messages: list[str] = []
    result = run_cycle(settings, CHANGEFEED, progress=messages.append, spark=spark_session)
    assert result["ok"], result
    moved = result["merge"]["quarantined"] or []
    assert [(q["topic"], q["partition"], q["start"], q["end"]) for q in moved] == \
        [(topic, 0, bad.start, bad.end)]
    reason = "unreadable Parquet file" if damage == "truncate" else "could not read it: "
    assert reason in moved[0]["reason"] and "\n" not in moved[0]["reason"]
    assert Path(moved[0]["file"]).is_file() and bad.path.is_file()  # kept aside; the range landed again
    assert any(m.startswith("QUARANTINED landed segment") for m in messages)
    from ticdc_lakehouse.commands.summary import render_summary

    assert f"QUARANTINED landed segment {topic}/0 offsets [{bad.start}, {bad.end}): {reason}" in render_summary(result)
    assert_lake_equals_upstream(spark_session, workload, workload.global_resolved_ts())

    text = render_status(collect_status(settings, CHANGEFEED, kafka=False, spark=spark_session))
    assert f"QUARANTINED segment {topic}/0 offsets [{bad.start}, {bad.end}): {reason}" in text
    assert "landed again" in text and "LANDING PROBLEM" not in text


@pytest.mark.spark
def test_a_truncated_segment_kafka_no_longer_holds_is_data_loss_with_its_offsets(spark_session, tmp_path,
                                                                                 kafka_broker):  # noqa: F811
    from ticdc_lakehouse.commands.pipeline import land, run_cycle
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.commands.status import collect_status, render_status

    topic = unique_topic("truncated-gone")
    _produce_workload(kafka_broker, topic, seed=42)
    settings = _settings(tmp_path, kafka_broker, topic, "lake_trunc_gone")
    use_catalog(spark_session, settings)
    land(settings, CHANGEFEED)
    bad = _truncate_first_segment(settings, topic, 1)
    _delete_records(kafka_broker, topic, 1, bad.end)

    result = run_cycle(settings, CHANGEFEED, spark=spark_session)
    assert not result["ok"]
    assert f"{topic}/1 offsets [{bad.start}, {bad.end}) lost" in result["error"]
    assert result["merge"]["missing"] == {f"{topic}/1": [[bad.start, bad.end]]}

    text = render_status(collect_status(settings, CHANGEFEED, kafka=False, spark=spark_session))
    assert f"DATA LOSS: {topic}/1 offsets [{bad.start}, {bad.end})" in text and "NOT accepted" in text
    assert f"QUARANTINED segment {topic}/1 offsets [{bad.start}, {bad.end})" in text
    assert "not landed again yet" in text


def test_offsets_deleted_before_the_first_landing_fail_the_land_command_unless_accepted(tmp_path,
                                                                                        kafka_broker):  # noqa: F811
    topic = create_topic(kafka_broker, unique_topic("retained"), partitions=1)
    produce(kafka_broker, topic, [(None, b"v%d" % i) for i in range(10)], partition=0)
    _delete_records(kafka_broker, topic, 0, 6)  # retention: offsets 0..5 are gone, nothing landed them
    config = changefeed_config(tmp_path, kafka_broker, topic, CHANGEFEED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(tmp_path / "home"), LAKEHOUSE_CONFIG=str(config))
    command = [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "land"]

    refused = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{topic}/0 offsets [0, 6) lost" in errors[0]
    assert "accept_data_loss" in errors[0]

    accepted = subprocess.run(command, env=dict(env, LAKEHOUSE__LANDING__ACCEPT_DATA_LOSS="true"), cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
    assert accepted.returncode == 0, accepted.stderr
    assert f"DATA LOSS (accepted by landing.accept_data_loss): {topic}/0 offsets [0, 6) lost" in accepted.stderr

    from ticdc_lakehouse.landing.segments import partition_segments, read_partition_payload

    home = tmp_path / "home" / "landing"
    assert [(s.start, s.end) for s in partition_segments(home, CHANGEFEED, topic, 0)] == [(0, 6), (6, 10)]
    assert read_partition_payload(home, CHANGEFEED, topic, 0).column("offset").to_pylist() == [6, 7, 8, 9]
    from ticdc_lakehouse.commands.status import landed_view

    losses = landed_view(home, CHANGEFEED).data_loss
    assert [(d["start"], d["end"], d["accepted"]) for d in losses] == [(0, 6, True)]


@pytest.mark.spark
def test_a_truncated_segment_of_a_backfill_is_landed_again_from_the_archive(spark_session, tmp_path):
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.landing.segments import partition_segments
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload.started(seed=43, partitions=2, transactions=10)
    workload.resolve(final=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path / "home"), "LAKEHOUSE_CONFIG": "",
                                  "LAKEHOUSE__CATALOG__NAME": "lake_trunc_archive"})
    use_catalog(spark_session, settings)
    from ticdc_lakehouse.landing import land_from_archive

    land_from_archive(archive, settings.landing_path, "default")
    bad = partition_segments(settings.landing_path, "default", "ticdc", 1)[0]
    with open(bad.path, "r+b") as handle:
        handle.truncate(100)

    result = backfill(settings, archive, protocol="open", spark=spark_session)
    assert result["ok"], result
    assert [(q["partition"], q["start"], q["end"]) for q in result["merge"]["quarantined"]] == \
        [(1, bad.start, bad.end)]
    assert [(s.start, s.end) for s in partition_segments(settings.landing_path, "default", "ticdc", 1)] == \
        [(bad.start, bad.end)]
    assert_lake_equals_upstream(spark_session, workload, workload.global_resolved_ts())
