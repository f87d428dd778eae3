"""Landing from a real Apache Kafka broker: ranges, incremental runs, crashes, codecs, headers, big messages,
transactions, log compaction, retention and broker restarts."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker_fixture import create_topic, kafka_broker, private_broker, produce, unique_topic  # noqa: F401
from ticdc_lakehouse.runtime.config import ChangefeedConfig
from ticdc_lakehouse.landing import (
    DataLossError,
    LandingBusyError,
    LandingError,
    LandingTimeoutError,
    check_contiguous,
    known_partitions,
    list_segments,
    read_segment,
)
from ticdc_lakehouse.landing.kafka_source import consumer_config, land_from_kafka
from ticdc_lakehouse.landing.lock import landing_lock
from ticdc_lakehouse.landing.segments import SegmentWriter, read_partition_payload

pytestmark = pytest.mark.broker


def changefeed(bootstrap: str, *topics: str, **kafka: object) -> ChangefeedConfig:
    return ChangefeedConfig(
        name=f"cf-{uuid.uuid4().hex[:8]}", protocol="open", topics=tuple(topics), bootstrap_servers=bootstrap,
        schema_registry_url="", kafka=dict(kafka), schema_registry={}, consumer_group="",
    )


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        result = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in result]
    finally:
        consumer.close()


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def payload(root: Path, cf: ChangefeedConfig, topic: str, partition: int) -> list[tuple]:
    table = read_partition_payload(root, cf.name, topic, partition)
    return [(r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
            for r in table.to_pylist()]


def ranges(root: Path, cf: ChangefeedConfig) -> dict[tuple[str, int], list[tuple[int, int]]]:
    return {k: [(s.start, s.end) for s in v] for k, v in list_segments(root, cf.name).items()}


def test_first_and_incremental_landing_of_three_partitions(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("orders"), partitions=4)
    headers = [("ticdc-version", b"v8.1.0"), ("empty", None)]
    first = [(b"k%d" % i, b"v%d" % i, headers, i % 3) for i in range(30)]
    produce(kafka_broker, topic, first)
    cf = changefeed(kafka_broker, topic)
    seen = []

    report = land_from_kafka(cf, tmp_path, progress=seen.append)

    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 10)], (topic, 1): [(0, 10)], (topic, 2): [(0, 10)]}
    assert known_partitions(tmp_path, cf.name, topic) == [0, 1, 2, 3]  # partition 3 never received anything
    assert payload(tmp_path, cf, topic, 1)[:2] == [(0, b"k1", b"v1", headers), (1, b"k4", b"v4", headers)]
    assert report.records == 30 and report.files == 3 and not report.data_loss
    assert sorted((p.partition, p.start, p.end, p.records) for p in seen) == [
        (0, 0, 10, 10), (1, 0, 10, 10), (2, 0, 10, 10), (3, 0, 0, 0)]
    assert committed(kafka_broker, cf.group_id, topic, 4)[:3] == [10, 10, 10]
    assert [p.committed for p in report.partitions if p.landed] == [True] * 3  # one batched commit, after durability
    table = read_segment(list_segments(tmp_path, cf.name)[(topic, 0)][0].path)
    assert table.column("topic").to_pylist() == [topic] * 10
    assert all(ts and ts > 1_600_000_000_000 for ts in table.column("timestamp").to_pylist())

    produce(kafka_broker, topic, [(b"n%d" % i, b"new%d" % i, None, 0 if i < 5 else 3) for i in range(8)])
    report = land_from_kafka(cf, tmp_path)

    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 10), (10, 15)], (topic, 1): [(0, 10)], (topic, 2): [(0, 10)],
                                    (topic, 3): [(0, 3)]}
    assert [o for o, *_ in payload(tmp_path, cf, topic, 0)] == list(range(15))
    assert payload(tmp_path, cf, topic, 3) == [(0, b"n5", b"new5", []), (1, b"n6", b"new6", []),
                                               (2, b"n7", b"new7", [])]
    assert report.records == 8 and report.files == 2
    assert check_contiguous(s for segs in list_segments(tmp_path, cf.name).values() for s in segs) == []
    assert land_from_kafka(cf, tmp_path).records == 0  # nothing new: no new files
    assert sum(len(v) for v in ranges(tmp_path, cf).values()) == 5


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec_lands_the_exact_bytes(kafka_broker, tmp_path, codec):
    topic = create_topic(kafka_broker, unique_topic(codec))
    records = [(b"key-%d" % i, (b"row %d " % i) * 50, [("h", b"%d" % i)]) for i in range(200)]
    produce(kafka_broker, topic, records, partition=0, compression=codec, linger_ms=50)
    cf = changefeed(kafka_broker, topic)
    land_from_kafka(cf, tmp_path)
    assert payload(tmp_path, cf, topic, 0) == [(i, k, v, h) for i, (k, v, h) in enumerate(records)]


def test_a_four_mib_message_lands_whole(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("big"))
    big = bytes(range(256)) * (4 * 1024 * 1024 // 256)
    produce(kafka_broker, topic, [(b"small", b"x"), (b"big", big), (b"after", b"y")], partition=0,
            compression="zstd")
    cf = changefeed(kafka_broker, topic)
    report = land_from_kafka(cf, tmp_path)
    rows = payload(tmp_path, cf, topic, 0)
    assert [(o, k) for o, k, *_ in rows] == [(0, b"small"), (1, b"big"), (2, b"after")]
    assert rows[1][2] == big
    assert report.bytes > 4 * 1024 * 1024


def test_a_range_of_only_transaction_markers_gets_a_zero_row_file(kafka_broker, tmp_path):
    from confluent_kafka import Producer

    topic = create_topic(kafka_broker, unique_topic("tx"))
    producer = Producer({"bootstrap.servers": kafka_broker, "transactional.id": unique_topic("txid")})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"aborted%d" % i, partition=0)
    producer.flush(15)  # written to the log, then aborted
    producer.abort_transaction(15)
    # the coordinator writes the partition's ABORT marker after it answers: land once a reader can read past it
    wait_for(lambda: committed_end(kafka_broker, topic) >= 4, "the ABORT marker", 15)
    cf = changefeed(kafka_broker, topic)
    land_from_kafka(cf, tmp_path)
    [segment] = list_segments(tmp_path, cf.name)[(topic, 0)]
    assert (segment.start, segment.end) == (0, 4)  # three aborted records and the ABORT marker
    assert read_segment(segment.path).num_rows == 0

    # the same producer commits next: a fetch that starts after the ABORT marker must not hide its records
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(15)
    wait_for(lambda: committed_end(kafka_broker, topic) >= 6, "the COMMIT marker", 15)
    land_from_kafka(cf, tmp_path)
    assert ranges(tmp_path, cf)[(topic, 0)] == [(0, 4), (4, 6)]
    assert payload(tmp_path, cf, topic, 0) == [(4, None, b"committed", [])]


def test_rerun_after_crashes_lands_the_same_ranges_once(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("crash"), partitions=3)
    produce(kafka_broker, topic, [(None, b"a%d" % i, None, i % 3) for i in range(12)])
    cf = changefeed(kafka_broker, topic)

    def crash_after_first(item):
        raise KeyboardInterrupt("process killed after the first partition")

    with pytest.raises(KeyboardInterrupt):
        land_from_kafka(cf, tmp_path, progress=crash_after_first, parallel=1)
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 4)]}
    assert not list(tmp_path.rglob("*.tmp"))  # the partitions being read when it died were aborted

    # a crash in the middle of partition 1's file leaves a temp file; a crash after a rename, before the
    # group offset commit, leaves a landed file the group does not know about
    crashed = SegmentWriter(tmp_path, cf.name, topic, 1, 0, row_group_records=1, expected_end=4)
    crashed.append(0, 1, None, b"half")
    commit(kafka_broker, cf.group_id, topic, {0: 1})

    report = land_from_kafka(cf, tmp_path)

    assert report.removed_temp_files == [str(crashed.tmp_path)]
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 4)], (topic, 1): [(0, 4)], (topic, 2): [(0, 4)]}
    assert [v for _, _, v, _ in payload(tmp_path, cf, topic, 1)] == [b"a1", b"a4", b"a7", b"a10"]
    assert committed(kafka_broker, cf.group_id, topic, 3) == [4, 4, 4]
    assert report.partition(topic, 0).records == 0 and report.partition(topic, 0).committed is True
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_crash_while_several_partitions_are_read_keeps_only_complete_ones(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("parallel"), partitions=3)
    produce(kafka_broker, topic, [(None, b"%d" % i * 3000, None, i % 3) for i in range(600)])
    cf = changefeed(kafka_broker, topic)

    def crash(item):
        raise SystemExit("killed")

    with pytest.raises(SystemExit):
        land_from_kafka(cf, tmp_path, progress=crash, parallel=3)
    survived = ranges(tmp_path, cf)  # whole segments only (some may have become durable before the crash)
    assert survived and all(r == [(0, 200)] for r in survived.values())
    assert not list(tmp_path.rglob("*.tmp"))
    land_from_kafka(cf, tmp_path, parallel=3)
    assert ranges(tmp_path, cf) == {(topic, p): [(0, 200)] for p in range(3)}


def test_retention_loss_fails_unless_allowed_and_is_recorded(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("retention"), partitions=2)
    produce(kafka_broker, topic, [(None, b"x%d" % i, None, i % 2) for i in range(10)])
    cf = changefeed(kafka_broker, topic)
    land_from_kafka(cf, tmp_path)
    produce(kafka_broker, topic, [(None, b"y%d" % i, None, i % 2) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": kafka_broker})
    for future in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        future.result(timeout=15)

    with pytest.raises(DataLossError, match=r"offsets \[5, 8\) lost: retention") as failure:
        land_from_kafka(cf, tmp_path)
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 5)], (topic, 1): [(0, 5), (5, 10)]}  # partition 1 landed
    assert str(failure.value.report.data_loss[0]).startswith(f"{topic}/0 offsets [5, 8) lost")

    report = land_from_kafka(cf, tmp_path, allow_gap=True)
    assert ranges(tmp_path, cf)[(topic, 0)] == [(0, 5), (5, 8), (8, 10)]
    assert [o for o, *_ in payload(tmp_path, cf, topic, 0)] == [0, 1, 2, 3, 4, 8, 9]
    assert report.data_loss[0].start == 5 and report.data_loss[0].end == 8
    assert "[5, 8)" in report.summary() and "DATA LOSS" in report.summary()
    assert (tmp_path / cf.name / topic / "_data_loss.json").is_file()
    assert land_from_kafka(cf, tmp_path).data_loss == []


def test_broker_down_mid_run_times_out_cleanly_and_rerun_continues(private_broker, tmp_path):
    bootstrap = private_broker.bootstrap
    topic = create_topic(bootstrap, unique_topic("down"), partitions=2)
    produce(bootstrap, topic, [(None, b"v%d" % i, None, i % 2) for i in range(20)])
    cf = changefeed(bootstrap, topic)

    def stop_broker_after_first(item):
        private_broker.stop()

    with pytest.raises(LandingTimeoutError, match=rf"{topic}/1 range \[0, 10\) made no progress") as failure:
        land_from_kafka(cf, tmp_path, progress=stop_broker_after_first, timeout_s=3, parallel=1)
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 10)]}
    assert not list(tmp_path.rglob("*.tmp"))
    assert failure.value.report.partition(topic, 0).records == 10

    with pytest.raises(LandingError, match="failed|not available"):
        land_from_kafka(cf, tmp_path, timeout_s=2)  # still down: the metadata request fails clearly

    private_broker.start()
    land_from_kafka(cf, tmp_path)
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 10)], (topic, 1): [(0, 10)]}


def test_a_broker_restart_mid_landing_is_ridden_out_and_every_offset_lands_once(private_broker, tmp_path):
    """The broker is killed (no controlled shutdown) and started again on the same port and data directory while
    a run is between two partitions: the same run reconnects, lands the rest and commits every partition."""
    bootstrap = private_broker.bootstrap
    topic = create_topic(bootstrap, unique_topic("restart"), partitions=2)
    produce(bootstrap, topic, [(b"k%d" % i, b"v%d" % i, [("seq", b"%d" % i)], i % 2) for i in range(40)])
    cf = changefeed(bootstrap, topic)
    restarts = []

    def restart_after_first(item):
        if not restarts:
            restarts.append(private_broker.pid)
            private_broker.restart(kill=True)

    report = land_from_kafka(cf, tmp_path, progress=restart_after_first, timeout_s=120, parallel=1)

    assert len(restarts) == 1 and private_broker.pid != restarts[0]
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 20)], (topic, 1): [(0, 20)]}
    assert [v for _, _, v, _ in payload(tmp_path, cf, topic, 1)] == [b"v%d" % i for i in range(1, 40, 2)]
    assert report.records == 40 and all(p.committed for p in report.partitions)
    assert committed(bootstrap, cf.group_id, topic, 2) == [20, 20]
    assert land_from_kafka(cf, tmp_path).records == 0


def test_offsets_removed_by_log_compaction_are_skipped_not_reported_lost(kafka_broker, tmp_path):
    """A compacted topic keeps only the last record of each key: the landed range covers the removed offsets
    (contiguous, no data loss) and holds the records Kafka kept, at their own offsets."""
    topic = create_topic(kafka_broker, unique_topic("compacted"), config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "0"})
    produce(kafka_broker, topic, [(b"k%d" % (i % 5), b"old%d" % i) for i in range(5)], partition=0)
    time.sleep(0.3)  # the next append rolls the segment (segment.ms): only closed segments are compacted
    produce(kafka_broker, topic, [(b"k%d" % (i % 5), b"new%d" % i) for i in range(5, 10)], partition=0)
    time.sleep(0.3)
    produce(kafka_broker, topic, [(b"last", b"tail")], partition=0)
    wait_for(lambda: first_offset(kafka_broker, topic) == 5, "the log cleaner to remove offsets 0-4", 90)
    cf = changefeed(kafka_broker, topic)

    report = land_from_kafka(cf, tmp_path)

    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 11)]}
    assert [(o, k, v) for o, k, v, _ in payload(tmp_path, cf, topic, 0)] == [
        (i, b"k%d" % (i % 5), b"new%d" % i) for i in range(5, 10)] + [(10, b"last", b"tail")]
    assert report.records == 6 and report.data_loss == []
    assert committed(kafka_broker, cf.group_id, topic, 1) == [11]


def test_offsets_deleted_by_the_topics_retention_before_landing_are_data_loss(kafka_broker, tmp_path):
    """Kafka's own time-based retention (not a DeleteRecords request) deletes a segment that was never landed:
    the run refuses it as data loss, and ``allow_gap`` records the loss and lands what is left."""
    topic = create_topic(kafka_broker, unique_topic("expiring"), config={"segment.ms": "600000"})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    produce(kafka_broker, topic, [(None, b"a%d" % i) for i in range(10)], partition=0, timestamp_ms=an_hour_ago)
    cf = changefeed(kafka_broker, topic)
    land_from_kafka(cf, tmp_path)
    # records an hour old: each later append rolls the segment (segment.ms is 10 minutes); "c" is new
    produce(kafka_broker, topic, [(None, b"b%d" % i) for i in range(10, 20)], partition=0, timestamp_ms=an_hour_ago)
    produce(kafka_broker, topic, [(None, b"c20")], partition=0)
    set_topic_config(kafka_broker, topic, {"retention.ms": str(30 * 60 * 1000)})  # the old segments expire
    wait_for(lambda: low_watermark(kafka_broker, topic) == 20, "retention to delete offsets 0-19", 90)

    with pytest.raises(DataLossError, match=r"offsets \[10, 20\) lost: retention"):
        land_from_kafka(cf, tmp_path)
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 10)]}

    report = land_from_kafka(cf, tmp_path, allow_gap=True)
    assert ranges(tmp_path, cf)[(topic, 0)] == [(0, 10), (10, 20), (20, 21)]
    assert [(o, v) for o, _, v, _ in payload(tmp_path, cf, topic, 0)] == [(i, b"a%d" % i) for i in range(10)] + [
        (20, b"c20")]
    assert (report.data_loss[0].start, report.data_loss[0].end) == (10, 20)


def wait_for(condition, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s}s for {what}")
        time.sleep(0.3)


def first_offset(bootstrap: str, topic: str) -> int:
    """The offset of the first record a consumer reading partition 0 from offset 0 gets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("peek"),
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(5)
        return -1 if message is None or message.error() else message.offset()
    finally:
        consumer.close()


def committed_end(bootstrap: str, topic: str) -> int:
    """The end of partition 0 a read-committed reader sees (its last stable offset): below an open or
    just-ended transaction until the broker has written the transaction's marker."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("peek"),
                         "isolation.level": "read_committed"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def low_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("peek")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[0]
    finally:
        consumer.close()


def set_topic_config(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in config.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer came
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)


def test_a_recreated_topic_is_refused_instead_of_relanding_old_offsets(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("recreated"))
    produce(kafka_broker, topic, [(None, b"old%d" % i) for i in range(5)], partition=0)
    cf = changefeed(kafka_broker, topic)
    land_from_kafka(cf, tmp_path)
    admin = AdminClient({"bootstrap.servers": kafka_broker})
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=15)
    create_topic(kafka_broker, topic)
    produce(kafka_broker, topic, [(None, b"new")], partition=0)
    with pytest.raises(LandingError, match=r"landed up to offset 5 but Kafka's high watermark is 1: the topic was "
                                           "recreated"):
        land_from_kafka(cf, tmp_path)
    assert ranges(tmp_path, cf) == {(topic, 0): [(0, 5)]}


def test_a_fetch_larger_than_the_receive_limit_fails_fast_with_the_fix(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("limit"))
    produce(kafka_broker, topic, [(None, b"x" * 3_000_000)], partition=0)
    cf = changefeed(kafka_broker, topic, **{"fetch.max.bytes": 1_000_000, "message.max.bytes": 1_000_000,
                                            "receive.message.max.bytes": 2_000_000,
                                            "max.partition.fetch.bytes": 1_000_000})
    with pytest.raises(LandingError, match="raise it"):
        land_from_kafka(cf, tmp_path, timeout_s=30)
    assert list_segments(tmp_path, cf.name) == {} and not list(tmp_path.rglob("*.tmp"))


def test_a_missing_topic_is_a_clear_error(kafka_broker, tmp_path):
    with pytest.raises(LandingError, match="topic 'no-such-topic-x' is not available"):
        land_from_kafka(changefeed(kafka_broker, "no-such-topic-x"), tmp_path, timeout_s=10)


def test_concurrent_runs_of_one_changefeed_are_refused(kafka_broker, tmp_path):
    topic = create_topic(kafka_broker, unique_topic("lock"))
    cf = changefeed(kafka_broker, topic)
    with landing_lock(tmp_path, cf.name):
        with pytest.raises(LandingBusyError):
            land_from_kafka(cf, tmp_path)


def test_extra_kafka_settings_pass_through_but_secrets_never_reach_the_log(kafka_broker, tmp_path, caplog):
    cf = changefeed(kafka_broker, "x", **{"sasl.password": "hunter2", "security.protocol": "SASL_SSL",
                                         "enable.auto.commit": True, "fetch.max.bytes": 200 * 1024 * 1024})
    config = consumer_config(cf)
    assert config["sasl.password"] == "hunter2" and config["security.protocol"] == "SASL_SSL"
    assert config["enable.auto.commit"] is False and config["group.id"] == cf.group_id
    assert config["receive.message.max.bytes"] >= 200 * 1024 * 1024 + 512
    assert config["isolation.level"] == "read_committed" and config["enable.partition.eof"] is True
    for limits in ({"message.max.bytes": 100 * 1024 * 1024}, {"fetch.max.bytes": 300 * 1024 * 1024}, {}):
        Consumer(consumer_config(changefeed(kafka_broker, "x", **limits))).close()  # librdkafka accepts them

    topic = create_topic(kafka_broker, unique_topic("secret"))
    produce(kafka_broker, topic, [(None, b"v")], partition=0)
    cf = changefeed(kafka_broker, topic, **{"sasl.password": "hunter2", "client.id": "custom-landing"})
    with caplog.at_level(logging.DEBUG, logger="ticdc_lakehouse"):
        land_from_kafka(cf, tmp_path)
    assert "hunter2" not in caplog.text
    assert "***" in caplog.text and "custom-landing" in caplog.text


def test_partition_plans_start_at_the_landed_end_and_flag_loss_and_regression():
    from ticdc_lakehouse.landing.kafka_source import plan_partition

    # a first landing of a log that no longer starts at 0: retention removed offsets 0..6 before any landed
    fresh = plan_partition("t", 0, low=7, high=20, landed=None)
    assert (fresh.start, fresh.lost, fresh.regressed) == (7, (0, 7), False)
    assert plan_partition("t", 0, low=0, high=20, landed=None).lost is None
    resumed = plan_partition("t", 0, low=7, high=20, landed=12)
    assert (resumed.start, resumed.lost, resumed.regressed) == (12, None, False)
    lost = plan_partition("t", 0, low=15, high=20, landed=12)
    assert lost.lost == (12, 15)
    assert plan_partition("t", 0, low=0, high=3, landed=12).regressed
