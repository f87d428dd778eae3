"""Consistent cuts across tables, by upstream TSO or wall-clock time.

Every merge run ends at one global resolved ts and records, in the ``checkpoints`` control table, each table's
snapshot at that cut; it also tags each table ``tso_<ts>``. Reading "every table as of TSO X" therefore means:
pick the greatest recorded cut <= X and read each table at its snapshot in that cut. Spark SQL is rewritten with
sqlglot so that ``shop.orders`` becomes ``shop.orders.snapshot_id_<id>`` (Iceberg's snapshot selector); plain
Spark users get the same with ``SELECT ... FROM shop.orders VERSION AS OF 'tso_<ts>'``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Optional

from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.runtime.parallel import commits_at_once, map_at_most
from ticdc_lakehouse.iceberg.java_api import JavaIceberg
from ticdc_lakehouse.runtime.state import Checkpoint, StateStore

TSO_LOGICAL_BITS = 18
TAG_PREFIX = "tso_"


class AsOfError(ValueError):
    """The requested point in time cannot be served (beyond what is applied, or before the first cut)."""


def tso_to_datetime(tso: int) -> datetime:
    """The upstream wall-clock time (UTC) of a TSO: its physical part is Unix milliseconds."""
    return datetime.fromtimestamp((tso >> TSO_LOGICAL_BITS) / 1000, tz=timezone.utc)


def datetime_to_tso(moment: datetime) -> int:
    """The greatest TSO at ``moment`` (every commit at or before it), for ``--as-of-time``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    millis = int(moment.timestamp() * 1000)
    return (millis << TSO_LOGICAL_BITS) | ((1 << TSO_LOGICAL_BITS) - 1)


def parse_time(text: str) -> datetime:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]`` (UTC unless an offset is given, e.g. ``+08:00``)."""
    try:
        return datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError as exc:
        raise AsOfError(f"not a time: {text!r}; expected 'YYYY-MM-DD HH:MM:SS'") from exc


def choose_cut(checkpoints: list[Checkpoint], tso: int) -> Checkpoint:
    """The checkpoint with the greatest resolved ts <= ``tso``."""
    if not checkpoints:
        raise AsOfError("nothing has been applied yet: no consistent cut exists")
    latest = max(c.resolved_ts for c in checkpoints)
    if tso > latest:
        raise AsOfError(
            f"TSO {tso} ({tso_to_datetime(tso):%Y-%m-%d %H:%M:%S} UTC) is beyond what has been applied: the latest "
            f"cut is {latest} ({tso_to_datetime(latest):%Y-%m-%d %H:%M:%S} UTC)"
        )
    eligible = [c for c in checkpoints if c.resolved_ts <= tso and c.resolved_ts > 0]
    if not eligible:
        first = (min(c.resolved_ts for c in checkpoints if c.resolved_ts > 0)
                 if any(c.resolved_ts for c in checkpoints) else 0)
        raise AsOfError(f"TSO {tso} is before the first applied cut ({first})")
    return max(eligible, key=lambda c: (c.resolved_ts, c.committed_at or datetime.min))


def rewrite_as_of(sql: str, snapshots: Mapping[str, Optional[int]], catalog: str) -> str:
    """Point every table reference of ``sql`` that belongs to the cut at its snapshot in the cut."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="spark")
    lowered = {name.lower(): (name, snap) for name, snap in snapshots.items()}
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}

    def visit(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Table) or not node.name:
            return node
        if not node.db and node.name.lower() in ctes:
            return node
        if node.catalog and node.catalog.lower() != catalog.lower():
            return node
        if not node.db:
            raise AsOfError(f"use schema-qualified names with an as-of query (got {node.name!r})")
        key = f"{node.db}.{node.name}".lower()
        if key not in lowered:
            raise AsOfError(f"table {key} was not part of the changefeed at that cut (it did not exist yet)")
        actual, snapshot = lowered[key]
        if snapshot is None:
            raise AsOfError(f"table {key} had no snapshot at that cut")
        namespace, name = _split_name(actual, node.db)
        replacement = exp.Table(
            this=exp.to_identifier(f"snapshot_id_{snapshot}", quoted=True),
            db=exp.to_identifier(name, quoted=True),
            catalog=exp.to_identifier(namespace, quoted=True),
            alias=node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name, quoted=True)),
        )
        return replacement

    return tree.transform(visit).sql(dialect="spark")


def _split_name(qualified_name: str, namespace_hint: str) -> tuple[str, str]:
    """``namespace.table`` as recorded in a checkpoint; the namespace is the hint's length (it may hold dots)."""
    namespace = qualified_name[: len(namespace_hint)]
    return namespace, qualified_name[len(namespace_hint) + 1 :]


def as_of_sql(spark, settings: Settings, sql: str, tso: int, changefeed: Optional[str] = None) -> str:
    """``sql`` rewritten to read every table at the greatest cut <= ``tso`` of the changefeed."""
    state = StateStore(spark, settings.catalog_name)
    name = changefeed or settings.changefeed().name
    checkpoints = state.checkpoints(name)
    if not checkpoints:
        raise AsOfError(f"changefeed {name!r} has no applied cut yet")
    cut = choose_cut(checkpoints, tso)
    return rewrite_as_of(sql, cut.tables, settings.catalog_name)


def tag_cut(spark, settings: Settings, cut: int, tables: Mapping[str, Optional[int]],
            loaded: Optional[Mapping[str, Any]] = None) -> None:
    """Tag each table's snapshot at the cut ``tso_<cut>`` so plain Spark can read the cut. No age limit on the
    tag: ``lakehouse maintain`` decides which cuts to keep (``maintenance.retain_cuts_days``/``retain_last_cuts``).

    Through Iceberg's API, one catalog commit per table (an ``ALTER TABLE ... CREATE TAG`` statement per table
    cost a SQL parse and plan each: seconds for a changefeed of hundreds of tables). ``loaded``: the tables as the
    caller loaded them (name -> Java table), not loaded again (a commit that finds its table changed since
    refreshes it and tries again, as any Iceberg commit does)."""
    ji = JavaIceberg(spark, settings.catalog_name)
    tag = TAG_PREFIX + str(cut)
    known = loaded or {}

    def tag_table(name: str, snapshot: int) -> None:
        namespace, _, table = name.partition(".")
        jtable = known.get(name)
        if jtable is None:
            jtable = ji.load(namespace, table)
        manage = jtable.manageSnapshots()
        if jtable.refs().containsKey(tag):
            manage.replaceTag(tag, int(snapshot)).commit()
        else:
            manage.createTag(tag, int(snapshot)).commit()

    tagged = [(name, snapshot) for name, snapshot in tables.items() if snapshot is not None]
    map_at_most(lambda item: tag_table(*item), tagged, commits_at_once(settings.merge.parallel_tables), "tag")
