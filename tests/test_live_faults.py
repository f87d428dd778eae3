"""The live path under faults: a producer writing, ``lakehouse run`` killed, the broker down, a landed file cut
short and a poison message, and still the tables end equal to the upstream with every anomaly in status.

While a TiCDC workload (Open Protocol, two partitions) is produced chunk by chunk to the real broker:

1. a ``lakehouse run`` is SIGKILLed at a random moment, with the broker stopped and restarted under its landing;
2. a ``lakehouse run`` dies at the landing crash point (segment renamed, group offset not committed);
3. a ``lakehouse run`` dies at a merge crash point (one table committed, the checkpoint not written);
4. a landed segment the merge has not read yet is truncated;
5. one final ``lakehouse run`` (in-process) after the producer finished.

The tables then equal the upstream at its last resolved ts, the poison message is the one dead letter, the
truncated segment is quarantined and landed again, and ``lakehouse status`` names both. Bounded: the three
killed runs are subprocesses (one JVM start each), the last run shares the test session's JVM.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.broker_fixture import (  # noqa: F401  (fixture)
    changefeed_env,
    create_topic,
    kafka_broker,
    produce,
    start_broker,
    stop_broker,
    unique_topic,
)
from tests.lake_helpers import assert_lake_equals_upstream

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]
CHANGEFEED = "livecf"
POISON = (b"poison-key", b"\xff\xfe this is not an Open Protocol message")


def _chunks(seed: int):
    """The workload and its records, in chunks of a couple of transactions, the poison message in the middle."""
    from ticdc_lakehouse.sim.workload import Workload, encode_partitions

    workload = Workload(seed=seed, partitions=2)
    workload.create_sample_tables()
    workload.resolve(final=True)
    chunks = [encode_partitions(workload.new_events(), "open")]
    for index in range(16):
        workload.transaction(3)
        if index % 2 == 1:
            workload.resolve()
        chunks.append(encode_partitions(workload.new_events(), "open"))
        if index == 7:
            chunks.append({0: [(*POISON, None, None)]})
    workload.resolve(final=True)
    chunks.append(encode_partitions(workload.new_events(), "open"))
    return workload, chunks


class _Producer(threading.Thread):
    """Sends the chunks one after the other with a pause between them (retrying through a broker outage)."""

    def __init__(self, bootstrap: str, topic: str, chunks, pause_s: float, hold_at: int) -> None:
        super().__init__(name="live-producer", daemon=True)
        self.bootstrap, self.topic, self.chunks, self.pause_s = bootstrap, topic, chunks, pause_s
        self.hold_at = hold_at  # chunks from here on wait for ``release``: the second killed run has new data
        self.release = threading.Event()
        self.sent = 0
        self.poison_offset: int | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for index, chunk in enumerate(self.chunks):
                if index == self.hold_at:
                    self.release.wait(timeout=600)
                for partition, records in chunk.items():
                    if records:
                        done = produce(self.bootstrap, self.topic,
                                       [(k, v, None, partition) for k, v, _h, _t in records],
                                       message_timeout_ms=120000)
                        if records[0][1] == POISON[1]:
                            self.poison_offset = done[0][1]
                self.sent += 1
                time.sleep(self.pause_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def _run(env: dict, log: Path, **fault: str) -> subprocess.Popen:
    with open(log, "w") as stderr:  # a file, not a pipe: a run nobody reads must never block on a full pipe
        return subprocess.Popen([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "run"], env=dict(env, **fault),
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)


def test_live_landing_survives_kills_broker_outage_truncation_and_poison(spark_session, tmp_path,
                                                                         kafka_broker):  # noqa: F811
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.landing.segments import partition_segments
    from ticdc_lakehouse.commands.pipeline import run_cycle
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.runtime.state import StateStore
    from ticdc_lakehouse.commands.status import collect_status, render_status

    rng = random.Random(int(os.environ.get("LIVE_FAULT_SEED", "20")))
    workload, chunks = _chunks(seed=rng.randrange(1000))
    topic = create_topic(kafka_broker, unique_topic("live"), partitions=2)
    env = changefeed_env(tmp_path, kafka_broker, topic, CHANGEFEED, "lake_live")
    settings = load_settings(env=env)
    began = time.monotonic()
    half = len(chunks) // 2
    producer = _Producer(kafka_broker, topic, chunks, pause_s=0.2, hold_at=half)
    producer.start()
    outcomes = []
    try:
        # 1. killed at a random moment; the broker goes down under its landing and comes back
        while producer.sent < 3:
            time.sleep(0.1)
        run = _run(env, tmp_path / "run1.err")
        time.sleep(1.0)
        stop_broker()
        time.sleep(rng.uniform(2.0, 4.0))
        start_broker()
        time.sleep(rng.uniform(1.0, 8.0))
        run.kill()  # unless it already finished: then it was simply a run that went through the outage
        outcomes.append(("random SIGKILL", run.wait(timeout=60)))
        # 2. the landing crash point (a segment renamed into place, its group offset not committed), with the
        # producer going on
        producer.release.set()
        while producer.sent <= half:
            time.sleep(0.1)
        run = _run(env, tmp_path / "run2.err", LAKEHOUSE_FAULT_POINT="land.after_rename",
                   LAKEHOUSE_FAULT_HIT="1")
        outcomes.append(("land.after_rename", run.wait(timeout=300)))
        # 3. the merge crash point (one table committed, no checkpoint), once everything is produced
        producer.join(timeout=300)
        run = _run(env, tmp_path / "run3.err", LAKEHOUSE_FAULT_POINT="merge.after_table_commit",
                   LAKEHOUSE_FAULT_HIT="1")
        code = run.wait(timeout=600)
        outcomes.append(("merge.after_table_commit", code))
        assert code == -signal.SIGKILL, (tmp_path / "run3.err").read_text()[-3000:]
    finally:
        start_broker()  # whatever happened above, the shared broker is up again
        producer.release.set()
        producer.join(timeout=300)
    assert producer.error is None and producer.sent == len(chunks)
    codes = [code for _, code in outcomes]
    # the first run was killed, went through the outage, or failed cleanly because of it (one `error:` line)
    if codes[0] not in (-signal.SIGKILL, 0):
        last = (tmp_path / "run1.err").read_text().strip().splitlines()[-1]
        assert codes[0] in (1, 2) and last.startswith("error:"), (codes[0], last)
    assert codes[1:] == [-signal.SIGKILL] * 2, outcomes

    # 4. a landed segment that no merge has read yet (the last run died before its checkpoint) is cut short
    victim = partition_segments(settings.landing_path, CHANGEFEED, topic, 0)[-1]
    with open(victim.path, "r+b") as handle:
        handle.truncate(victim.path.stat().st_size // 3)

    # 5. the final run repairs everything it can see
    killed_s = time.monotonic() - began
    use_catalog(spark_session, settings)
    result = run_cycle(settings, CHANGEFEED, spark=spark_session)
    assert result["ok"], result
    assert [(q["partition"], q["start"], q["end"]) for q in result["merge"]["quarantined"]] == \
        [(0, victim.start, victim.end)]
    cut = workload.global_resolved_ts()
    assert result["merge"]["resolved_ts"] == cut
    assert_lake_equals_upstream(spark_session, workload, cut)

    letters = StateStore(spark_session, settings.catalog_name).table("dead_letters")
    rows = spark_session.sql(f"SELECT topic, partition, offset FROM {letters}").collect()
    assert [tuple(r) for r in rows] == [(topic, 0, producer.poison_offset)]

    text = render_status(collect_status(settings, CHANGEFEED, spark=spark_session))
    assert f"QUARANTINED segment {topic}/0 offsets [{victim.start}, {victim.end})" in text
    assert "landed again" in text
    assert "dead letters: 1" in text and f"{topic}/0@{producer.poison_offset}" in text
    assert "LANDING PROBLEM" not in text and "DATA LOSS" not in text
    assert "total lag 0 record(s)" in text
    print(f"\nlive faults: {outcomes} + broker restart ({killed_s:.0f} s), truncated {victim.path.name}, poison; "
          f"final run equal at {cut} ({time.monotonic() - began - killed_s:.0f} s)")
