"""Control tables of the pipeline, kept as Iceberg tables in the same catalog (namespace ``_lakehouse``).

* ``checkpoints``: one row per completed run of a changefeed: the consistent cut (global resolved ts), where each
  partition is read from next time, each partition's resolved ts, and every table's snapshot at the cut. It is
  written last, in one Iceberg commit: a run that crashed before it simply did not happen, and the tables' own
  watermarks make the rerun skip what they already hold.
* ``dead_letters``: messages that could not be decoded, with topic, partition, offset and the error.
* ``halted``: tables stopped at a DDL that Iceberg cannot express, with the reason, until an operator resumes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

from ticdc_lakehouse.iceberg.tables import quote

NAMESPACE = "_lakehouse"

CHECKPOINTS_DDL = (
    "changefeed string, resolved_ts bigint, run_id string, committed_at timestamp, restart_offsets string, "
    "partition_resolved string, tables string, landed_end string, protocol string"
)
DEAD_LETTERS_DDL = (
    "changefeed string, topic string, partition int, offset bigint, seq int, error string, raw_key string, "
    "raw_value string, run_id string, recorded_at timestamp"
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
    """Reads and writes the control tables through Spark (small tables; one commit per write)."""

    def __init__(self, spark, catalog: str) -> None:
        self.spark = spark
        self.catalog = catalog
        self._ensured = False

    def table(self, name: str) -> str:
        return f"{quote(self.catalog)}.{quote(NAMESPACE)}.{quote(name)}"

    def ensure(self) -> None:
        if self._ensured:
            return
        from ticdc_lakehouse.iceberg.java_api import JavaIceberg

        ji = JavaIceberg(self.spark, self.catalog)
        wanted = (("checkpoints", CHECKPOINTS_DDL), ("dead_letters", DEAD_LETTERS_DDL), ("halted", HALTED_DDL))
        if all(ji.table_exists(NAMESPACE, name) for name, _ in wanted):
            self._ensured = True
            return
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(self.catalog)}.{quote(NAMESPACE)}")
        for name, ddl in wanted:
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {self.table(name)} ({ddl}) USING iceberg "
                "TBLPROPERTIES ('format-version'='2')"
            )
        self._ensured = True

    # -- checkpoints -------------------------------------------------------------------------------------
    def checkpoints(self, changefeed: str) -> list[Checkpoint]:
        self.ensure()
        rows = (
            self.spark.table(self.table("checkpoints"))
            .filter(f"changefeed = '{_escape(changefeed)}'")
            .orderBy("resolved_ts", "committed_at")
            .collect()
        )
        return [self._checkpoint(row) for row in rows]

    def latest_checkpoint(self, changefeed: str) -> Checkpoint:
        self.ensure()
        rows = (
            self.spark.table(self.table("checkpoints"))
            .filter(f"changefeed = '{_escape(changefeed)}'")
            .orderBy("resolved_ts", "committed_at", ascending=False)
            .limit(1)
            .collect()
        )
        return self._checkpoint(rows[0]) if rows else Checkpoint(changefeed)

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
        frame = self.spark.createDataFrame([row], CHECKPOINTS_DDL)
        frame.writeTo(self.table("checkpoints")).append()

    # -- dead letters ------------------------------------------------------------------------------------
    def record_dead_letters(self, changefeed: str, failures, run_id: str) -> None:
        """Append decode failures not recorded before (a rerun re-reads the same messages)."""
        from pyspark.sql import functions as F

        self.ensure()
        source = failures.select(
            F.lit(changefeed).alias("changefeed"), "topic", "partition", "offset", "seq", "error", "raw_key",
            "raw_value", F.lit(run_id).alias("run_id"), F.current_timestamp().cast("timestamp").alias("recorded_at"),
        )
        view = "_lakehouse_dead_letters_src"
        source.createOrReplaceTempView(view)
        try:
            self.spark.sql(
                f"MERGE INTO {self.table('dead_letters')} t USING {view} s "
                "ON t.changefeed = s.changefeed AND t.topic = s.topic AND t.partition = s.partition "
                "AND t.offset = s.offset AND t.seq = s.seq WHEN NOT MATCHED THEN INSERT *"
            )
        finally:
            self.spark.catalog.dropTempView(view)

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

    # -- halted tables -----------------------------------------------------------------------------------
    def halted(self, changefeed: Optional[str] = None, include_resolved: bool = False) -> list[HaltedTable]:
        self.ensure()
        frame = self.spark.table(self.table("halted"))
        if changefeed:
            frame = frame.filter(f"changefeed = '{_escape(changefeed)}'")
        if not include_resolved:
            frame = frame.filter("resolution IS NULL")
        return [
            HaltedTable(r["changefeed"], r["schema_name"], r["table_name"], r["ddl_ts"], r["query"], r["reason"],
                        r["halted_at"], r["resolution"])
            for r in frame.orderBy("ddl_ts").collect()
        ]

    def halt(self, changefeed: str, schema: str, table: str, ddl_ts: int, query: str, reason: str) -> None:
        self.ensure()
        existing = [h for h in self.halted(changefeed) if (h.schema, h.table, h.ddl_ts) == (schema, table, ddl_ts)]
        if existing:
            return
        row = (changefeed, schema, table, ddl_ts, query, reason, datetime.now(timezone.utc).replace(tzinfo=None), None, None)
        self.spark.createDataFrame([row], HALTED_DDL).writeTo(self.table("halted")).append()

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


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
