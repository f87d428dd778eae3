"""The driver JVM started from its kept command: the command's digest, the launcher's output, a real driver started
with and without the launcher, and the fallback to spark-submit when the kept command does not start one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ticdc_lakehouse import PROJECT_ROOT
from ticdc_lakehouse.runtime import driver_launch
from ticdc_lakehouse.runtime.driver_launch import (
    SparkInstall,
    launch_digest,
    parse_launcher_output,
    script_environment,
    spark_install,
    start_driver,
    submit_arguments,
)

CONF = {"spark.master": "local[1]", "spark.app.name": "driver-launch-test", "spark.ui.enabled": "false"}


def test_the_launcher_output_gives_the_command_after_its_marker():
    output = b"a message for the user\n\0\nenv\0LD_LIBRARY_PATH=/x\0/usr/bin/java\0-cp\0a b\0Main\0"
    assert parse_launcher_output(output) == ["env", "LD_LIBRARY_PATH=/x", "/usr/bin/java", "-cp", "a b", "Main"]
    with pytest.raises(ValueError):
        parse_launcher_output(b"Usage: spark-submit [options]\n")


def test_the_submit_arguments_are_pysparks(monkeypatch):
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert submit_arguments({"spark.master": "local[2]", "spark.app.name": "x y"}) == [
        "--conf", "spark.master=local[2]", "--conf", "spark.app.name=x y", "pyspark-shell"]
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-memory 3g pyspark-shell")
    assert submit_arguments({})[-3:] == ["--driver-memory", "3g", "pyspark-shell"]


def test_the_digest_follows_everything_the_command_depends_on(tmp_path):
    install = SparkInstall(tmp_path, tmp_path / "conf", "/usr/bin/java")
    env = {"SPARK_HOME": str(tmp_path), "HOME": "/root"}
    first = launch_digest(["--conf", "a=1"], install, env)
    assert launch_digest(["--conf", "a=1"], install, {**env, "HOME": "/elsewhere"}) == first  # not read
    assert launch_digest(["--conf", "a=2"], install, env) != first
    assert launch_digest(["--conf", "a=1"], install, {**env, "SPARK_SUBMIT_OPTS": "-Dx=1"}) != first
    assert launch_digest(["--conf", "a=1"], install, {**env, "JAVA_HOME": "/opt/jdk"}) != first
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.driver.memory 4g\n")
    assert launch_digest(["--conf", "a=1"], install, env) != first


def test_a_spark_env_script_leaves_the_start_to_spark_submit(tmp_path, monkeypatch):
    assert spark_install() is not None
    (tmp_path / "spark-env.sh").write_text("export SPARK_DRIVER_OPTS=-Dx=1\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_install() is None  # the scripts would source it: only spark-submit starts the driver as it says


def test_a_gateway_pyspark_is_told_to_use_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert start_driver(CONF, kept_in=tmp_path) is None
    assert not list(tmp_path.iterdir())


def test_a_kept_command_that_starts_no_driver_is_deleted(tmp_path):
    install = spark_install()
    args = submit_arguments(CONF)
    kept = tmp_path / f"driver-{launch_digest(args, install, script_environment(install))}.cmd"
    kept.write_bytes(b"\0\nfalse\0")  # exits at once, never writes the connection file
    assert start_driver(CONF, kept_in=tmp_path) is None
    assert not kept.exists()  # the next start asks the launcher again; this one is spark-submit's


def test_old_commands_are_dropped_beyond_the_kept_number(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_launch, "KEPT_COMMANDS", 2)
    for number in range(4):
        driver_launch._keep(tmp_path / f"driver-{number}.cmd", ["java", str(number)])
        os.utime(tmp_path / f"driver-{number}.cmd", (number, number))
    assert sorted(path.name for path in tmp_path.glob("driver-*.cmd")) == ["driver-2.cmd", "driver-3.cmd"]
    assert parse_launcher_output((tmp_path / "driver-3.cmd").read_bytes()) == ["java", "3"]


_START = textwrap.dedent("""
    import json, sys
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from ticdc_lakehouse.runtime import driver_launch
    conf, kept_in, launcher_fails = json.loads(sys.argv[1])
    if launcher_fails:
        def refused(*args, **kwargs):
            raise OSError("the launcher was asked")
        driver_launch.subprocess.run = refused
    gateway = driver_launch.start_driver(conf, kept_in=__import__("pathlib").Path(kept_in))
    SparkContext._ensure_initialized(gateway=gateway)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    print(json.dumps({"started": gateway is not None, "count": spark.range(5).count(),
                      "master": spark.sparkContext.master}))
""")


def _start(tmp_path: Path, launcher_fails: bool) -> dict:
    result = subprocess.run([sys.executable, "-c", _START, json.dumps([CONF, str(tmp_path), launcher_fails])],
                            capture_output=True, text=True, timeout=180, cwd=PROJECT_ROOT,
                            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.spark
def test_a_driver_starts_from_the_launchers_command_then_from_the_kept_one_without_the_launcher(tmp_path):
    first = _start(tmp_path, launcher_fails=False)
    assert first == {"started": True, "count": 5, "master": "local[1]"}
    assert len(list(tmp_path.glob("driver-*.cmd"))) == 1
    # the same session again with the launcher unreachable: the kept command starts it
    assert _start(tmp_path, launcher_fails=True) == first


@pytest.mark.spark
def test_the_test_session_was_started_from_a_kept_command(spark):
    process = spark.sparkContext._gateway.proc
    assert process is not None
    assert "spark-submit" not in " ".join(process.args)  # the driver's own command, not the scripts
    assert any(part.endswith("java") for part in process.args)


_SESSION = textwrap.dedent("""
    import json, sys
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import get_spark
    settings = load_settings(env={"LAKEHOUSE_HOME": sys.argv[1], "LAKEHOUSE_CONFIG": "",
                                  "LAKEHOUSE__SPARK__KEPT_DRIVER_COMMAND": "false"})
    spark = get_spark(settings, "spark-submit-test")
    print(json.dumps({"started_by": spark.sparkContext._gateway.proc.args[0], "count": spark.range(3).count()}))
""")


@pytest.mark.spark
def test_with_the_setting_off_spark_submit_starts_the_driver(tmp_path):
    result = subprocess.run([sys.executable, "-c", _SESSION, str(tmp_path)], capture_output=True, text=True,
                            timeout=180, cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    started = json.loads(result.stdout.strip().splitlines()[-1])
    assert started["started_by"].endswith("spark-submit") and started["count"] == 3


def test_a_process_ending_while_its_driver_starts_stops_it_and_leaves_no_folder(tmp_path, monkeypatch):
    """``cli.run`` ends the process with ``os._exit``, which stops the daemon thread starting the driver where it
    stands: ``remove_starting_connections`` stops that driver and removes its connection folder, and the kept
    command (not at fault) stays."""
    import threading
    import time

    monkeypatch.setattr(driver_launch, "_STARTING", {})
    monkeypatch.setattr(driver_launch, "_ENDING", threading.Event())
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(driver_launch.tempfile, "tempdir", None)  # re-read TMPDIR
    install = spark_install()
    kept = tmp_path / f"driver-{launch_digest(submit_arguments(CONF), install, script_environment(install))}.cmd"
    kept.write_bytes(b"\0\nsleep\x0030\0")  # a driver that takes its time to listen
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(start_driver(CONF, kept_in=tmp_path)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not any(proc is not None for proc in driver_launch._STARTING.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    [(folder, proc)] = driver_launch._STARTING.items()
    assert folder.parent == tmp_path / "tmp" and folder.is_dir()
    driver_launch.remove_starting_connections()
    assert not folder.exists() and proc.returncode is not None
    thread.join(30)
    assert outcome == [None] and kept.exists()
    assert not list((tmp_path / "tmp").iterdir())


def test_a_command_failing_while_the_driver_starts_says_one_line_and_leaves_no_folder(tmp_path):
    """End to end: a backfill of an archive with no log files fails after the driver began to start; the user sees
    the one error line (no Java stack trace of a driver that lost its folder), and nothing is left in TMPDIR."""
    archive, scratch = tmp_path / "archive", tmp_path / "tmp"
    archive.mkdir()
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(tmp_path / "home"), TMPDIR=str(scratch))
    for _ in range(2):
        result = subprocess.run([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive",
                                 str(archive), "--protocol", "open"], env=env, cwd=PROJECT_ROOT,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 1
        assert "no Kafka log files found" in result.stderr
        assert "Exception" not in result.stderr and "\tat " not in result.stderr, result.stderr
        assert not [p for p in scratch.iterdir() if p.name.startswith("lakehouse-driver-")]


def test_connection_folders_of_killed_processes_are_removed_once_old(tmp_path):
    """A process killed while its driver started (SIGKILL runs no cleanup) leaves its connection folder; the next
    start removes this user's folders older than an hour, and nothing else."""
    import time

    from ticdc_lakehouse.runtime.driver_launch import ABANDONED_AFTER_SECONDS, remove_abandoned_connections

    now = time.time()
    old, fresh = tmp_path / "lakehouse-driver-old", tmp_path / "lakehouse-driver-fresh"
    for folder in (old, fresh):
        folder.mkdir()
        (folder / "connection").write_bytes(b"x" * 72)
    os.utime(old, (now - ABANDONED_AFTER_SECONDS - 5,) * 2)
    not_a_folder = tmp_path / "lakehouse-driver-file"
    not_a_folder.write_text("mine")
    os.utime(not_a_folder, (now - 2 * ABANDONED_AFTER_SECONDS,) * 2)
    other = tmp_path / "other-old"
    other.mkdir()
    os.utime(other, (now - 2 * ABANDONED_AFTER_SECONDS,) * 2)
    remove_abandoned_connections(tmp_path, now=now)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lakehouse-driver-file", "lakehouse-driver-fresh",
                                                         "other-old"]
