"""`lakehouse status` shows each table once whatever its case, and creates nothing where nothing is (issue 20.6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.lake_helpers import backfill_open_protocol_runs
from ticdc_lakehouse.core.model import INSERT, DDLEvent, Position, ResolvedEvent, RowChange

AT = Position("t", 0, 0)


def test_status_in_an_empty_directory_creates_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    result = subprocess.run([sys.executable, "-m", "ticdc_lakehouse.commands.cli", "status", "--no-kafka"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no catalog there yet" in result.stdout and "nothing applied yet" in result.stdout
    assert list(tmp_path.iterdir()) == []  # no ./.lakehouse, no catalog.db, no spark-warehouse


@pytest.mark.spark
def test_a_mixed_case_table_is_listed_once_and_found(spark, settings, tmp_path):
    from ticdc_lakehouse.commands.status import collect_status, render_status

    types = {"id": "int", "note": "varchar"}
    events = [
        DDLEvent("shop2", "", 100, "CREATE DATABASE shop2", "CREATE_SCHEMA", AT),
        DDLEvent("shop2", "OrderLog", 101, "CREATE TABLE OrderLog (id int PRIMARY KEY, note varchar(9))",
                 "CREATE_TABLE", AT),
        RowChange("shop2", "OrderLog", 110, INSERT, {"id": "1", "note": "a"}, None, ("id",), types, AT),
        ResolvedEvent(200, AT),
    ]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", events)
    status = collect_status(settings, kafka=False, spark=spark)
    tables = status["changefeeds"][0]["tables"]
    assert [(t["table"], t["exists"], t["watermark"]) for t in tables] == [("shop2.OrderLog", True, 200)]
    assert "missing" not in render_status(status)
