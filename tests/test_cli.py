"""The `lakehouse` command as a user runs it: a real subprocess, a real Spark JVM, the JDBC catalog on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAKEHOUSE = [sys.executable, "-m", "ticdc_lakehouse.commands.cli"]


def run(args, env, check=True):
    result = subprocess.run(LAKEHOUSE + args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"lakehouse {args} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


@pytest.fixture
def cli_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env["LAKEHOUSE_HOME"] = str(tmp_path / "home")
    return env


@pytest.mark.spark
def test_sql_creates_queries_and_prints_exact_json(cli_env):
    script = (
        "CREATE NAMESPACE IF NOT EXISTS shop; "
        "CREATE TABLE shop.orders (id bigint, price decimal(10,2), day date, at timestamp_ntz, raw binary, "
        "note string) USING iceberg; "
        "INSERT INTO shop.orders VALUES (1, 12.30, DATE'2026-01-02', TIMESTAMP_NTZ'2026-01-02 03:04:05', "
        "X'00FF', 'hé;llo'), (2, NULL, NULL, NULL, NULL, NULL); "
        "SELECT * FROM shop.orders ORDER BY id"
    )
    out = run(["sql", script, "--format", "json"], cli_env).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows == [
        {"id": 1, "price": "12.30", "day": "2026-01-02", "at": "2026-01-02T03:04:05", "raw": "AP8=", "note": "hé;llo"},
        {"id": 2, "price": None, "day": None, "at": None, "raw": None, "note": None},
    ]
    table = run(["sql", "SELECT id, note FROM shop.orders ORDER BY id"], cli_env).stdout
    assert "hé;llo" in table and "(2 rows)" in table


def test_sql_error_is_one_clear_line_and_exit_code(cli_env):
    result = run(["sql", "SELECT * FROM shop.missing", "--as-of-tso", "1"], cli_env, check=False)
    assert result.returncode != 0
    assert "error:" in result.stderr


def test_check_reports_the_stack_without_secrets(cli_env):
    cli_env["LAKEHOUSE_CATALOG_PASSWORD"] = "hunter2"
    result = run(["check"], cli_env)
    assert "pyspark 4.1." in result.stdout
    assert "iceberg 1.11.0 runtime" in result.stdout
    assert "hunter2" not in result.stdout + result.stderr


def test_progress_is_structured_json_when_not_on_a_terminal(capsys):
    import argparse

    from ticdc_lakehouse.commands.cli import _progress

    _progress(argparse.Namespace(command="backfill"))("landed t[0] offsets 0..5: 5 records, 10 bytes")
    line = capsys.readouterr().err.strip()
    record = json.loads(line)
    assert record["command"] == "backfill" and record["message"].startswith("landed t[0]")


def test_skip_message_wants_a_topic_partition_offset(cli_env):
    result = run(["skip-message", "ticdc-5"], cli_env, check=False)
    assert result.returncode != 0
    assert "TOPIC/PARTITION/OFFSET" in result.stderr and "Traceback" not in result.stderr


def test_positions_name_the_topic_even_when_it_has_slashes():
    from ticdc_lakehouse.commands.pipeline import parse_position

    assert parse_position("ticdc/0/17") == ("ticdc", 0, 17)
    assert parse_position("team/a/3/0") == ("team/a", 3, 0)
    for bad in ("ticdc/0", "/0/1", "ticdc/x/1", "ticdc/0/-1"):
        with pytest.raises(ValueError, match="TOPIC/PARTITION/OFFSET"):
            parse_position(bad)


def test_create_tables_says_when_a_file_defines_no_table(cli_env, tmp_path):
    script = tmp_path / "schema.sql"
    script.write_text("CREATE TABLE t (id int PRIMARY KEY); DROP TABLE u;")
    result = run(["create-tables", "--ddl", str(script)], cli_env, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "no database" in result.stderr and "no CREATE TABLE statement" in result.stderr


@pytest.mark.spark
def test_create_tables_repairs_a_table_typed_from_rows_and_says_what_it_did(cli_env, tmp_path):
    """A changefeed started on existing tables: the backfill types ``shop.orders.status`` from Open Protocol rows
    (ENUM indexes, no members). ``create-tables`` refuses members it cannot tell from stored numbers, says so and
    leaves the table alone; with the real DDL it turns the numbers into names and says which columns it repaired."""
    from tests.lake_helpers import archive_of_existing_tables

    workload = archive_of_existing_tables(tmp_path / "archive", seed=44, partitions=1, transactions=3, size=3)
    run(["backfill", "--archive", str(tmp_path / "archive"), "--protocol", "open"], cli_env)

    ddl = workload.show_create_tables()
    members = "enum('new','paid','shipped','cancelled')"
    assert members in ddl
    numeric = tmp_path / "numeric.sql"
    numeric.write_text(ddl.replace(members, "enum('1','2','3','4')"))
    result = run(["create-tables", "--ddl", str(numeric)], cli_env)
    assert "exists  shop.orders (left as it is)" in result.stdout
    assert "kept    shop.orders.status: a member is a number" in result.stderr

    upstream = tmp_path / "upstream.sql"
    upstream.write_text(ddl)
    result = run(["create-tables", "--ddl", str(upstream)], cli_env)
    assert "exists  shop.orders (ENUM/SET column(s) status now hold member names, not numbers)" in result.stdout
    assert "exists  shop.customers (left as it is)" in result.stdout and "kept" not in result.stderr

    out = run(["sql", "SELECT DISTINCT status FROM shop.orders", "--format", "json"], cli_env).stdout
    statuses = {json.loads(line)["status"] for line in out.splitlines()}
    assert statuses and statuses <= {"new", "paid", "shipped", "cancelled", None}
