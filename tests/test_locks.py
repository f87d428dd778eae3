"""Two merges of one changefeed never run at once: the second fails fast with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ticdc_lakehouse.config import load_settings
from ticdc_lakehouse.locks import LockBusy, changefeed_lock

ROOT = Path(__file__).resolve().parents[1]


def test_second_merge_process_fails_fast_while_one_holds_the_lock(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env["LAKEHOUSE_HOME"] = str(tmp_path)
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": ""})
    with changefeed_lock(settings, "default"):
        result = subprocess.run([sys.executable, "-m", "ticdc_lakehouse.cli", "merge"], env=env, cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "another merge of changefeed 'default' is running" in result.stderr
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
