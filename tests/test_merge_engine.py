"""The merge engine end to end: archived TiCDC topics -> Iceberg tables equal to upstream at the global resolved ts.

Real Spark, real Iceberg (JDBC catalog on SQLite), real Kafka log segments written with kafka-python's batch
builder. The upstream truth comes from the workload simulator.
"""

from __future__ import annotations

import pytest

from tests.schema_registry_fixture import (  # noqa: F401 - pytest fixture
    Producer,
    closed_port,
    items_schemas,
    schema_registry,
)
from tests.lake_helpers import (
    archive_of_existing_tables,
    assert_lake_equals_upstream,
    lake_rows,
    snapshot_watermarks,
    table_rows,
)
from ticdc_lakehouse.sim.archive_writer import write_partition
from ticdc_lakehouse.commands.pipeline import backfill, resume_table
from ticdc_lakehouse.runtime.state import StateStore
from ticdc_lakehouse.commands.timetravel import AsOfError, as_of_sql
from ticdc_lakehouse.sim.workload import Workload, write_to_archive

pytestmark = pytest.mark.spark
TOPIC = "ticdc"


def _phase_one(seed: int = 5) -> Workload:
    workload = Workload(seed=seed, partitions=3)
    workload.run_script(transactions=24)
    return workload


def test_open_protocol_backfill_grows_incrementally_and_travels_in_time(spark, settings, tmp_path):
    archive = tmp_path / "archive"
    workload = _phase_one()
    write_to_archive(workload, archive, TOPIC, "open", compression="gzip")
    cut1 = workload.global_resolved_ts()
    assert cut1 < workload.last_ts + 1, "partitions must lag so some rows are beyond the cut"

    first = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert first["resolved_ts"] == cut1
    assert first["halted"] == [] and first["dead_letters"] == 0
    assert_lake_equals_upstream(spark, workload, cut1)
    # DDL became schema evolution: widened, added and renamed columns, a dropped one
    types = {r["col_name"]: r["data_type"] for r in spark.sql("DESCRIBE shop.orders").collect()}
    assert types["qty"] == "bigint" and types["discount"] == "decimal(5,2)" and types["big"] == "decimal(20,0)"
    assert "contact_email" in spark.table("shop.customers").columns
    assert "blobby" not in spark.table("shop.order_items").columns
    # every table records the same cut in its newest snapshot
    for name in ("shop.orders", "shop.customers", "shop.order_items"):
        assert snapshot_watermarks(spark, name)[-1] == cut1

    # a rerun with nothing new changes nothing
    snapshots = spark.sql("SELECT count(*) FROM shop.orders.snapshots").collect()[0][0]
    again = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert again["resolved_ts"] == cut1
    assert spark.sql("SELECT count(*) FROM shop.orders.snapshots").collect()[0][0] == snapshots
    assert_lake_equals_upstream(spark, workload, cut1)

    # the archive grows: more transactions and a DDL; only the new offsets land
    for i in range(12):
        workload.transaction(3)
        if i == 4:
            workload.add_column("customers", "tier", "varchar(8)")
        if i % 3 == 2:
            workload.resolve()
    workload.resolve(final=True)
    write_to_archive(workload, archive, TOPIC, "open")
    cut2 = workload.global_resolved_ts()
    second = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert second["resolved_ts"] == cut2 > cut1
    assert_lake_equals_upstream(spark, workload, cut2)

    # every table as of the first cut: old rows and old schema
    for name in workload.expected_json(cut1):
        rewritten = as_of_sql(spark, settings, f"SELECT * FROM {name}", cut1)
        assert table_rows(spark, workload, name, cut1, source=f"({rewritten})") == workload.expected_json(cut1)[name]
    assert "tier" not in spark.sql(as_of_sql(spark, settings, "SELECT * FROM shop.customers", cut1)).columns
    # plain Spark through the tag
    tagged = lake_rows(spark, f"SELECT count(*) AS n FROM shop.orders VERSION AS OF 'tso_{cut1}'")
    assert tagged == [{"n": len(workload.expected_json(cut1)["shop.orders"])}]
    with pytest.raises(AsOfError, match="beyond what has been applied"):
        as_of_sql(spark, settings, "SELECT * FROM shop.orders", cut2 + 1)


@pytest.mark.parametrize("protocol, parallel_tables", [("craft", 1), ("simple-json", 4), ("simple-avro", 1)])
def test_other_protocols_backfill_equal_upstream(spark, tmp_path, monkeypatch, lakehouse_env, protocol,
                                                 parallel_tables):
    """Also both ways of the final flush: one table after the other, and several at once."""
    from ticdc_lakehouse.runtime.config import load_settings

    monkeypatch.setenv("LAKEHOUSE__MERGE__PARALLEL_TABLES", str(parallel_tables))
    settings = load_settings()
    assert settings.merge.parallel_tables == parallel_tables
    archive = tmp_path / "archive"
    workload = _phase_one(seed=9)
    write_to_archive(workload, archive, TOPIC, protocol, compression="lz4")
    report = backfill(settings, archive, protocol=protocol, spark=spark)["merge"]
    assert report["resolved_ts"] == workload.global_resolved_ts()
    assert report["dead_letters"] == 0
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())


def test_undecodable_message_goes_to_dead_letters_and_nothing_after_it_is_lost(spark, settings, tmp_path):
    archive = tmp_path / "archive"
    workload = Workload.started(seed=21, partitions=2, transactions=6)
    write_to_archive(workload, archive, TOPIC, "open")
    written = write_partition(archive, TOPIC, 1, [(b"\x00\x00\x00\x00\x00\x00\x00\x01garbage", b"\xff", [], None)])
    assert written
    for _ in range(6):
        workload.transaction(3)
    workload.resolve(final=True)
    write_to_archive(workload, archive, TOPIC, "open")

    report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert report["dead_letters"] == 1
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())
    letters = lake_rows(spark, "SELECT topic, partition, offset, error FROM _lakehouse.dead_letters")
    assert len(letters) == 1
    assert letters[0]["topic"] == TOPIC and letters[0]["partition"] == 1
    assert letters[0]["error"]
    # a rerun does not record it twice
    backfill(settings, archive, protocol="open", spark=spark)
    assert spark.sql("SELECT count(*) FROM _lakehouse.dead_letters").collect()[0][0] == 1


def test_ddl_iceberg_cannot_express_halts_only_that_table_until_resumed(spark, settings, tmp_path):
    archive = tmp_path / "archive"
    workload = Workload.started(seed=33, partitions=2, transactions=5, changes=4)
    workload.resolve(final=True)
    halt_ts = workload.modify_column("orders", "big", "int")  # bigint unsigned -> int: a narrowing
    for _ in range(5):
        workload.transaction(4)
    workload.resolve(final=True)
    write_to_archive(workload, archive, TOPIC, "open")
    cut = workload.global_resolved_ts()

    report = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert [h["table"] for h in report["halted"]] == ["shop.orders"]
    assert "MODIFY COLUMN" in report["halted"][0]["reason"] or "narrow" in report["halted"][0]["reason"].lower()
    # the other tables reached the cut; orders stopped just below the DDL, with everything before it
    for name in ("shop.customers", "shop.order_items"):
        assert table_rows(spark, workload, name, cut) == workload.expected_json(cut)[name]
    assert snapshot_watermarks(spark, "shop.orders")[-1] == halt_ts - 1
    assert table_rows(spark, workload, "shop.orders", halt_ts - 1) == workload.expected_json(halt_ts - 1)["shop.orders"]
    halted = StateStore(spark, settings.catalog_name).halted("default")
    assert [(h.table, h.ddl_ts) for h in halted] == [("orders", halt_ts)]

    # the operator accepts the DDL as applied (keeping decimal(20,0)); the table catches up
    assert resume_table(settings, "shop.orders", "skip", spark=spark) == 1
    backfill(settings, archive, protocol="open", spark=spark)
    assert snapshot_watermarks(spark, "shop.orders")[-1] == cut
    expected_ids = [r["id"] for r in workload.expected_json(cut)["shop.orders"]]
    assert [r["id"] for r in lake_rows(spark, "SELECT id FROM shop.orders ORDER BY id")] == expected_ids
    assert StateStore(spark, settings.catalog_name).halted("default") == []


def test_rows_of_a_table_created_before_the_changefeed_create_it_from_row_types(spark, settings, tmp_path):
    archive = tmp_path / "archive"
    workload = archive_of_existing_tables(archive, seed=41, partitions=2, transactions=8, size=4, topic=TOPIC)
    cut = workload.global_resolved_ts()
    backfill(settings, archive, protocol="open", spark=spark)
    for name, rows in workload.expected_json(cut).items():
        table = workload.state_at(cut)[name.split(".")[1]]
        keys = ", ".join(table.primary_key)
        got = lake_rows(spark, f"SELECT {keys} FROM {name} ORDER BY {keys}")
        assert got == [{k: r[k] for k in table.primary_key} for r in rows]
    key_fields = spark.sql("SELECT * FROM shop.order_items").columns[:2]
    assert key_fields == ["order_id", "line"]


def test_simple_rows_before_their_schema_are_kept_until_a_bootstrap_arrives(spark, settings, tmp_path):
    archive = tmp_path / "archive"  # schemas were sent before the changefeed's start: the consumer has none
    workload = archive_of_existing_tables(archive, seed=52, partitions=2, transactions=6, size=3, topic=TOPIC,
                                          protocol="simple-json")
    early_cut = workload.global_resolved_ts()

    first = backfill(settings, archive, protocol="simple-json", spark=spark)["merge"]
    assert sorted(first["pending_tables"]) == ["shop.customers", "shop.order_items", "shop.orders"]
    namespaces = [r[0] for r in spark.sql("SHOW NAMESPACES").collect()]
    assert "shop" not in namespaces or spark.sql("SHOW TABLES IN shop").count() == 0

    workload.bootstrap()
    for _ in range(4):
        workload.transaction(3)
    workload.resolve(final=True)
    write_to_archive(workload, archive, TOPIC, "simple-json")
    cut = workload.global_resolved_ts()
    assert cut > early_cut
    backfill(settings, archive, protocol="simple-json", spark=spark)
    assert_lake_equals_upstream(spark, workload, cut)


def test_without_resolved_events_everything_landed_is_applied_in_key_order(spark, tmp_path, monkeypatch, lakehouse_env):
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.core.model import ResolvedEvent

    config = tmp_path / "cf.toml"
    config.write_text('[changefeeds.nores]\nprotocol = "open"\nresolved_ts = "none"\n')
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
    settings = load_settings()
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    use_catalog(spark, settings)
    archive = tmp_path / "archive"
    workload = Workload(seed=61, partitions=2)
    workload.create_sample_tables()
    for _ in range(10):
        workload.transaction(4)
    events = workload.new_events()
    stripped = {p: [e for e in evs if not isinstance(e, ResolvedEvent)] for p, evs in events.items()}
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.sim.workload import encode_partitions

    write_archive(archive, TOPIC, encode_partitions(stripped, "open"))
    report = backfill(settings, archive, changefeed="nores", spark=spark)["merge"]
    assert report["resolved_ts"] == workload.last_ts
    assert_lake_equals_upstream(spark, workload, workload.last_ts)


def test_updates_that_send_only_changed_columns_still_give_the_upstream_rows(spark, settings, tmp_path):
    """A whole workload (DDL, key changes, replays, lagging partitions, several updates of a key per run) whose
    updates carry only the key and the changed columns: the lake still equals upstream after each run."""
    archive = tmp_path / "archive"
    workload = Workload(seed=23, partitions=3, partial_updates=True)
    workload.run_script(transactions=30)
    write_to_archive(workload, archive, TOPIC, "open")
    first = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert first["resolved_ts"] == workload.global_resolved_ts() and first["dead_letters"] == 0
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())
    for _ in range(15):
        workload.transaction(4)
    workload.resolve(final=True)
    write_to_archive(workload, archive, TOPIC, "open")
    second = backfill(settings, archive, protocol="open", spark=spark)["merge"]
    assert second["resolved_ts"] == workload.global_resolved_ts()
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())


def test_an_update_without_some_columns_keeps_their_lake_values(spark, settings, tmp_path):
    """Images that do not carry every column (partial updates): the MERGE keeps the lake's value of what was not
    sent, while columns every image carried are taken straight from the change set; partial updates of one key
    in one run add up, and a key inserted in the run keeps what its later partial updates did not send."""
    from tests.lake_helpers import backfill_open_protocol_runs, create_app_table
    from ticdc_lakehouse.core.model import INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange

    full, narrow, at = {"id": "int", "v": "varchar", "w": "varchar"}, {"id": "int", "v": "varchar"}, Position("t", 0, 0)

    def row(ts, op, after, types, table="a"):
        before = {"id": after["id"]} if op == UPDATE else None
        return RowChange("app", table, ts, op, after, before, ("id",), types, at)

    first = [
        *create_app_table(at),
        DDLEvent("app", "b", 102, "CREATE TABLE app.b (id int PRIMARY KEY, v varchar(9), w varchar(9))",
                 "CREATE_TABLE", at),
        row(110, INSERT, {"id": "1", "v": "x", "w": "y"}, full),
        row(111, INSERT, {"id": "2", "v": "b", "w": "c"}, full),
        row(112, INSERT, {"id": "1", "v": "p", "w": "q"}, full, "b"),
        ResolvedEvent(200, at),
    ]
    only_w = {"id": "int", "w": "varchar"}
    second = [
        row(205, INSERT, {"id": "3", "v": "n", "w": "m"}, full),
        row(210, UPDATE, {"id": "1", "v": "x2"}, narrow),
        row(211, UPDATE, {"id": "2", "v": "b2", "w": "c2"}, full),
        row(212, UPDATE, {"id": "1", "w": "q2"}, only_w, "b"),
        row(213, UPDATE, {"id": "3", "w": "m2"}, only_w),  # a key new to the lake, then a partial update
        row(214, UPDATE, {"id": "2", "w": "c3"}, only_w),  # two partial updates of one key add up
        row(215, UPDATE, {"id": "2", "v": "b3"}, narrow),
        ResolvedEvent(300, at),
    ]
    backfill_open_protocol_runs(spark, settings, tmp_path / "archive", first, second)
    assert lake_rows(spark, "SELECT * FROM app.a ORDER BY id") == [
        {"id": 1, "v": "x2", "w": "y"},
        {"id": 2, "v": "b3", "w": "c3"},
        {"id": 3, "v": "n", "w": "m2"},
    ]
    assert lake_rows(spark, "SELECT * FROM app.b ORDER BY id") == [{"id": 1, "v": "p", "w": "q2"}]
    # both tables were MERGEd at once in the final flush, each with the watermark in the MERGE's own snapshot
    for name in ("app.a", "app.b"):
        [latest] = lake_rows(spark, f"SELECT operation, summary['tidb.resolved-ts'] AS watermark FROM {name}.snapshots "
                                    "ORDER BY committed_at DESC LIMIT 1")
        assert latest == {"operation": "overwrite", "watermark": "300"}


def test_an_unreachable_schema_registry_fails_the_run_and_the_rerun_applies_every_row(
        spark, tmp_path, monkeypatch, lakehouse_env, schema_registry):
    """A registry outage is not bad input: no row may go to the dead-letter table for it, nothing is committed,
    and the run after the outage applies everything."""
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.core.model import SourceUnavailable
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    key_schema, value_schema = items_schemas()
    producer = Producer(schema_registry, "outage")
    records = [(producer.encode(key_schema, {"id": i}, "key"),
                producer.encode(value_schema, {"id": i, "label": f"item {i}", "_tidb_op": "c",
                                               "_tidb_commit_ts": 1000 + i, "_tidb_commit_physical_time": 0}))
               for i in range(1, 6)]
    archive = tmp_path / "archive"
    write_archive(archive, "tidb-items", {0: records[:3], 1: records[3:]})

    def settings_with_registry(url: str):
        config = tmp_path / "cf.toml"
        config.write_text(f'[changefeeds.items]\nprotocol = "avro"\ntopics = ["tidb-items"]\n'
                          f'schema_registry_url = "{url}"\n')
        monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
        settings = load_settings()
        use_catalog(spark, settings)
        return settings

    settings = settings_with_registry(f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(SourceUnavailable, match="schema registry"):
        backfill(settings, archive, changefeed="items", spark=spark)
    state = StateStore(spark, settings.catalog_name)
    assert state.dead_letter_counts("items") == {}
    assert state.latest_checkpoint("items").run_id in ("", None)  # nothing committed
    assert not spark.catalog.tableExists("shop.items")

    settings = settings_with_registry(schema_registry)
    report = backfill(settings, archive, changefeed="items", spark=spark)["merge"]
    assert report["dead_letters"] == 0
    assert lake_rows(spark, "SELECT id, label FROM shop.items ORDER BY id") == [
        {"id": i, "label": f"item {i}"} for i in range(1, 6)]


def test_concurrent_final_flush_attempts_every_table_and_raises_the_first_failure():
    """One table failing does not stop the others from committing (their watermarks stand for the rerun)."""
    import threading

    from ticdc_lakehouse.merge.engine import flush_concurrently

    class Tables:
        def __init__(self) -> None:
            self.flushed: list[tuple[str, str, int]] = []
            self.lock = threading.Lock()

        def flush(self, schema: str, table: str, upto_ts: int) -> None:
            if table == "broken":
                raise RuntimeError("commit failed for shop.broken")
            with self.lock:
                self.flushed.append((schema, table, upto_ts))

    names = [("shop", "a"), ("shop", "broken"), ("shop", "c"), ("shop", "d")]
    for parallelism in (1, 3):
        tables = Tables()
        with pytest.raises(RuntimeError, match="shop.broken"):
            flush_concurrently(tables.flush, names, 42, parallelism)
        assert sorted(tables.flushed) == [("shop", n, 42) for n in ("a", "c", "d")]


def test_tables_of_one_new_namespace_created_at_once_all_succeed(spark, settings):
    """Concurrent flushes may create the first tables of a namespace at the same moment (rows-only tables)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ticdc_lakehouse.iceberg.java_api import JavaIceberg

    ji = JavaIceberg(spark, settings.catalog_name)
    start = threading.Barrier(6)

    def create(_: int) -> None:
        start.wait()
        ji.create_namespace("brand_new")

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = [pool.submit(create, i) for i in range(6)]
    assert [f.exception() for f in results] == [None] * 6
    assert ji.namespace_exists("brand_new")


def test_large_messages_compressed_or_claim_checked_land_every_row(spark, tmp_path, monkeypatch, lakehouse_env):
    """A changefeed with large-message-handle-compression=lz4 and claim-check: every third row was moved to the
    claim-check storage, every value item is compressed. The lake equals upstream, with no dead letters."""
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
    from ticdc_lakehouse.core.model import RowChange

    claims = tmp_path / "claims"
    claims.mkdir()
    config = tmp_path / "lakehouse.toml"
    config.write_text(f'[changefeeds.default]\nprotocol = "open"\nlarge_message_compression = "lz4"\n'
                      f'claim_check_storage_uri = "file://{claims}"\n')
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
    settings = load_settings()
    workload = _phase_one(seed=13)
    encoder = OpenProtocolEncoder(compression="lz4")
    records: dict[int, list[tuple]] = {}
    claimed = 0
    for partition, events in workload.new_events().items():
        for index, event in enumerate(events):
            if isinstance(event, RowChange) and index % 3 == 0:
                name = f"{partition}-{index}.json"
                key, value, stored = encoder.encode_claim_check(event, f"file:/elsewhere/{name}")
                (claims / name).write_bytes(stored)
                claimed += 1
            else:
                key, value = encoder.encode(event)
            records.setdefault(partition, []).append((key, value, [], None))
    assert claimed > 10
    write_archive(tmp_path / "archive", TOPIC, records, records_per_batch=20, batches_per_segment=3)

    report = backfill(settings, tmp_path / "archive", spark=spark)["merge"]
    assert report["dead_letters"] == 0
    assert report["resolved_ts"] == workload.global_resolved_ts()
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())


def test_hold_mode_stops_a_partition_at_an_undecodable_message_until_it_is_skipped(spark, tmp_path, monkeypatch,
                                                                                     lakehouse_env):
    """merge.on_undecodable = "hold": the partition with a bad message stops there (the cut stays below it), nothing
    is dead-lettered until the operator skips it; then the next run dead-letters it and catches up."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.commands.pipeline import skip_message

    monkeypatch.setenv("LAKEHOUSE__MERGE__ON_UNDECODABLE", "hold")
    settings = load_settings()
    archive = tmp_path / "archive"
    workload = Workload.started(seed=21, partitions=2, transactions=6)
    workload.resolve(final=True)  # a resolved event precedes the bad message: the held partition's cut
    write_to_archive(workload, archive, TOPIC, "open")
    bad_offset = len(workload.sent[1])
    write_partition(archive, TOPIC, 1, [(b"\x00\x00\x00\x00\x00\x00\x00\x01garbage", b"\xff", [], None)])
    for _ in range(6):
        workload.transaction(3)
    workload.resolve(final=True)
    write_to_archive(workload, archive, TOPIC, "open")

    held = backfill(settings, archive, protocol="open", spark=spark)
    assert not held["ok"]
    report = held["merge"]
    assert [(h["topic"], h["partition"], h["offset"]) for h in report["held"]] == [(TOPIC, 1, bad_offset)]
    assert report["dead_letters"] == 0 and report["halted"] == []
    cut = report["resolved_ts"]
    assert 0 < cut < workload.global_resolved_ts(), "the cut stops below the held message"
    assert_lake_equals_upstream(spark, workload, cut)
    state = StateStore(spark, settings.catalog_name)
    assert [h["offset"] for h in state.holds("default")] == [bad_offset]
    assert backfill(settings, archive, protocol="open", spark=spark)["merge"]["resolved_ts"] == cut  # still held

    assert skip_message(settings, f"{TOPIC}/1/{bad_offset}", spark=spark) == 1
    assert skip_message(settings, f"{TOPIC}/1/{bad_offset}", spark=spark) == 0
    done = backfill(settings, archive, protocol="open", spark=spark)
    assert done["ok"] and done["merge"]["held"] == [] and done["merge"]["dead_letters"] == 1
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())
    letters = lake_rows(spark, "SELECT topic, partition, offset FROM _lakehouse.dead_letters")
    assert letters == [{"topic": TOPIC, "partition": 1, "offset": bad_offset}]
    assert state.holds("default") == []


def test_hold_mode_applies_held_messages_in_order_once_the_cause_is_fixed(spark, tmp_path, monkeypatch, lakehouse_env):
    """A changefeed whose TiCDC sink compresses large messages, configured without it: every row is held, not
    dead-lettered; with the setting fixed the same landed data applies completely."""
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder

    config = tmp_path / "lakehouse.toml"
    config.write_text('[merge]\non_undecodable = "hold"\n[changefeeds.default]\nprotocol = "open"\n')
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(config))
    workload = _phase_one(seed=17)
    encoder = OpenProtocolEncoder(compression="snappy")
    records = {p: [(*encoder.encode(e), [], None) for e in events] for p, events in workload.new_events().items()}
    write_archive(tmp_path / "archive", TOPIC, records, records_per_batch=20, batches_per_segment=3)

    held = backfill(load_settings(), tmp_path / "archive", spark=spark)["merge"]
    assert len(held["held"]) == workload.partitions and held["dead_letters"] == 0
    assert all("large_message_compression" in h["error"] for h in held["held"])

    config.write_text(config.read_text() + 'large_message_compression = "snappy"\n')
    fixed = backfill(load_settings(), tmp_path / "archive", spark=spark)["merge"]
    assert fixed["held"] == [] and fixed["dead_letters"] == 0
    assert fixed["resolved_ts"] == workload.global_resolved_ts()
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())
    assert StateStore(spark, load_settings().catalog_name).holds("default", resolution="passed")
