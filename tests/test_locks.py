"""Two merges of one changefeed never run at once: the second fails fast with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.runtime.locks import LockBusy, changefeed_lock

ROOT = Path(__file__).resolve().parents[1]


def test_second_merge_process_fails_fast_while_one_holds_the_lock(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env["LAKEHOUSE_HOME"] = str(tmp_path)
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    with changefeed_lock(settings, "default"):
        result = subprocess.run([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "merge"], env=env, cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "merge of changefeed 'default' not started: another merge (pid" in result.stderr
    assert not (tmp_path / "catalog.db").exists(), "it must fail before Spark opens the catalog"


def test_lock_is_reentrant_for_nobody_and_released_after_use(tmp_path):
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    with changefeed_lock(settings, "a"):
        with pytest.raises(LockBusy):
            with changefeed_lock(settings, "a"):
                pass
        with changefeed_lock(settings, "b"):
            pass  # another changefeed is independent
    with changefeed_lock(settings, "a"):
        pass


KILLED_DRIVER = """
import os, signal, sys
from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.runtime.locks import changefeed_lock
from ticdc_lakehouse.runtime.spark_session import get_spark

settings = load_settings(env={"LAKEHOUSE_HOME": sys.argv[1], "LAKEHOUSE_CONFIG": ""})
spark = get_spark(settings, "killed-driver")
with changefeed_lock(settings, "default", spark):
    print(spark._jvm.java.lang.ProcessHandle.current().pid(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.spark
def test_a_killed_drivers_jvm_holds_the_driver_lock_until_it_has_exited(spark_session, tmp_path):
    """The JVM of a SIGKILLed Python driver lives on for a moment, finishing commits already under way: the next
    run gets the Python lock at once, but waits for that JVM before it may read or commit anything."""
    from ticdc_lakehouse.runtime.locks import driver_lock

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    out, err = tmp_path / "driver.out", tmp_path / "driver.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:  # not pipes: reading them would wait for the JVM
        driver = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER, str(tmp_path)], env=env, cwd=ROOT,
                                  stdout=stdout, stderr=stderr)
    assert driver.wait(timeout=300) == -9, err.read_text()[-2000:]
    orphan_jvm = int(out.read_text().split()[-1])
    assert _running(orphan_jvm), "the killed driver's JVM outlives it (what this lock is for)"
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    with changefeed_lock(settings, "default"):  # the Python side's lock died with the Python process
        with driver_lock(spark_session, settings, "default"):
            assert not _running(orphan_jvm)
            with pytest.raises(LockBusy, match="already merges"):  # one JVM, one merge of a changefeed
                with driver_lock(spark_session, settings, "default"):
                    pass
    with changefeed_lock(settings, "default", spark_session):  # released: taken again at once
        pass
