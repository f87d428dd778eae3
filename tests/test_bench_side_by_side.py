"""``bench/side_by_side.py``: two variants backfill at once, each lake checked value by value, and each pair's CPU
time is printed by thread group with B/A beside it (the figures themselves are timings: not checked)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lake_helpers import bench_module

ROOT = Path(__file__).resolve().parents[1]
JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp /opt/spark/jars/* org.apache.spark.deploy.SparkSubmit"
PYTHON = "/repo/.venv/bin/python -m ticdc_lakehouse.commands.cli backfill"


@pytest.mark.parametrize("command, thread, is_driver, group", [
    (JAVA, "C1 CompilerThre", False, "jvm compiler"),
    (JAVA, "C2 CompilerThre", False, "jvm compiler"),
    (JAVA, "GC Thread#0", False, "jvm gc"),
    (JAVA, "G1 Refine#0", False, "jvm gc"),
    (JAVA, "Executor task l", False, "jvm tasks"),
    (JAVA, "Thread-3", False, "jvm gateway"),
    (JAVA, "dag-scheduler-e", False, "jvm other"),
    ("java -version", "main", False, "jvm other"),
    (PYTHON, "python", True, "python driver"),
    (PYTHON, "spark-start", True, "python driver"),
    ("/repo/.venv/bin/python -m ticdc_lakehouse.runtime.python_daemon", "python", False, "python workers"),
])
def test_each_thread_counts_in_its_group(command, thread, is_driver, group):
    assert bench_module("side_by_side").thread_group(command, thread, is_driver) == group


def test_the_summary_is_the_median_of_the_pairs_own_ratios_and_says_where_cpu_moved():
    sbs = bench_module("side_by_side")

    def run(seconds: float, tasks: float, compiler: float):
        return sbs.Run(seconds, {**dict.fromkeys(sbs.GROUPS, 0.0), "jvm tasks": tasks, "jvm compiler": compiler})

    # the machine's speed differs between the pairs; within each, B spends 1 CPU-s less compiling
    pairs = [(run(20, 10, 5), run(19, 10, 4)), (run(40, 20, 10), run(40, 20, 9)), (run(30, 15, 5), run(30, 15, 4))]
    text = sbs.summary(pairs)
    assert "B/A CPU time: median 0.95x (pairs: 0.93, 0.97, 0.95)" in text, text
    assert "wall: median 1.00x (pairs: 0.95, 1.00, 1.00)" in text, text
    assert "B - A by group (CPU-s, median of the pairs): jvm compiler -1.0" in text, text
    assert "jvm tasks" not in text.splitlines()[1], text  # no change: not listed


def test_the_cpu_of_a_process_tree_is_read_thread_by_thread():
    sbs = bench_module("side_by_side")
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.3: pass\ntime.sleep(5)"])
    try:
        tree = sbs.TreeCpu(child.pid)
        for _ in range(100):  # the child burns 0.3 CPU-s, then sleeps
            tree.sample()
            if tree.by_group()["python driver"] >= 0.25:
                break
            time.sleep(0.05)
        assert tree.by_group()["python driver"] >= 0.25, tree.by_group()
        assert set(tree.by_group()) == set(sbs.GROUPS)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("arguments, message", [
    (["--pairs", "0"], "--pairs needs at least 1"),
    (["--b-config", "/nonexistent/b.toml"], "--b-config /nonexistent/b.toml: no such file"),
    (["--a-root", "/"], "not a checkout of this project"),
    (["--case", "everything"], "invalid choice: 'everything'"),
])
def test_bad_options_are_refused_before_any_work(arguments, message, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "side_by_side.py"), *arguments, "--workdir",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and message in done.stderr, done.stderr


@pytest.mark.spark
@pytest.mark.bench
def test_a_pair_of_backfills_side_by_side(tmp_path):
    config = tmp_path / "b.toml"
    config.write_text('[spark]\nshuffle_partitions = 2\n')
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "side_by_side.py"), "--transactions", "200",
                           "--case", "distinct", "--many-tables", "6", "--pairs", "1", "--b-config", str(config),
                           "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    number = r"\d+(?:\.\d+)?"
    out = done.stdout
    assert re.search(r"case distinct: \d+ row events over 6 tables, 6 DDL", out), out
    for side in ("A", "B"):
        assert re.search(rf"{side} {number} s wall, {number} CPU-s \(jvm tasks {number}, ", out), out
        assert (tmp_path / "distinct" / f"pair1_{side}" / "catalog.db").is_file()  # each its own lake, checked
    assert re.search(rf"B/A CPU time: median {number}x \(pairs: {number}\); wall: median {number}x", out), out
