"""Differential property test of the issue 19 traps: hypothesis generates small upstream histories mixing them,
the test keeps the upstream tables itself (the oracle), writes the changes as TiCDC would (the project's
Canal-JSON and Open Protocol encoders, the archive writer), backfills them in one or two runs and compares every
lake table with the oracle.

Traps mixed: a table keyed by a NOT NULL UNIQUE handle (Canal-JSON names no key for it), a keyless table whose
rows repeat, key-only deletes (``delete-only-output-handle-key-columns``), tables that predate the changefeed (no
CREATE TABLE in the stream) with a nullable ADD COLUMN mid-stream, made-up ts (Canal-JSON without the TiDB
extension: several transactions per millisecond, an insert then a delete in one of them), replayed tails.

Extension point (the values helper's area, #19 items 3, 6, 7, 8): value domains are ``VALUES``/``INTS`` below;
out-of-range values, BIT widths and ADD COLUMN defaults can be added as further column kinds and DDL there,
with the oracle stating what the lake must hold (or which dead letter it must record).

Spark is slow, so the number of examples is small (``max_examples``); each one is a fresh catalog.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from ticdc_lakehouse.sim.archive_writer import write_archive
from ticdc_lakehouse.core.model import DELETE, INSERT, UPDATE, DDLEvent, Position, ResolvedEvent, RowChange

MS = 1 << 18
T0 = 1_710_000_000_000 * MS
#: value domains (extension point: see the module doc)
VALUES = ["a", "b", None, "é"]
INTS = [1, 2, 3]
_homes = itertools.count()

PK_TYPES = {"id": "int", "v": "varchar(10)"}
UK_TYPES = {"u": "int", "v": "varchar(10)"}
NK_TYPES = {"a": "int", "b": "varchar(10)"}


@dataclass
class Upstream:
    """The oracle: the upstream tables as the history leaves them, and the events TiCDC sends for it."""

    protocol: str  # "open", "canal-json" (TiDB extension), "canal-plain" (none: made-up ts)
    key_only_deletes: bool
    pk_predates: bool
    nk_predates: bool
    pk: dict[int, dict] = field(default_factory=dict)
    uk: dict[int, dict] = field(default_factory=dict)
    nk: Counter = field(default_factory=Counter)
    pk_note: bool = False
    pk_seen: bool = False
    events: list = field(default_factory=list)
    ts: int = T0

    def tick(self, same_ms: bool) -> int:
        self.ts += 1 if same_ms else MS
        return self.ts

    def send(self, event) -> None:
        self.events.append(event)

    def key_columns(self, table: str) -> tuple[str, ...]:
        if table == "pk":
            return ("id",)
        if table == "uk":  # TiCDC's pkNames has no handle key; Open Protocol flags it
            return ("u",) if self.protocol == "open" else ()
        return ()

    def row(self, table: str, ts: int, op: str, after: Optional[dict], before: Optional[dict]) -> None:
        image = after if after is not None else before
        types = {"pk": PK_TYPES, "uk": UK_TYPES, "nk": NK_TYPES}[table]
        types = {name: types.get(name, "varchar(10)") for name in image}
        if before is not None and op == DELETE and self.key_only_deletes and table != "nk":
            key = self.key_columns(table) or ("u",)
            before = {k: before[k] for k in key}
            types = {k: types[k] for k in key}
        self.send(RowChange("app", table, ts, op, after, before, self.key_columns(table), types,
                            Position("t", 0, 0)))


def text(value) -> Optional[str]:
    return None if value is None else str(value)


def step(up: Upstream, data) -> None:
    """One upstream transaction (one row change, or the pk table's ADD COLUMN)."""
    table = data.draw(st.sampled_from(["pk", "uk", "nk"]))
    ts = up.tick(same_ms=up.protocol == "canal-plain" and data.draw(st.booleans()))
    if table == "pk" and up.pk_seen and not up.pk_note and data.draw(st.integers(0, 5)) == 0:
        up.pk_note = True
        for row in up.pk.values():
            row["note"] = None
        up.send(DDLEvent("app", "pk", ts, "ALTER TABLE app.pk ADD COLUMN note varchar(10)", "ADD_COLUMN",
                         Position("t", 0, 0)))
        return
    if table in ("pk", "uk"):
        rows, key = (up.pk, "id") if table == "pk" else (up.uk, "u")
        k = data.draw(st.sampled_from(INTS))
        v = text(data.draw(st.sampled_from(VALUES)))
        if k not in rows:
            new = {key: str(k), "v": v}
            if table == "pk" and up.pk_note:
                new["note"] = text(data.draw(st.sampled_from(VALUES)))
            rows[k] = new
            up.row(table, ts, INSERT, dict(new), None)
        elif data.draw(st.booleans()):
            old = dict(rows.pop(k))
            up.row(table, ts, DELETE, None, old)
        else:
            old = dict(rows[k])
            rows[k] = {**old, "v": v}
            up.row(table, ts, UPDATE, dict(rows[k]), old)
        up.pk_seen |= table == "pk"
        return
    image = (data.draw(st.sampled_from(INTS)), data.draw(st.sampled_from(VALUES)))
    existing = sorted(up.nk.elements(), key=repr)
    choice = data.draw(st.sampled_from(["insert", "delete", "update"])) if existing else "insert"
    as_row = lambda t: {"a": text(t[0]), "b": text(t[1])}  # noqa: E731
    if choice == "insert":
        up.nk[image] += 1
        up.row("nk", ts, INSERT, as_row(image), None)
    else:
        old = data.draw(st.sampled_from(existing))
        up.nk[old] -= 1
        if choice == "delete":
            up.row("nk", ts, DELETE, None, as_row(old))
        else:
            up.nk[image] += 1
            up.row("nk", ts, UPDATE, as_row(image), as_row(old))
    up.nk += Counter()  # drop zero counts


def creates(up: Upstream) -> list:
    at = Position("t", 0, 0)
    events = [DDLEvent("app", "", T0 - 3, "CREATE DATABASE app", "CREATE_SCHEMA", at),
              DDLEvent("app", "uk", T0 - 2, "CREATE TABLE app.uk (u int NOT NULL, v varchar(10), UNIQUE KEY (u))",
                       "CREATE_TABLE", at)]
    if not up.pk_predates:
        events.append(DDLEvent("app", "pk", T0 - 1, "CREATE TABLE app.pk (id int PRIMARY KEY, v varchar(10))",
                               "CREATE_TABLE", at))
    if not up.nk_predates:
        events.append(DDLEvent("app", "nk", T0 - 1, "CREATE TABLE app.nk (a int, b varchar(10))", "CREATE_TABLE",
                               at))
    return events


def write(up: Upstream, archive: Path, events: list) -> None:
    if up.protocol == "open":
        from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder

        encoded = [OpenProtocolEncoder().encode(e) for e in events]
    else:
        from ticdc_lakehouse.sim.encode.canal_json import CanalJsonEncoder

        encoder = CanalJsonEncoder(tidb_extension=up.protocol == "canal-json")
        encoded = [m for m in (encoder.encode(e) for e in events) if m is not None]
    write_archive(archive, "t", {0: [(key, value, [], None) for key, value in encoded]})


def lake_state(spark, name: str, columns: list[str]) -> list[tuple]:
    if not spark.catalog.tableExists(name):
        return []
    frame = spark.table(name)
    assert frame.columns == columns, f"{name}: columns {frame.columns} != {columns}"
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def expected(up: Upstream) -> dict[str, tuple[list[str], list[tuple]]]:
    def typed(row: dict, columns: list[str], ints: set[str]) -> tuple:
        return tuple(int(row[c]) if c in ints and row.get(c) is not None else row.get(c) for c in columns)

    pk_columns = ["id", "v"] + (["note"] if up.pk_note else [])
    return {
        "app.pk": (pk_columns, sorted((typed(r, pk_columns, {"id"}) for r in up.pk.values()), key=repr)),
        "app.uk": (["u", "v"], sorted((typed(r, ["u", "v"], {"u"}) for r in up.uk.values()), key=repr)),
        "app.nk": (["a", "b"], sorted((t for t in up.nk.elements()), key=repr)),
    }


@pytest.fixture
def fresh(spark_session, tmp_path, monkeypatch):
    """A function giving a fresh deployment (home, catalog) for each hypothesis example."""
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    def make(config: str):
        home = tmp_path / f"home{next(_homes)}"
        home.mkdir()
        (home / "lakehouse.toml").write_text(config)
        monkeypatch.setenv("LAKEHOUSE_HOME", str(home / "lake"))
        monkeypatch.setenv("LAKEHOUSE__CATALOG__NAME", f"lake_p{next(_homes)}")
        monkeypatch.setenv("LAKEHOUSE_CONFIG", str(home / "lakehouse.toml"))
        settings = load_settings()
        use_catalog(spark_session, settings)
        return settings, home / "archive"

    return make


@hsettings(max_examples=6, deadline=None, derandomize=True,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_the_lake_equals_the_upstream_tables_whatever_traps_the_stream_holds(spark_session, fresh, data):
    from ticdc_lakehouse.commands.pipeline import backfill

    up = Upstream(protocol=data.draw(st.sampled_from(["open", "canal-json", "canal-plain"]), label="protocol"),
                  key_only_deletes=data.draw(st.booleans(), label="key-only deletes"),
                  pk_predates=data.draw(st.booleans(), label="pk predates"),
                  nk_predates=data.draw(st.booleans(), label="nk predates"))
    config = '[changefeeds.default]\nprotocol = "{}"\n'.format("open" if up.protocol == "open" else "canal-json")
    if up.protocol == "canal-plain":
        config += 'resolved_ts = "none"\n'
    settings, archive = fresh(config)
    up.events.extend(creates(up))
    steps = data.draw(st.integers(4, 14), label="transactions")
    split = data.draw(st.integers(1, steps), label="first run ends after")
    runs = []
    for index in range(steps):
        step(up, data)
        if index + 1 == split:
            runs.append(len(up.events))
    tail = data.draw(st.integers(0, 3), label="replayed tail")
    replayable = up.protocol != "canal-plain" and len({e.commit_ts for e in up.events[-tail:]}) >= 2
    if tail and replayable:  # TiCDC resends the transactions after its checkpoint when it restarts
        replayed = up.events[-tail:]
        checkpoint = max([e.commit_ts for e in up.events[:-tail]] or [T0])
        up.events.append(ResolvedEvent(checkpoint, Position("t", 0, 0)))
        up.events.extend(replayed)
    runs.append(len(up.events))
    start = 0
    for end in runs:
        chunk = list(up.events[start:end])
        chunk.append(ResolvedEvent(max(e.commit_ts for e in up.events[:end] if not isinstance(e, ResolvedEvent)),
                                   Position("t", 0, 0)))
        write(up, archive, chunk)
        result = backfill(settings, archive, protocol="open" if up.protocol == "open" else "canal-json",
                          spark=spark_session)
        assert result["ok"], result
        assert result["merge"]["dead_letters"] == 0
        start = end
    for name, (columns, rows) in expected(up).items():
        assert lake_state(spark_session, name, columns) == rows, name
