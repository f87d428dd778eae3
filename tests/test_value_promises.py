"""No value is ever changed silently: what a user sees after `lakehouse backfill` of a topic whose values do not fit.

One archived Open Protocol topic, written the way TiCDC writes it, holds every trap of issue 19 (items 3, 6, 7, 8)
and issue 20 (item 1); `lakehouse backfill` runs twice as a user runs it (a second batch of segments arrives), and
the tests read the rows, types, dead letters and `lakehouse status` as a user would.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ticdc_lakehouse.sim.archive_writer import write_archive
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange

ROOT = Path(__file__).resolve().parents[1]
LAKEHOUSE = [sys.executable, "-m", "ticdc_lakehouse.commands.cli"]
AT = Position("ticdc-v", 0, 0)

PRICES = {"id": "int", "amount": "decimal(5,2)", "f": "double", "fl": "float"}
KEYED = {"id": "int", "note": "varchar(10)"}
ROWDEC = {"id": "int", "d": "decimal"}  # Open Protocol carries no precision
BITS = {"id": "int", "b": "bit"}  # nor a BIT width
#: stands for the text a broken producer put in an INT key (patched into the encoded message)
NINE = "987654321"


def _row(table, ts, op, values, types, before=None):
    after = None if op == DELETE else values
    return RowChange("v", table, ts, op, after, before if op != INSERT else None, ("id",), types, AT)


def _ddl(table, ts, query, kind):
    return DDLEvent("v", table, ts, query, kind, AT)


def _messages(events):
    encoder = OpenProtocolEncoder()
    out = []
    for event in events:
        key, value = encoder.encode(event)
        if isinstance(event, RowChange) and event.after and event.after.get("id") == NINE:
            body = encoder.event_json(event)[1].replace(f'"v":{NINE}'.encode(), b'"v":"nine"')
            assert b'"v":"nine"' in body  # {"t":3,"h":true,"f":11,"v":"nine"}
            value = struct.pack(">Q", len(body)) + body
        out.append((key, value, [], None))
    return out


FIRST_RUN = [
    _ddl("", 100, "CREATE DATABASE v", "CREATE_SCHEMA"),
    _ddl("prices", 101, "CREATE TABLE v.prices (id INT PRIMARY KEY, amount DECIMAL(5,2), f DOUBLE, fl FLOAT)",
         "CREATE_TABLE"),
    _ddl("keyed", 102, "CREATE TABLE v.keyed (id INT PRIMARY KEY, note VARCHAR(10))", "CREATE_TABLE"),
    _row("prices", 110, INSERT, {"id": "1", "amount": "1.50", "f": "-0.0", "fl": "-0.0"}, PRICES),
    _row("prices", 111, INSERT, {"id": "2", "amount": "12345.67", "f": "1.0", "fl": "1.0"}, PRICES),  # too wide
    _row("prices", 112, INSERT, {"id": "3", "amount": "1.234", "f": "2.0", "fl": "2.0"}, PRICES),  # would round
    _row("prices", 113, INSERT, {"id": "4", "amount": "999.99", "f": "0.0", "fl": "0.0"}, PRICES),
    _row("keyed", 114, INSERT, {"id": "1", "note": "a"}, KEYED),
    _row("keyed", 115, UPDATE, {"id": NINE, "note": "z"}, KEYED, before={"id": "1", "note": "a"}),
    _row("keyed", 116, INSERT, {"id": "2", "note": "b"}, KEYED),
    _row("rowdec", 117, INSERT, {"id": "1", "d": None}, ROWDEC),  # the first (sampled) value is NULL
    _row("rowdec", 118, INSERT, {"id": "2", "d": "1.23456789012"}, ROWDEC),
    _row("bits", 119, INSERT, {"id": "1", "b": "5"}, BITS),
    _ddl("prices", 150, "ALTER TABLE v.prices ADD COLUMN h INT NOT NULL DEFAULT 0x10, ADD COLUMN t TIME NOT NULL, "
         "ADD COLUMN s SET('a','b') NOT NULL, ADD COLUMN bb BIT(8) DEFAULT 7, "
         "ADD COLUMN vb VARBINARY(10) NOT NULL DEFAULT 'x', ADD COLUMN u VARCHAR(5) NOT NULL DEFAULT _utf8mb4'y', "
         "ADD COLUMN k BIT(8) DEFAULT b'101', ADD COLUMN j JSON NOT NULL, "
         "ADD COLUMN made DATETIME DEFAULT CURRENT_TIMESTAMP", "ADD_COLUMN"),
    ResolvedEvent(200, AT),
]
SECOND_RUN = [
    _ddl("bits", 300, "ALTER TABLE v.bits MODIFY b BIT(8) NOT NULL", "MODIFY_COLUMN"),
    _row("bits", 301, INSERT, {"id": "2", "b": "255"}, {"id": "int", "b": "bit"}),
    ResolvedEvent(400, AT),
]


def run(args, env, check=True):
    result = subprocess.run(LAKEHOUSE + args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"lakehouse {args} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def sql_json(query, env):
    return [json.loads(line) for line in run(["sql", query, "--format", "json"], env).stdout.splitlines() if line]


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """The topic backfilled twice through the CLI; what a user then reads: every row (as JSON text per table and
    the column types), the dead letters and `lakehouse status`."""
    home = tmp_path_factory.mktemp("values")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env["LAKEHOUSE_HOME"] = str(home / "home")
    archive = home / "archive"
    write_archive(archive, "ticdc-v", {0: _messages(FIRST_RUN)})
    first = run(["backfill", "--archive", str(archive), "--protocol", "open"], env, check=False)
    write_archive(archive, "ticdc-v", {0: _messages(SECOND_RUN)})
    second = run(["backfill", "--archive", str(archive), "--protocol", "open"], env, check=False)
    tables = ("prices", "keyed", "rowdec", "bits")
    query = " UNION ALL ".join(
        f"SELECT '{t}' AS t, to_json(struct(*)) AS row FROM v.{t}" for t in tables
    ) + " UNION ALL SELECT 'types', to_json(map_from_arrays(array('rowdec.d', 'bits.b', 'prices.j'), array(" \
        "(SELECT first(typeof(d)) FROM v.rowdec), (SELECT first(typeof(b)) FROM v.bits), " \
        "(SELECT first(typeof(j)) FROM v.prices))))" \
        " UNION ALL SELECT 'dead', to_json(struct(topic, partition, offset, error)) FROM _lakehouse.dead_letters"
    with ThreadPoolExecutor(2) as pool:  # two readers of the same lake, each its own process and JVM, at once
        status_run = pool.submit(run, ["status"], env, False)
        read = sql_json(query, env)
        status = status_run.result()
    rows: dict[str, list] = {}
    for item in read:
        rows.setdefault(item["t"], []).append(json.loads(item["row"]))
    for name in tables:
        rows.setdefault(name, []).sort(key=lambda r: r["id"])
    rows.setdefault("dead", []).sort(key=lambda r: r["offset"])
    return {"first": first, "second": second, "rows": rows, "status": status.stdout + status.stderr}


def _offset_of(events, ts):
    return next(i for i, e in enumerate(events) if getattr(e, "commit_ts", None) == ts)


@pytest.mark.spark
def test_backfills_succeed_and_go_on_past_bad_values(lake):
    assert lake["first"].returncode == 0, lake["first"].stderr[-2000:]
    assert lake["second"].returncode == 0, lake["second"].stderr[-2000:]


@pytest.mark.spark
def test_a_decimal_that_does_not_fit_is_a_dead_letter_never_null_or_rounded(lake):
    prices = {r["id"]: r["amount"] for r in lake["rows"]["prices"]}
    assert prices == {1: 1.5, 4: 999.99}  # 12345.67 (too wide) and 1.234 (would round) are not stored at all
    dead = {(d["topic"], d["partition"], d["offset"]): d["error"] for d in lake["rows"]["dead"]}
    wide = dead[("ticdc-v", 0, _offset_of(FIRST_RUN, 111))]
    assert "v.prices" in wide and "amount" in wide and "12345.67" in wide and "decimal(5,2)" in wide
    assert "1.234" in dead[("ticdc-v", 0, _offset_of(FIRST_RUN, 112))]


@pytest.mark.spark
def test_text_in_an_int_key_is_a_dead_letter_and_the_rest_of_the_run_goes_on(lake):
    assert lake["rows"]["keyed"] == [{"id": 1, "note": "a"}, {"id": 2, "note": "b"}]
    error = next(d["error"] for d in lake["rows"]["dead"] if d["offset"] == _offset_of(FIRST_RUN, 115))
    assert "v.keyed" in error and "column id" in error and "nine" in error
    assert "dead letters: 3" in lake["status"] and "v.keyed: column id (int): value nine" in lake["status"]


@pytest.mark.spark
def test_a_table_typed_from_rows_takes_the_scale_of_every_value_not_a_null_sample(lake):
    assert lake["rows"]["types"][0]["rowdec.d"] == "decimal(38,11)"
    assert [r.get("d") for r in lake["rows"]["rowdec"]] == [None, 1.23456789012]


@pytest.mark.spark
def test_bit_has_one_type_so_a_later_modify_applies(lake):
    assert lake["rows"]["types"][0]["bits.b"] == "decimal(20,0)"
    assert [(r["id"], r["b"]) for r in lake["rows"]["bits"]] == [(1, 5), (2, 255)]
    assert "halted tables: none" in lake["status"]


@pytest.mark.spark
def test_added_not_null_columns_fill_existing_rows_as_tidb_does(lake):
    row = lake["rows"]["prices"][0]
    assert row["id"] == 1
    assert row["h"] == 16  # DEFAULT 0x10
    assert row["t"] == "00:00:00"  # TIME NOT NULL
    assert row["s"] == ""  # SET NOT NULL
    assert row["bb"] == 7 and row["k"] == 5  # BIT(8) DEFAULT 7, DEFAULT b'101'
    assert row["vb"] == "eA=="  # VARBINARY NOT NULL DEFAULT 'x' (binary as base64 in to_json)
    assert row["u"] == "y"  # _utf8mb4'y'
    assert row["j"] == "null"  # JSON NOT NULL: JSON null


@pytest.mark.spark
def test_an_expression_default_is_never_invented_and_status_names_it(lake):
    """TiDB computed CURRENT_TIMESTAMP for the older rows when the DDL ran; no message carries that value, so the
    lake holds NULL there and says so where a user looks, instead of a made-up time."""
    assert lake["rows"]["prices"][0].get("made") is None
    assert ("v.prices: column made was added with DEFAULT CURRENT_TIMESTAMP: rows older than that ADD COLUMN "
            "hold NULL") in lake["status"]


@pytest.mark.spark
def test_open_protocol_keeps_the_sign_of_negative_zero(lake):
    row = lake["rows"]["prices"][0]
    assert str(row["f"]) == "-0.0" and str(row["fl"]) == "-0.0"


@pytest.mark.spark
def test_in_hold_mode_a_bad_value_halts_its_table_there_and_the_others_go_on(spark, settings, tmp_path, monkeypatch):
    """``merge.on_undecodable = "hold"``: a value that does not fit is not skipped: its table stops just below it
    (what precedes it is applied), the halt names the message and the reason, and the other tables go on."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.commands.pipeline import backfill, skip_message
    from ticdc_lakehouse.runtime.state import StateStore

    monkeypatch.setenv("LAKEHOUSE__MERGE__ON_UNDECODABLE", "hold")
    held = load_settings()
    write_archive(tmp_path / "archive", "ticdc-v", {0: _messages(FIRST_RUN)})
    report = backfill(held, tmp_path / "archive", protocol="open", spark=spark)
    (halt,) = [h for h in report["merge"]["halted"] if h["table"] == "v.prices"]
    assert halt["ddl_ts"] == 111 and "12345.67" in halt["reason"]
    assert halt["query"] == f"row event at ticdc-v/0/{_offset_of(FIRST_RUN, 111)}"
    assert [r["id"] for r in spark.sql("SELECT id FROM v.prices ORDER BY id").collect()] == [1]
    assert [r["id"] for r in spark.sql("SELECT id FROM v.rowdec ORDER BY id").collect()] == [1, 2]
    assert [h.table for h in StateStore(spark, held.catalog_name).halted()] == ["prices", "keyed"]

    # the operator gives up on that row: it becomes a dead letter, and the table goes on to the next bad row
    assert skip_message(held, f"ticdc-v/0/{_offset_of(FIRST_RUN, 111)}", spark=spark) == 1
    report = backfill(held, tmp_path / "archive", protocol="open", spark=spark)
    (halt,) = [h for h in report["merge"]["halted"] if h["table"] == "v.prices"]
    assert halt["ddl_ts"] == 112 and "1.234" in halt["reason"]
    dead = spark.sql("SELECT offset, error FROM _lakehouse.dead_letters").collect()
    assert [(d["offset"], "12345.67" in d["error"]) for d in dead] == [(_offset_of(FIRST_RUN, 111), True)]
