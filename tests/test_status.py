"""``lakehouse status`` against a lake built by the real pipeline (archive -> landing -> merge) and a real broker.

One lake per module (a backfill costs about a minute): a workload whose ``shop.customers`` halts at a DDL Iceberg
cannot express (narrowing a decimal), one undecodable message in the archive, and a Kafka topic holding a few records
more than what landed, so every field of the status has a known expected value.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.broker_fixture import (  # noqa: F401  (fixture)
    changefeed_config,
    create_topic,
    free_port,
    kafka_broker,
    produce,
    unique_topic,
)

CHANGEFEED = "shopcf"
SECRET = "s3cr3t-value"
EXTRA = {0: 3, 1: 0, 2: 2}  # records in Kafka beyond what landed, per partition


def _settings(root: Path, catalog: str, bootstrap: str, topic: str):
    from ticdc_lakehouse.runtime.config import load_settings

    config = changefeed_config(root, bootstrap, topic, CHANGEFEED,
                               f'schema_registry_url = "http://reg:{SECRET}@127.0.0.1:1"\n'
                               f'[changefeeds.{CHANGEFEED}.schema_registry]\n"basic.auth.user.info" = "reg:{SECRET}"\n')
    env = {"LAKEHOUSE_HOME": str(root / "home"), "LAKEHOUSE__CATALOG__NAME": catalog,
           "LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS": "2"}
    return load_settings(config, env=env)


@pytest.fixture(scope="module")
def lake(spark_session, tmp_path_factory, kafka_broker):  # noqa: F811
    from ticdc_lakehouse.sim.archive_writer import write_partition
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.commands.status import collect_status
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    root = tmp_path_factory.mktemp("status-lake")
    topic = unique_topic("status")
    settings = _settings(root, "lake_status", kafka_broker, topic)
    use_catalog(spark_session, settings)

    w = Workload(seed=11)
    w.create_sample_tables()
    w.resolve(final=True)
    for _ in range(5):
        w.transaction(3)
    halt_ts = w.modify_column("customers", "balance", "decimal(10,2)")  # narrowing: not in Iceberg
    for i in range(8):
        w.transaction(3)
        if i % 3 == 2:
            w.resolve()
    w.resolve()
    archive = root / "archive"
    write_to_archive(w, archive, topic, "open")
    write_partition(archive, topic, 0, [(b"not a key", b"\xff\xfe not an open protocol message", [], None)])
    landed = {p: len(w.sent[p]) + (1 if p == 0 else 0) for p in range(w.partitions)}

    result = backfill(settings, archive, changefeed=CHANGEFEED, protocol="open", spark=spark_session)
    assert not result["ok"], "the decimal narrowing must halt shop.customers"

    create_topic(kafka_broker, topic, partitions=w.partitions)
    for partition, count in landed.items():
        produce(kafka_broker, topic, [(b"k", b"v")] * (count + EXTRA[partition]), partition=partition)

    status = collect_status(settings, spark=spark_session)
    return SimpleNamespace(settings=settings, spark=spark_session, w=w, halt_ts=halt_ts, landed=landed,
                           topic=topic, status=status, root=root)


def _feed(status, name=CHANGEFEED):
    return next(f for f in status["changefeeds"] if f["changefeed"] == name)


def _use(lake):
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    use_catalog(lake.spark, lake.settings)


def test_applied_cut_and_partition_resolved_ts(lake):
    from ticdc_lakehouse.commands.timetravel import tso_to_datetime

    feed = _feed(lake.status)
    cut = lake.w.global_resolved_ts()
    assert feed["applied"]["resolved_ts"] == cut
    assert feed["applied"]["resolved_time"] == tso_to_datetime(cut).isoformat(timespec="milliseconds")
    assert feed["applied"]["checkpoints"] == 1
    by_partition = {p["partition"]: p for p in feed["partitions"] if p["topic"] == lake.topic}
    assert sorted(by_partition) == [0, 1, 2]
    for partition, row in by_partition.items():
        assert row["resolved_ts"] == lake.w.resolved[partition]
        assert row["resolved_time"] == tso_to_datetime(lake.w.resolved[partition]).isoformat(timespec="milliseconds")


def test_landed_kafka_end_and_lag(lake):
    feed = _feed(lake.status)
    assert feed["kafka"]["checked"] and feed["kafka"]["reachable"], feed["kafka"]
    rows = {p["partition"]: p for p in feed["partitions"] if p["topic"] == lake.topic}
    for partition, count in lake.landed.items():
        assert rows[partition]["landed_start"] == 0
        assert rows[partition]["landed_end"] == count
        assert rows[partition]["kafka_end"] == count + EXTRA[partition]
        assert rows[partition]["lag"] == EXTRA[partition]
        assert rows[partition]["problems"] == []
    assert feed["totals"]["lag"] == sum(EXTRA.values())
    assert feed["landing_problems"] == []


def test_pending_is_landed_after_the_restart_offset(lake):
    from ticdc_lakehouse.runtime.state import StateStore

    _use(lake)
    checkpoint = StateStore(lake.spark, lake.settings.catalog_name).latest_checkpoint(CHANGEFEED)
    feed = _feed(lake.status)
    rows = {p["partition"]: p for p in feed["partitions"] if p["topic"] == lake.topic}
    for partition, count in lake.landed.items():
        restart = checkpoint.restart_offsets[(lake.topic, partition)]
        assert rows[partition]["restart_offset"] == restart
        assert rows[partition]["pending"] == count - restart
    # the halted table's rows after its DDL and everything above the cut are not applied yet
    assert feed["totals"]["pending"] > 0


def test_table_watermarks_and_snapshots(lake):
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg, watermark_of

    _use(lake)
    ji = JavaIceberg(lake.spark, lake.settings.catalog_name)
    tables = {t["table"]: t for t in _feed(lake.status)["tables"]}
    assert sorted(tables) == ["shop.customers", "shop.order_items", "shop.orders"]
    cut = lake.w.global_resolved_ts()
    for name, row in tables.items():
        jtable = ji.load(*name.split("."))
        assert row["watermark"] == watermark_of(jtable)
        assert row["snapshot_id"] == jtable.currentSnapshot().snapshotId()
        assert jtable.snapshot(row["watermark_snapshot_id"]).summary()["tidb.resolved-ts"] == str(row["watermark"])
    assert tables["shop.orders"]["watermark"] == cut and not tables["shop.orders"]["halted"]
    assert tables["shop.customers"]["halted"]
    assert tables["shop.customers"]["watermark"] < lake.halt_ts


def test_halted_table_and_dead_letters(lake):
    feed = _feed(lake.status)
    assert feed["dead_letters"] == 1
    [kind] = feed["dead_letter_reasons"]  # why, without SQL: the commonest errors with an example's place
    garbage_offset = len(lake.w.sent[0])  # appended after the workload's records of partition 0
    assert (kind["count"], kind["topic"], kind["partition"], kind["offset"]) == (1, lake.topic, 0, garbage_offset)
    assert "Open Protocol" in kind["error"] and "\n" not in kind["error"]
    assert len(feed["halted"]) == 1
    halted = feed["halted"][0]
    assert halted["table"].lower() == "shop.customers"
    assert halted["ddl_ts"] == lake.halt_ts
    assert halted["query"] == "ALTER TABLE `shop`.`customers` MODIFY COLUMN `balance` decimal(10,2)"
    assert halted["reason"]


def test_render_shows_the_same_facts(lake):
    from ticdc_lakehouse.commands.status import render_status

    text = render_status(lake.status)
    cut = lake.w.global_resolved_ts()
    assert f"applied cut: {cut}" in text
    assert "shop.customers at DDL ts" in text and "HALTED" in text
    assert "dead letters: 1" in text
    assert f"    1 like {lake.topic}/0@" in text and "SELECT * FROM _lakehouse.dead_letters" in text
    assert f"total lag {sum(EXTRA.values())}" in text
    assert lake.topic in text


def test_json_and_text_carry_no_secret(lake):
    from ticdc_lakehouse.commands.status import render_status

    text = json.dumps(lake.status)  # JSON-able as is
    assert SECRET not in text and SECRET not in render_status(lake.status)
    assert "***" in json.dumps(_feed(lake.status)["settings"])


def test_unreachable_kafka_is_reported_fast(lake):
    from ticdc_lakehouse.commands.status import collect_status, render_status

    _use(lake)
    # the same catalog and landing as the lake, only the broker differs (nothing listens on that port)
    other = _settings(lake.root / "dead", lake.settings.catalog_name, f"127.0.0.1:{free_port()}", lake.topic)
    dead = replace(lake.settings, changefeeds=other.changefeeds)
    started = time.monotonic()
    status = collect_status(dead, changefeed=CHANGEFEED, spark=lake.spark, kafka_timeout_s=3.0)
    assert time.monotonic() - started < 30
    feed = _feed(status)
    assert feed["kafka"]["reachable"] is False and feed["kafka"]["seconds"] < 6
    assert "kafka unreachable" in render_status(status)
    assert all(p["kafka_end"] is None and p["lag"] is None for p in feed["partitions"])
    assert feed["applied"]["resolved_ts"] == lake.w.global_resolved_ts()  # everything else is still there


def test_no_kafka_and_lock_free_while_a_merge_runs(lake):
    from ticdc_lakehouse.runtime.locks import changefeed_lock
    from ticdc_lakehouse.commands.status import collect_status, render_status

    _use(lake)
    with changefeed_lock(lake.settings, CHANGEFEED):  # what a running merge holds
        status = collect_status(lake.settings, changefeed=CHANGEFEED, kafka=False, spark=lake.spark)
    feed = _feed(status)
    assert feed["kafka"]["checked"] is False and feed["totals"]["lag"] is None
    assert feed["applied"] == _feed(lake.status)["applied"]
    assert "not checked" in render_status(status)


def test_fresh_deployment_reports_nothing_and_creates_nothing(spark, settings):
    from ticdc_lakehouse.iceberg.java_api import JavaIceberg
    from ticdc_lakehouse.commands.status import collect_status, render_status

    status = collect_status(settings, kafka=False, spark=spark)
    feed = _feed(status, "default")
    assert feed["applied"]["resolved_ts"] == 0 and feed["partitions"] == [] and feed["tables"] == []
    assert feed["dead_letters"] == 0 and feed["halted"] == []
    assert "nothing applied yet" in render_status(status)
    assert not JavaIceberg(spark, settings.catalog_name).namespace_exists("_lakehouse")


def test_landing_gaps_and_overlaps_are_reported(tmp_path):
    from ticdc_lakehouse.landing.segments import segment_path
    from ticdc_lakehouse.commands.status import KafkaProbe, landed_view, partition_rows

    for start, end in ((0, 10), (12, 20), (18, 25)):
        path = segment_path(tmp_path, "cf", "t", 0, start, end)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    view = landed_view(tmp_path, "cf")
    rows = partition_rows(view, KafkaProbe(checked=True, reachable=True, ends={("t", 0): 30}), {("t", 0): 5}, {})
    assert len(rows) == 1
    row = rows[0]
    assert (row["landed_end"], row["kafka_end"], row["lag"], row["pending"]) == (25, 30, 5, 20)
    assert any("gap [10, 12)" in p for p in row["problems"])
    assert any("overlap [18, 20)" in p for p in row["problems"])


def test_large_message_settings_show_when_set_with_secrets_masked(lake):
    from ticdc_lakehouse.commands.status import render_status

    feed = _feed(lake.status)
    assert feed["large_messages"] == {"compression": "none", "claim_check_storage_uri": ""}
    assert "large messages" not in render_status(lake.status)
    from ticdc_lakehouse.core.redaction import mask_uri_password

    uri = mask_uri_password("s3://claims/p?endpoint=http://minio:9000&secret-access-key=hunter2")
    shown = dict(lake.status, changefeeds=[dict(feed, large_messages={"compression": "lz4",
                                                                       "claim_check_storage_uri": uri})])
    text = render_status(shown)
    assert "  large messages: compression lz4; claim-check storage s3://claims/p?endpoint=http://minio:9000" \
           "&secret-access-key=***" in text and "hunter2" not in text


def test_a_held_partition_shows_with_how_to_let_it_go_on(lake):
    from ticdc_lakehouse.commands.status import render_status

    feed = _feed(lake.status)
    assert feed["held"] == []  # this lake dead-letters (the default)
    hold = {"topic": lake.topic, "partition": 2, "offset": 41, "error": "Open Protocol event 0: not JSON",
            "held_at": "2026-11-25T10:00:00"}
    text = render_status(dict(lake.status, changefeeds=[dict(feed, held=[hold])]))
    assert f"  HELD partition {lake.topic}/2 at offset 41 (since 2026-11-25T10:00:00): Open Protocol" in text
    assert f"lakehouse skip-message {lake.topic}/2/41" in text
