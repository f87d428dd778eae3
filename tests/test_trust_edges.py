"""Issue 19 traps at the key/ordering/DDL edges, end to end: a small archived topic written the way TiCDC writes
it, ``lakehouse backfill`` (``pipeline.backfill``, what the CLI runs), then the rows, types and status a user
checks.

* tables without a PRIMARY KEY (Canal-JSON ``"pkNames": []``): keyed by their NOT NULL UNIQUE handle, else kept
  as a multiset (a delete removes one of several equal rows);
* made-up commit ts (Canal-JSON without the TiDB extension): an insert and a delete in one millisecond;
* a key-only delete as a table's first image (``delete-only-output-handle-key-columns``);
* a nullable ADD COLUMN on a table that existed before the changefeed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ticdc_lakehouse.sim.archive_writer import write_archive
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange

from tests.schema_registry_fixture import Producer, items_schemas, schema_registry  # noqa: F401 - pytest fixture

from .lake_helpers import lake_rows

MS = 1 << 18  # one millisecond of TSO
T0 = 1_700_000_000_000 * MS


def at(offset: int, partition: int = 0, topic: str = "t") -> Position:
    return Position(topic, partition, offset)


def row(table: str, ts: int, op: str, after, before, keys, types, offset: int, schema: str = "app") -> RowChange:
    return RowChange(schema, table, ts, op, after, before, tuple(keys), dict(types), at(offset))


def canal_archive(archive: Path, events, tidb_extension: bool = True, topic: str = "t") -> None:
    from ticdc_lakehouse.sim.encode.canal_json import CanalJsonEncoder

    encoder = CanalJsonEncoder(tidb_extension)
    records = [encoded for encoded in (encoder.encode(e) for e in events) if encoded is not None]
    write_archive(archive, topic, {0: [(key, value, [], None) for key, value in records]})


def settings_with(tmp_path: Path, text: str):
    from ticdc_lakehouse.runtime.config import load_settings

    (tmp_path / "none.toml").write_text(text)
    return load_settings()


def backfill(settings, archive: Path, protocol: str, spark) -> dict:
    """The merge report of ``lakehouse backfill`` (``ok`` is what decides its exit code)."""
    from ticdc_lakehouse.commands.pipeline import backfill as run_backfill

    result = run_backfill(settings, archive, protocol=protocol, spark=spark)
    return {"ok": result["ok"], **result["merge"]}


def halted_tables(settings, spark) -> list:
    from ticdc_lakehouse.runtime.state import StateStore

    return [h for h in StateStore(spark, settings.catalog_name).halted("default") if not h.resolution]


KEYLESS = {"a": "int", "b": "varchar(10)"}


def test_canal_json_tables_without_a_primary_key_land_keyed_by_their_handle_or_as_a_multiset(spark, settings,
                                                                                            tmp_path):
    """TiCDC writes ``"pkNames": []`` for both: ``app.u`` has a NOT NULL UNIQUE handle (from its CREATE TABLE),
    ``app.k`` no usable key at all (equal rows are real rows: a delete removes one of them, an update one)."""
    uk = {"u": "int", "v": "varchar(10)"}
    ddl = [DDLEvent("app", "", T0, "CREATE DATABASE app", "CREATE_SCHEMA", at(0)),
           DDLEvent("app", "u", T0 + 1, "CREATE TABLE app.u (u int NOT NULL, v varchar(10), UNIQUE KEY (u))",
                    "CREATE_TABLE", at(1))]
    ts = T0 + 10 * MS
    rows = [
        row("u", ts, INSERT, {"u": "1", "v": "a"}, None, [], uk, 2),
        row("u", ts + 1, INSERT, {"u": "2", "v": "b"}, None, [], uk, 3),
        row("u", ts + 2, UPDATE, {"u": "1", "v": "a2"}, {"u": "1", "v": "a"}, [], uk, 4),
        row("u", ts + 3, DELETE, None, {"u": "2", "v": "b"}, [], uk, 5),
        # app.k: no key; its CREATE TABLE predates the changefeed
        row("k", ts, INSERT, {"a": "1", "b": "x"}, None, [], KEYLESS, 6),
        row("k", ts, INSERT, {"a": "1", "b": "x"}, None, [], KEYLESS, 7),
        row("k", ts, INSERT, {"a": "1", "b": "x"}, None, [], KEYLESS, 8),
        row("k", ts, INSERT, {"a": "2", "b": None}, None, [], KEYLESS, 9),
        row("k", ts + 1, DELETE, None, {"a": "1", "b": "x"}, [], KEYLESS, 10),
        row("k", ts + 2, UPDATE, {"a": "1", "b": "y"}, {"a": "1", "b": "x"}, [], KEYLESS, 11),
        row("k", ts + 3, DELETE, None, {"a": "2", "b": None}, [], KEYLESS, 12),
        ResolvedEvent(ts + 5, at(13)),
    ]
    canal_archive(tmp_path / "archive", ddl + rows)
    report = backfill(settings, tmp_path / "archive", "canal-json", spark)
    assert report["ok"] and report["dead_letters"] == 0
    assert lake_rows(spark, "SELECT * FROM app.u ORDER BY u") == [{"u": 1, "v": "a2"}]
    assert lake_rows(spark, "SELECT * FROM app.k ORDER BY a, b") == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}]

    # a second run: a replayed copy of an applied transaction changes nothing, a new delete removes one copy
    more = [row("k", ts + 2, UPDATE, {"a": "1", "b": "y"}, {"a": "1", "b": "x"}, [], KEYLESS, 14),
            row("k", ts + 6, INSERT, {"a": "1", "b": "y"}, None, [], KEYLESS, 15),
            row("k", ts + 7, DELETE, None, {"a": "1", "b": "x"}, [], KEYLESS, 16),
            ResolvedEvent(ts + 8, at(17))]
    canal_archive(tmp_path / "archive", more)
    backfill(settings, tmp_path / "archive", "canal-json", spark)
    assert lake_rows(spark, "SELECT * FROM app.k ORDER BY a, b") == [{"a": 1, "b": "y"}, {"a": 1, "b": "y"}]


def test_keyless_replay_within_one_run_is_not_counted_twice(spark, settings, tmp_path):
    """TiCDC resends a transaction after a restart: the second copy of its two equal inserts is a replay (it
    follows other transactions), not two more rows."""
    ts = T0 + 20 * MS
    txn = [row("k", ts, INSERT, {"a": "5", "b": "z"}, None, [], KEYLESS, i) for i in (0, 1)]
    later = [row("k", ts + 1, INSERT, {"a": "6", "b": "z"}, None, [], KEYLESS, 2)]
    replay = [row("k", ts, INSERT, {"a": "5", "b": "z"}, None, [], KEYLESS, i) for i in (3, 4)]
    canal_archive(tmp_path / "archive", txn + later + replay + [ResolvedEvent(ts + 5, at(5))])
    backfill(settings, tmp_path / "archive", "canal-json", spark)
    assert lake_rows(spark, "SELECT a, count(*) AS n FROM app.k GROUP BY a ORDER BY a") == [
        {"a": 5, "n": 2}, {"a": 6, "n": 1}]


def test_an_insert_and_a_delete_in_one_millisecond_without_a_tso_leave_no_row(spark, lakehouse_env, tmp_path):
    """Canal-JSON without the TiDB extension: ``es`` (ms) is the only time. Two transactions in one millisecond,
    an insert then a delete of the same key, share the made-up ts: Kafka order decides, the row is gone."""
    settings = settings_with(tmp_path, '[changefeeds.default]\nprotocol = "canal-json"\nresolved_ts = "none"\n')
    types = {"id": "int", "v": "varchar(10)"}
    ts = T0 + 30 * MS
    events = [
        row("m", ts + 5, INSERT, {"id": "1", "v": "a"}, None, ["id"], types, 0),
        row("m", ts + 7, DELETE, None, {"id": "1", "v": "a"}, ["id"], types, 1),  # same ms, later transaction
        row("m", ts + 9, INSERT, {"id": "2", "v": "b"}, None, ["id"], types, 2),
        row("m", ts + MS, UPDATE, {"id": "2", "v": "c"}, {"id": "2", "v": "b"}, ["id"], types, 3),
    ]
    canal_archive(tmp_path / "archive", events, tidb_extension=False)
    report = backfill(settings, tmp_path / "archive", "canal-json", spark)
    assert report["dead_letters"] == 0
    assert lake_rows(spark, "SELECT * FROM app.m ORDER BY id") == [{"id": 2, "v": "c"}]


def test_an_avro_tombstone_after_an_insert_at_one_ts_deletes_the_row(spark, lakehouse_env, tmp_path,
                                                                      schema_registry):
    """Confluent Avro: a tombstone carries no commit ts. It is applied in Kafka order after the rows before it on
    its partition (TiCDC's own Avro decoder does so), even where its made-up ts equals the insert's; one with no
    real ts before it in the run (here the first message of partition 1) is applied too."""
    key_schema, value_schema = items_schemas()
    producer = Producer(schema_registry, "tomb")

    def insert(i: int, ts: int):
        return (producer.encode(key_schema, {"id": i}, "key"),
                producer.encode(value_schema, {"id": i, "label": f"item {i}", "_tidb_op": "c",
                                               "_tidb_commit_ts": ts, "_tidb_commit_physical_time": 0}))

    def tombstone(i: int):
        return (producer.encode(key_schema, {"id": i}, "key"), None)

    settings = settings_with(tmp_path, f'[changefeeds.default]\nprotocol = "avro"\ntopics = ["tidb-items"]\n'
                                       f'schema_registry_url = "{schema_registry}"\n')
    archive = tmp_path / "archive"
    write_archive(archive, "tidb-items", {0: [insert(1, 1000), tombstone(1), insert(2, 1001)],
                                          1: [insert(3, 900)]})
    backfill(settings, archive, "avro", spark)
    assert lake_rows(spark, "SELECT id FROM shop.items ORDER BY id") == [{"id": 2}, {"id": 3}]
    write_archive(archive, "tidb-items", {1: [tombstone(3), insert(4, 1002)]})
    report = backfill(settings, archive, "avro", spark)
    assert report["dead_letters"] == 0
    assert lake_rows(spark, "SELECT id FROM shop.items ORDER BY id") == [{"id": 2}, {"id": 4}]


def test_a_debezium_row_of_every_type_lands_as_its_decoded_values(spark, lakehouse_env, tmp_path):
    """Debezium end to end: TiCDC's golden Debezium-MySQL row of every data type (plain Debezium: no
    ``source.commit_ts``, so ``resolved_ts = "none"``) lands as one row holding what the decoder read."""
    from ticdc_lakehouse.decode.common.go_text import to_float32
    from ticdc_lakehouse.decode.debezium import DebeziumDecoder
    from ticdc_lakehouse.core.model import Message
    from ticdc_lakehouse.sim.workload import expected_value

    vectors = Path(__file__).resolve().parents[2] / "shared" / "ticdc-vectors" / "debezium"
    key, value = (vectors / "datatype.dbz.key.json").read_bytes(), (vectors / "datatype.dbz.json").read_bytes()
    [decoded] = DebeziumDecoder().decode(Message("t", 0, 0, key, value))
    settings = settings_with(tmp_path, '[changefeeds.default]\nprotocol = "debezium"\nresolved_ts = "none"\n')
    write_archive(tmp_path / "archive", "t", {0: [(key, value, [], None)]})
    report = backfill(settings, tmp_path / "archive", "debezium", spark)
    assert report["ok"] and report["dead_letters"] == 0
    expected = {name: expected_value(decoded.column_types[name], text) for name, text in decoded.after.items()}
    # FLOAT is an Iceberg float: the lake holds the float32, which Spark hands out widened to a double
    expected = {name: to_float32(want) if decoded.column_types[name] == "float" else want
                for name, want in expected.items()}
    [landed] = lake_rows(spark, "SELECT * FROM test.foo")
    assert {name: (landed.get(name), want) for name, want in expected.items() if landed.get(name) != want} == {}
    assert landed.keys() == expected.keys()


def open_archive(archive: Path, events) -> None:
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder

    encoder = OpenProtocolEncoder()
    write_archive(archive, "t", {0: [(*encoder.encode(e), [], None) for e in events]})


def test_a_key_only_delete_never_defines_a_table_and_later_rows_add_columns(spark, settings, tmp_path):
    """``delete-only-output-handle-key-columns``: the first image of ``app.d`` is a delete holding only ``id``.
    The table takes its columns from the inserts; a later run whose rows carry a column the table lacks adds it
    (recorded in the snapshot like a DDL) instead of dropping its values."""
    types = {"id": "int", "name": "varchar(10)", "qty": "int"}
    ts = T0 + 40 * MS
    first = [
        row("d", ts, DELETE, None, {"id": "7"}, ["id"], {"id": "int"}, 0),
        ResolvedEvent(ts + 1, at(1)),
    ]
    open_archive(tmp_path / "archive", first)
    backfill(settings, tmp_path / "archive", "open", spark)
    second = [
        row("d", ts + 2, INSERT, {"id": "1", "name": "x", "qty": "3"}, None, ["id"], types, 2),
        row("d", ts + 3, DELETE, None, {"id": "1"}, ["id"], {"id": "int"}, 3),
        row("d", ts + 4, INSERT, {"id": "2", "name": "y", "qty": "4"}, None, ["id"], types, 4),
        ResolvedEvent(ts + 5, at(5)),
    ]
    open_archive(tmp_path / "archive", second)
    backfill(settings, tmp_path / "archive", "open", spark)
    assert spark.table("app.d").columns == ["id", "name", "qty"]
    assert lake_rows(spark, "SELECT * FROM app.d ORDER BY id") == [{"id": 2, "name": "y", "qty": 4}]

    wider = {**types, "note": "varchar(20)"}
    third = [row("d", ts + 6, INSERT, {"id": "3", "name": "z", "qty": "5", "note": "n"}, None, ["id"], wider, 6),
             ResolvedEvent(ts + 7, at(7))]
    open_archive(tmp_path / "archive", third)
    backfill(settings, tmp_path / "archive", "open", spark)
    assert spark.table("app.d").columns == ["id", "name", "qty", "note"]
    assert lake_rows(spark, "SELECT * FROM app.d ORDER BY id") == [
        {"id": 2, "name": "y", "qty": 4, "note": None}, {"id": 3, "name": "z", "qty": 5, "note": "n"}]
    ddls = lake_rows(spark, "SELECT summary['tidb.ddl'] AS ddl FROM app.d.snapshots WHERE summary['tidb.ddl'] "
                            "IS NOT NULL")
    assert ddls == [{"ddl": "ADD COLUMN note (carried by row images)"}]


@pytest.mark.parametrize("protocol", ["open", "canal-json"])
def test_a_nullable_add_column_on_a_table_older_than_the_changefeed_applies(spark, settings, tmp_path, protocol):
    """Rows, then ``ALTER TABLE ... ADD COLUMN note``, then rows with ``note``, in one run: the table is typed
    from its rows, the DDL whose effect it already has is a no-op with its watermark, nothing halts; a second
    run goes on."""
    types = {"id": "int", "v": "varchar(10)"}
    wider = {**types, "note": "varchar(20)"}
    ts = T0 + 50 * MS
    events = [
        row("p", ts, INSERT, {"id": "1", "v": "a"}, None, ["id"], types, 0),
        row("p", ts + 1, UPDATE, {"id": "1", "v": "b"}, {"id": "1", "v": "a"}, ["id"], types, 1),
        DDLEvent("app", "p", ts + 2, "ALTER TABLE app.p ADD COLUMN note varchar(20)", "ADD_COLUMN", at(2)),
        row("p", ts + 3, INSERT, {"id": "2", "v": "c", "note": "n"}, None, ["id"], wider, 3),
        ResolvedEvent(ts + 4, at(4)),
    ]
    write = open_archive if protocol == "open" else canal_archive
    write(tmp_path / "archive", events)
    report = backfill(settings, tmp_path / "archive", protocol, spark)
    assert report["ok"] and not report["halted"] and not halted_tables(settings, spark)
    assert spark.table("app.p").columns == ["id", "v", "note"]
    assert lake_rows(spark, "SELECT * FROM app.p ORDER BY id") == [
        {"id": 1, "v": "b", "note": None}, {"id": 2, "v": "c", "note": "n"}]
    write(tmp_path / "archive", [row("p", ts + 5, UPDATE, {"id": "1", "v": "b", "note": "m"},
                                     {"id": "1", "v": "b", "note": None}, ["id"], wider, 5),
                                 ResolvedEvent(ts + 6, at(6))])
    backfill(settings, tmp_path / "archive", protocol, spark)
    assert lake_rows(spark, "SELECT * FROM app.p ORDER BY id") == [
        {"id": 1, "v": "b", "note": "m"}, {"id": 2, "v": "c", "note": "n"}]


def test_an_add_column_the_table_already_has_is_a_no_op_with_its_watermark(spark, settings, tmp_path):
    """The table was typed from rows that carry ``note`` (it existed before the changefeed); the ADD COLUMN comes
    in a later run. Nothing may be left uncommitted (an open ``updateSchema()`` made the marker commit fail with
    "last operation has not committed" and halted the table), and rows go on landing."""
    types = {"id": "int", "v": "varchar(10)", "note": "varchar(20)"}
    ts = T0 + 60 * MS
    open_archive(tmp_path / "archive", [row("q", ts, INSERT, {"id": "1", "v": "a", "note": "n"}, None, ["id"], types,
                                            0), ResolvedEvent(ts + 1, at(1))])
    backfill(settings, tmp_path / "archive", "open", spark)
    open_archive(tmp_path / "archive", [
        DDLEvent("app", "q", ts + 2, "ALTER TABLE app.q ADD COLUMN note varchar(20)", "ADD_COLUMN", at(2)),
        row("q", ts + 3, INSERT, {"id": "2", "v": "b", "note": None}, None, ["id"], types, 3),
        ResolvedEvent(ts + 4, at(4))])
    report = backfill(settings, tmp_path / "archive", "open", spark)
    assert report["ok"] and not halted_tables(settings, spark), report["halted"]
    assert lake_rows(spark, "SELECT * FROM app.q ORDER BY id") == [
        {"id": 1, "v": "a", "note": "n"}, {"id": 2, "v": "b", "note": None}]
    ddl = lake_rows(spark, "SELECT summary['tidb.ddl-ts'] AS ts FROM app.q.snapshots "
                           "WHERE summary['tidb.ddl'] LIKE 'ALTER%'")
    assert ddl == [{"ts": str(ts + 2)}]
