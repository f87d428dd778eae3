"""Control tables of the pipeline, kept as Iceberg tables in the same catalog (namespace ``_lakehouse``).

* ``checkpoints``: one row per completed run of a changefeed: the consistent cut (global resolved ts), where each
  partition is read from next time, each partition's resolved ts, and every table's snapshot at the cut. It is
  written last, in one Iceberg commit: a run that crashed before it simply did not happen, and the tables' own
  watermarks make the rerun skip what they already hold.
* ``dead_letters``: messages that could not be decoded, with topic, partition, offset and the error.
* ``halted``: tables stopped at a DDL that Iceberg cannot express, with the reason, until an operator resumes them.
* ``below_cut``: row changes that arrived after a cut was committed with a commit ts at or below it, each with
  its verdict (``replay``: the lake already held it; ``late``: it never got it), see ``merge.below_cut``.
* ``held``: with ``merge.on_undecodable = "hold"``, the undecodable message each partition is held at (error and
  raw bytes), until it decodes (``passed``) or an operator skips it to the dead-letter table (``skipped``).
"""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Optional

from ticdc_lakehouse.iceberg import tables as iceberg_tables
from ticdc_lakehouse.runtime.local_frame import local_frame, session_row_schema
from ticdc_lakehouse.core.sql_names import quote

NAMESPACE = "_lakehouse"

CHECKPOINTS_DDL = (
    "changefeed string, resolved_ts bigint, run_id string, committed_at timestamp, restart_offsets string, "
    "partition_resolved string, tables string, landed_end string, protocol string"
)
DEAD_LETTERS_DDL = (
    "changefeed string, topic string, partition int, offset bigint, seq int, error string, raw_key string, "
    "raw_value string, run_id string, recorded_at timestamp"
)
HELD_DDL = (
    "changefeed string, topic string, partition int, offset bigint, seq int, error string, raw_key string, "
    "raw_value string, held_at timestamp, resolution string, resolved_at timestamp"
)
HALTED_DDL = (
    "changefeed string, schema_name string, table_name string, ddl_ts bigint, query string, reason string, "
    "halted_at timestamp, resolution string, resolved_at timestamp"
)


def _encode_partition_map(values: dict[tuple[str, int], int]) -> str:
    return json.dumps({f"{topic}\u0000{partition}": value for (topic, partition), value in sorted(values.items())})


def _decode_partition_map(text: Optional[str]) -> dict[tuple[str, int], int]:
    if not text:
        return {}
    result = {}
    for key, value in json.loads(text).items():
        topic, partition = key.rsplit("\u0000", 1)
        result[(topic, int(partition))] = int(value)
    return result


@dataclass
class Checkpoint:
    changefeed: str
    resolved_ts: int = 0
    run_id: str = ""
    restart_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    partition_resolved: dict[tuple[str, int], int] = field(default_factory=dict)
    tables: dict[str, Optional[int]] = field(default_factory=dict)  # "schema.table" -> snapshot id at the cut
    landed_end: dict[tuple[str, int], int] = field(default_factory=dict)
    protocol: str = ""
    committed_at: Optional[datetime] = None


@dataclass(frozen=True)
class HaltedTable:
    changefeed: str
    schema: str
    table: str
    ddl_ts: int
    query: str
    reason: str
    halted_at: Optional[datetime] = None
    resolution: Optional[str] = None


class StateStore:
    """The control tables: written through Spark (one commit per write); the rows a run reads before its first
    Spark job (checkpoints, halts, holds) read by Iceberg's generic reader (``iceberg.small_tables``), the
    aggregates ``lakehouse status`` shows through Spark."""

    def __init__(self, spark, catalog: str) -> None:
        self.spark = spark
        self.catalog = catalog
        self._ensured = False
        self._ji: Any = None
        #: the control tables this store created (a deployment's first run): they hold no row of the changefeed
        #: it reads, so reading them is skipped (see ``_new``)
        self._created: set[str] = set()
        #: their creation, under way on a thread of its own (see ``_start_ensure``)
        self._creating: Optional[Future] = None

    def table(self, name: str) -> str:
        return f"{quote(self.catalog)}.{quote(NAMESPACE)}.{quote(name)}"

    def ensure(self) -> None:
        """Make sure the control tables exist: create those a deployment lacks (its first run), or wait for their
        creation when ``_new`` started it. Raises what a creation raised."""
        self._start_ensure()
        if self._creating is not None:
            self._creating.result()

    def _start_ensure(self) -> None:
        """Start creating the control tables a deployment lacks, through Iceberg's catalog API (as ``CREATE
        TABLE`` statements, Spark parsed, analysed and planned each: a second of a first run's critical path for
        the five), and return: ``ensure`` waits for them. Another process creating one at the same time is no
        error.

        Which exist is one listing of the namespace (``tableExists`` loads each table's metadata: five loads at
        the start of every run). The missing ones are created at once, on a thread of its own: each create is a
        catalog commit that waits on its files more than on a core, and a first run needs none of them before its
        decode (its checkpoint is known empty, ``_new``): 0.3 s of its path to the first job. The thread is not a
        daemon: a command that ends first still completes them (``cli.run`` waits for such threads)."""
        if self._ensured:
            return
        ji = self._java()
        from ticdc_lakehouse.merge.below_cut import BELOW_CUT_DDL
        from ticdc_lakehouse.runtime.parallel import map_at_most

        wanted = (("checkpoints", CHECKPOINTS_DDL), ("dead_letters", DEAD_LETTERS_DDL), ("halted", HALTED_DDL),
                  ("held", HELD_DDL), ("below_cut", BELOW_CUT_DDL))
        present = set(ji.list_tables(NAMESPACE))
        missing = [(name, ddl) for name, ddl in wanted if name not in present]
        self._created = {name for name, _ in missing}
        self._ensured = True
        if not missing:
            return
        ji.create_namespace(NAMESPACE)  # unless it exists
        properties = {"format-version": str(iceberg_tables.FORMAT_VERSION)}
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakehouse-control-tables")
        self._creating = pool.submit(
            map_at_most,
            lambda item: ji.create_plain_table(NAMESPACE, item[0], session_row_schema(self.spark, item[1]), properties),
            missing, len(wanted), "control")
        pool.shutdown(wait=False)  # its thread ends with the creation

    def _java(self):
        """The catalog's Java API (one per store)."""
        if self._ji is None:
            from ticdc_lakehouse.iceberg.java_api import JavaIceberg

            self._ji = JavaIceberg(self.spark, self.catalog)
        return self._ji

    def _rows(self, name: str, changefeed: Optional[str]) -> list[dict[str, Any]]:
        """The rows of control table ``name`` (of ``changefeed``, or all), read without a Spark job
        (``small_tables``)."""
        from ticdc_lakehouse.iceberg.small_tables import read_rows

        self.ensure()
        return read_rows(self._java(), NAMESPACE, name, {"changefeed": changefeed} if changefeed else {})

    def _new(self, name: str, changefeed: Optional[str]) -> bool:
        """Whether control table ``name`` holds no row of ``changefeed`` because this store just created it: a
        changefeed's rows are written only by the holder of its lock (this run), so a deployment's first run
        reads nothing back (a Spark query each), and need not wait for the tables' creation. False without a
        changefeed (other changefeeds' rows)."""
        self._start_ensure()
        if changefeed is not None and name in self._created:
            return True
        self.ensure()
        return False

    # -- checkpoints -------------------------------------------------------------------------------------
    def checkpoints(self, changefeed: str) -> list[Checkpoint]:
        """Every checkpoint of ``changefeed``, oldest cut first."""
        return [self._checkpoint(row) for row in self._checkpoint_rows(changefeed)]

    def latest_checkpoint(self, changefeed: str) -> Checkpoint:
        if self._new("checkpoints", changefeed):
            return Checkpoint(changefeed)
        rows = self._checkpoint_rows(changefeed)
        return self._checkpoint(rows[-1]) if rows else Checkpoint(changefeed)

    def _checkpoint_rows(self, changefeed: str) -> list[dict[str, Any]]:
        """The checkpoint rows of ``changefeed`` by cut, then commit time (NULLs first, as Spark sorts): only the
        one a caller wants is parsed (each holds every table's snapshot as JSON)."""
        return sorted(self._rows("checkpoints", changefeed),
                      key=lambda r: (_nulls_first(r["resolved_ts"]), _nulls_first(r["committed_at"])))

    @staticmethod
    def _checkpoint(row: Any) -> Checkpoint:
        return Checkpoint(
            changefeed=row["changefeed"],
            resolved_ts=row["resolved_ts"],
            run_id=row["run_id"],
            restart_offsets=_decode_partition_map(row["restart_offsets"]),
            partition_resolved=_decode_partition_map(row["partition_resolved"]),
            tables=json.loads(row["tables"] or "{}"),
            landed_end=_decode_partition_map(row["landed_end"]),
            protocol=row["protocol"] or "",
            committed_at=row["committed_at"],
        )

    def write_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.ensure()
        row = (
            checkpoint.changefeed,
            checkpoint.resolved_ts,
            checkpoint.run_id,
            datetime.now(timezone.utc).replace(tzinfo=None),
            _encode_partition_map(checkpoint.restart_offsets),
            _encode_partition_map(checkpoint.partition_resolved),
            json.dumps(checkpoint.tables, sort_keys=True),
            _encode_partition_map(checkpoint.landed_end),
            checkpoint.protocol,
        )
        from ticdc_lakehouse.iceberg.small_tables import append_rows

        self._created.discard("checkpoints")  # read from now on
        if not append_rows(self._java(), NAMESPACE, "checkpoints", [row]):  # a Spark append where it cannot
            local_frame(self.spark, [row], CHECKPOINTS_DDL).writeTo(self.table("checkpoints")).append()

    # -- dead letters ------------------------------------------------------------------------------------
    def record_dead_letters(self, changefeed: str, failures, run_id: str) -> None:
        """Append decode failures not recorded before (a rerun re-reads the same messages)."""
        from pyspark.sql import functions as F

        self.ensure()
        source = failures.select(
            F.lit(changefeed).alias("changefeed"), "topic", "partition", "offset", "seq", "error", "raw_key",
            "raw_value", F.lit(run_id).alias("run_id"), F.current_timestamp().cast("timestamp").alias("recorded_at"),
        )
        self._insert_new("dead_letters", source)

    def dead_letter_counts(self, changefeed: Optional[str] = None) -> dict[str, int]:
        self.ensure()
        frame = self.spark.table(self.table("dead_letters"))
        if changefeed:
            frame = frame.filter(f"changefeed = '{_escape(changefeed)}'")
        return {row["changefeed"]: row["count"] for row in frame.groupBy("changefeed").count().collect()}

    def dead_letter_reasons(self, changefeed: str, limit: int = 5) -> list[dict[str, Any]]:
        """The commonest kinds of dead letter of a changefeed, most frequent first: the error with its numbers
        blanked (event index, offset, ts differ between messages of one kind), how many, and the first message's
        error and place as an example. An aggregate in Spark: only ``limit`` rows reach the driver."""
        from pyspark.sql import functions as F

        self.ensure()
        frame = self.spark.table(self.table("dead_letters")).filter(f"changefeed = '{_escape(changefeed)}'")
        first_line = F.substring_index(F.col("error"), "\n", 1)
        kinds = (frame.withColumn("kind", F.regexp_replace(F.substring(first_line, 1, 300), "[0-9]+", "N"))
                 .groupBy("kind")
                 .agg(F.count(F.lit(1)).alias("count"),
                      F.min(F.struct("topic", "partition", "offset", first_line.alias("error"))).alias("first"))
                 .orderBy(F.desc("count"), F.asc("kind"))
                 .limit(limit))
        return [{"count": row["count"], "error": row["first"]["error"], "topic": row["first"]["topic"],
                 "partition": row["first"]["partition"], "offset": row["first"]["offset"]} for row in kinds.collect()]

    # -- rows below the cut ----------------------------------------------------------------------------
    def record_below_cut(self, changefeed: str, judged, cut_ts: int, run_id: str) -> None:
        """Append row changes found below the cut (``merge.below_cut.verdicts``), once per message."""
        from pyspark.sql import functions as F

        self.ensure()
        source = judged.select(
            F.lit(changefeed).alias("changefeed"), "topic", "partition", "offset", "seq", "commit_ts",
            F.lit(cut_ts).cast("bigint").alias("cut_ts"), "schema_name", "table_name", "op", "row_after",
            "row_before", "verdict", "compared_snapshot_id", F.lit(run_id).alias("run_id"),
            F.current_timestamp().cast("timestamp").alias("recorded_at"),
        )
        self._insert_new("below_cut", source)

    def below_cut_counts(self, changefeed: str) -> dict[str, int]:
        """How many row changes of a changefeed were found below its cut, per verdict (one small aggregate)."""
        frame = self.spark.table(self.table("below_cut")).filter(f"changefeed = '{_escape(changefeed)}'")
        return {row["verdict"]: row["count"] for row in frame.groupBy("verdict").count().collect()}

    # -- halted tables -----------------------------------------------------------------------------------
    def halted(self, changefeed: Optional[str] = None, include_resolved: bool = False) -> list[HaltedTable]:
        if self._new("halted", changefeed):
            return []
        rows = [r for r in self._rows("halted", changefeed) if include_resolved or r["resolution"] is None]
        rows.sort(key=lambda r: _nulls_first(r["ddl_ts"]))
        return [
            HaltedTable(r["changefeed"], r["schema_name"], r["table_name"], r["ddl_ts"], r["query"], r["reason"],
                        r["halted_at"], r["resolution"])
            for r in rows
        ]

    def halt(self, changefeed: str, schema: str, table: str, ddl_ts: int, query: str, reason: str) -> None:
        self.ensure()
        existing = [h for h in self.halted(changefeed) if (h.schema, h.table, h.ddl_ts) == (schema, table, ddl_ts)]
        if existing:
            return
        row = (changefeed, schema, table, ddl_ts, query, reason, datetime.now(timezone.utc).replace(tzinfo=None),
               None, None)
        self._created.discard("halted")  # read from now on
        local_frame(self.spark, [row], HALTED_DDL).writeTo(self.table("halted")).append()

    def resolve_halt(self, changefeed: str, schema: str, table: str, resolution: str) -> int:
        """Mark a halted table's halt resolved (``skip`` or ``retry``); returns how many halts were resolved."""
        self.ensure()
        before = len(self.halted(changefeed))
        self.spark.sql(
            f"UPDATE {self.table('halted')} SET resolution = '{_escape(resolution)}', "
            "resolved_at = current_timestamp() "
            f"WHERE changefeed = '{_escape(changefeed)}' AND lower(schema_name) = '{_escape(schema.lower())}' "
            f"AND lower(table_name) = '{_escape(table.lower())}' AND resolution IS NULL"
        )
        return before - len(self.halted(changefeed))

    def resolve_row_halt(self, changefeed: str, query: str, resolution: str) -> int:
        """Resolve the halt of a table stopped at one row event (its ``query`` names the position, see
        ``merge.value_checks.ROW_HALT``); returns how many halts were resolved."""
        self.ensure()
        condition = (f"changefeed = '{_escape(changefeed)}' AND query = '{_escape(query)}' "
                     "AND resolution IS NULL")
        count = self.spark.table(self.table("halted")).filter(condition).count()
        if count:
            self.spark.sql(f"UPDATE {self.table('halted')} SET resolution = '{_escape(resolution)}', "
                           f"resolved_at = current_timestamp() WHERE {condition}")
        return count

    # -- partitions held at an undecodable message -----------------------------------------------------
    def holds(self, changefeed: str, resolution: Optional[str] = None) -> list[dict[str, Any]]:
        """The held messages of a changefeed: unresolved ones (``resolution=None``) or those resolved so."""
        if self._new("held", changefeed):
            return []
        rows = sorted((r for r in self._rows("held", changefeed) if r["resolution"] == resolution),
                      key=lambda r: (r["topic"], r["partition"], r["offset"]))
        return [{"topic": r["topic"], "partition": r["partition"], "offset": r["offset"], "error": r["error"],
                 "held_at": r["held_at"]} for r in rows]

    def record_holds(self, changefeed: str, failures) -> None:
        """Record the messages partitions are held at (``failures``: decode-failure events), once each."""
        from pyspark.sql import functions as F

        self.ensure()
        source = failures.select(
            F.lit(changefeed).alias("changefeed"), "topic", "partition", "offset", "seq", "error", "raw_key",
            "raw_value", F.current_timestamp().cast("timestamp").alias("held_at"),
            F.lit(None).cast("string").alias("resolution"), F.lit(None).cast("timestamp").alias("resolved_at"),
        )
        self._insert_new("held", source, "AND t.resolution IS NULL")

    def resolve_holds(self, changefeed: str, resolution: str, topic: Optional[str] = None,
                      partition: Optional[int] = None, offset: Optional[int] = None,
                      keep: Iterable[tuple[str, int, int]] = ()) -> int:
        """Resolve unresolved holds (all of the changefeed's, or the one at topic/partition/offset), except those
        in ``keep``; returns how many were resolved."""
        self.ensure()
        where = [f"changefeed = '{_escape(changefeed)}'", "resolution IS NULL"]
        if topic is not None:
            where.append(f"topic = '{_escape(topic)}' AND partition = {int(partition)} AND offset = {int(offset)}")
        for kept_topic, kept_partition, kept_offset in keep:
            where.append(f"NOT (topic = '{_escape(kept_topic)}' AND partition = {int(kept_partition)} "
                         f"AND offset = {int(kept_offset)})")
        condition = " AND ".join(where)
        count = self.spark.table(self.table("held")).filter(condition).count()
        if count:
            self.spark.sql(f"UPDATE {self.table('held')} SET resolution = '{_escape(resolution)}', "
                           f"resolved_at = current_timestamp() WHERE {condition}")
        return count


    def _insert_new(self, table: str, source, also: str = "") -> None:
        """Insert the rows of ``source`` whose message (changefeed, topic, partition, offset, seq) ``table`` does
        not hold yet (``also``: a further condition on the existing row): a rerun reads the same messages again."""
        self._created.discard(table)  # read from now on
        view = f"_lakehouse_{table}_src"
        source.createOrReplaceTempView(view)
        try:
            self.spark.sql(
                f"MERGE INTO {self.table(table)} t USING {view} s "
                "ON t.changefeed = s.changefeed AND t.topic = s.topic AND t.partition = s.partition "
                f"AND t.offset = s.offset AND t.seq = s.seq {also} WHEN NOT MATCHED THEN INSERT *"
            )
        finally:
            self.spark.catalog.dropTempView(view)


def _nulls_first(value: Any) -> tuple[bool, Any]:
    """A sort key putting NULL (None) before every value, as Spark's ascending order does."""
    return value is not None, value


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
