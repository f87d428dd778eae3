"""Files the lakehouse writes are owner-only by default and never looser than the operator's umask.

A real ``lakehouse backfill`` (landing in Python, the merge in Spark through Iceberg's HadoopFileIO, the SQLite
catalog) runs under a chosen umask; then every file and directory it created under ``LAKEHOUSE_HOME`` is checked.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ticdc_lakehouse.sim.workload import Workload, write_to_archive

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


def _backfill(tmp_path: Path, umask: int, config: str) -> Path:
    workload = Workload.started(seed=5, partitions=2, transactions=6)
    workload.resolve(final=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    (tmp_path / "lakehouse.toml").write_text(config)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(home), LAKEHOUSE_CONFIG=str(tmp_path / "lakehouse.toml"),
               LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS="2")
    result = subprocess.run(
        [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "backfill", "--archive", str(archive), "--protocol", "open"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900, preexec_fn=lambda: os.umask(umask))
    assert result.returncode == 0, result.stderr[-3000:]
    return home


def _modes(home: Path) -> dict[str, int]:
    found = {}
    for path in [home, *home.rglob("*")]:
        if path.is_symlink() or "spark-warehouse" in path.parts:
            continue
        found[str(path.relative_to(home.parent))] = stat.S_IMODE(path.stat().st_mode)
    return found


def test_landing_zone_warehouse_and_catalog_are_owner_only_under_the_default_umask(tmp_path):
    home = _backfill(tmp_path, 0o022, "")
    modes = _modes(home)
    kinds = {part for name in modes for part in ("landing", "warehouse", "catalog.db") if part in name}
    assert kinds == {"landing", "warehouse", "catalog.db"}
    assert any(name.endswith(".parquet") and "warehouse" in name for name in modes)  # Spark-written data files
    readable_by_others = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert readable_by_others == {}


def test_the_operators_umask_is_honoured_by_spark_even_when_storage_umask_is_looser(tmp_path):
    home = _backfill(tmp_path, 0o027, '[storage]\numask = "002"\n')
    modes = _modes(home)
    too_open = {name: oct(mode) for name, mode in modes.items() if mode & 0o027}
    assert too_open == {}
    # what the operator allows is kept: group-readable, not owner-only
    assert any(mode & 0o040 for name, mode in modes.items() if "warehouse" in name and name.endswith(".parquet"))
