"""``lakehouse run --every``: cycles in one long-lived driver, each landing and merging what Kafka got since the
last; SIGTERM ends it after the running cycle, a failed cycle ends it with its exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ticdc_lakehouse.commands.continuous import run_every
from tests.broker_fixture import changefeed_env, create_topic, kafka_broker, produce, unique_topic  # noqa: F401
from tests.lake_helpers import assert_lake_equals_upstream

ROOT = Path(__file__).resolve().parents[1]
CHANGEFEED = "loopcf"


def test_cycles_run_start_to_start_and_stop_after_their_count():
    starts: list[float] = []

    def cycle() -> dict:
        starts.append(time.monotonic())
        time.sleep(0.05)
        return {"ok": True}

    assert run_every(cycle, lambda result: 0, every_s=0.2, cycles=3) == 0
    assert len(starts) == 3
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(0.19 <= gap < 0.4 for gap in gaps), gaps  # the interval counts from each start, not each end


def test_the_first_failed_cycle_ends_the_loop_with_its_exit_code():
    results = iter([{"ok": True}, {"ok": False}, {"ok": True}])
    ran: list[dict] = []

    def cycle() -> dict:
        ran.append(next(results))
        return ran[-1]

    assert run_every(cycle, lambda result: 0 if result["ok"] else 1, every_s=0) == 1
    assert len(ran) == 2  # nothing after the failure: the supervisor starts a fresh process


def test_a_stop_lets_the_running_cycle_finish_and_starts_no_other():
    stop = threading.Event()
    ran: list[int] = []

    def cycle() -> dict:
        ran.append(1)
        stop.set()  # SIGTERM while the cycle runs
        return {"ok": True}

    assert run_every(cycle, lambda result: 0, every_s=3600, stop=stop) == 0
    assert ran == [1]


@pytest.mark.parametrize("arguments", [["--cycles", "2"], ["--every", "-1"], ["--every", "5", "--cycles", "0"]])
def test_a_wrong_schedule_is_a_usage_error_before_any_work(tmp_path, arguments):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "run", *arguments], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert [line for line in done.stderr.splitlines() if line.startswith("error:")] != [], done.stderr
    assert not (tmp_path / "home").exists()  # nothing started


def _produce(bootstrap: str, topic: str, workload) -> None:
    from ticdc_lakehouse.sim.workload import encode_partitions

    for partition, records in encode_partitions(workload.new_events(), "open").items():
        produce(bootstrap, topic, [(key, value, None, partition) for key, value, _h, _ts in records])


@pytest.mark.spark
def test_run_every_merges_each_cycle_s_new_records_in_one_driver_and_stops_on_sigterm(spark_session, tmp_path,
                                                                                      kafka_broker):  # noqa: F811
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import use_catalog
    from ticdc_lakehouse.sim.workload import Workload

    topic = create_topic(kafka_broker, unique_topic("loop"), partitions=2)
    workload = Workload.started(seed=51, partitions=2, transactions=10)
    workload.resolve(final=True)
    _produce(kafka_broker, topic, workload)
    env = changefeed_env(tmp_path, kafka_broker, topic, CHANGEFEED, "lake_loop")
    with open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "run", "--every", "1",
                                    "--format", "json"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr,
                                   text=True)
    watchdog = threading.Timer(300, process.kill)  # a hung driver fails the test instead of blocking CI
    watchdog.start()
    try:
        first = json.loads(process.stdout.readline())  # one JSON line per cycle
        assert first["ok"] and first["merge"]["resolved_ts"] == workload.global_resolved_ts(), first
        # a second batch of transactions, produced while the driver waits for its next cycle
        for _ in range(8):
            workload.transaction(3)
        workload.resolve(final=True)
        _produce(kafka_broker, topic, workload)
        deadline = time.monotonic() + 120
        while True:
            cycle = json.loads(process.stdout.readline())
            assert cycle["ok"], cycle
            if cycle["merge"]["resolved_ts"] == workload.global_resolved_ts() or time.monotonic() > deadline:
                break
        assert cycle["merge"]["resolved_ts"] == workload.global_resolved_ts(), cycle
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0, (tmp_path / "stderr").read_text()
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
    use_catalog(spark_session, load_settings(env=env))
    assert_lake_equals_upstream(spark_session, workload, workload.global_resolved_ts())
