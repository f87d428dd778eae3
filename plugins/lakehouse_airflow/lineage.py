"""What the lakehouse tasks read and write, as Airflow assets and OpenLineage datasets.

Assets: one per Iceberg table, ``iceberg://<catalog>/<namespace>/<table>``, emitted by the publish task through
an ``AssetAlias`` (the tables are only known at run time: a changefeed creates them as rows arrive), each event
carrying the table's cut in its ``extra``; a table whose only change in the run is a DDL (created, altered or
truncated with no rows) gets its event too. A downstream DAG scheduled on ``Asset("iceberg://lake/shop/orders")``
runs after every merge that changed ``shop.orders``.

OpenLineage (only when the ``apache-airflow-providers-openlineage`` provider is installed and configured; the
facet methods return None otherwise): inputs are Kafka topics (namespace ``kafka://<first bootstrap server>``,
name the topic, as the OpenLineage naming spec has it), outputs the Iceberg tables, named by their location in the
warehouse (``file``/``s3://bucket`` namespace and the path) with a ``symlinks`` facet giving the table name.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional
from urllib.parse import quote, urlparse

#: the scheme of the per-table assets
TABLE_ASSET_SCHEME = "iceberg"


def table_asset_uri(catalog: str, table: str) -> str:
    """``iceberg://lake/shop/orders`` for lake table ``shop.orders`` of catalog ``lake`` (pure)."""
    namespace, _, name = table.rpartition(".")
    return f"{TABLE_ASSET_SCHEME}://{quote(catalog, safe='')}/{quote(namespace, safe='')}/{quote(name, safe='')}"


def changed_tables(merge_report: Mapping[str, Any]) -> list[str]:
    """The lake tables a merge changed, sorted: rows merged, or only a DDL applied (created, altered, truncated
    with no rows in the run)."""
    return sorted(set(merge_report.get("tables_merged") or []) | set(merge_report.get("tables") or {})
                  | set(merge_report.get("ddl_tables") or []))


def table_extra(table: str, metrics: Mapping[str, Any], merge_report: Mapping[str, Any]) -> dict[str, Any]:
    """The ``extra`` of a table's asset event: the cut (TSO, time, tag) and what the merge did to the table."""
    counts = (merge_report.get("tables") or {}).get(table) or {}
    return {
        "table": table,
        "changefeed": metrics.get("changefeed"),
        "resolved_ts": metrics.get("resolved_ts"),
        "cut_time": metrics.get("cut_time"),
        "tag": metrics.get("tag"),
        "run_id": metrics.get("run_id"),
        "rows_written": int(counts.get("written") or 0),
        "rows_removed": int(counts.get("removed") or 0),
        "events": dict(counts.get("events") or {}),
        "ddl": table in (merge_report.get("ddl_tables") or []),
    }


def kafka_namespace(bootstrap_servers: str) -> str:
    first = bootstrap_servers.split(",")[0].strip()
    return f"kafka://{first.split('://', 1)[-1]}"


def warehouse_dataset_id(warehouse: str, table: str) -> tuple[str, str]:
    """(namespace, name) of an Iceberg table by its default location ``<warehouse>/<namespace>/<table>``."""
    location = f"{warehouse.rstrip('/')}/{'/'.join(table.split('.'))}"
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return "file", parsed.path if parsed.scheme else location
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def operator_lineage(settings, changefeed: str, topics: Iterable[str], tables: Iterable[str] = (),
                     landing: bool = False):
    """An ``OperatorLineage`` (inputs: the changefeed's Kafka topics; outputs: ``tables``, or the landing zone),
    or None when the OpenLineage provider is not installed."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset, Identifier, SymlinksDatasetFacet
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    cf = settings.changefeed(changefeed)
    inputs = [Dataset(namespace=kafka_namespace(cf.bootstrap_servers), name=topic) for topic in topics]
    outputs = []
    if landing:
        namespace, name = warehouse_dataset_id(str(settings.landing_path), cf.name)  # a local path or s3://
        outputs.append(Dataset(namespace=namespace, name=name))
    for table in tables:
        namespace, name = warehouse_dataset_id(settings.warehouse, table)
        symlink = SymlinksDatasetFacet(identifiers=[Identifier(namespace=f"iceberg://{settings.catalog_name}",
                                                               name=table, type="TABLE")])
        outputs.append(Dataset(namespace=namespace, name=name, facets={"symlinks": symlink}))
    return OperatorLineage(inputs=inputs, outputs=outputs)


def archive_topics(archive: Optional[str]) -> list[str]:
    """The topics of an archive directory (``<topic>-<partition>/`` subdirectories)."""
    from pathlib import Path

    if not archive or not Path(archive).is_dir():
        return []
    topics = {p.name.rpartition("-")[0] for p in Path(archive).iterdir()
              if p.is_dir() and p.name.rpartition("-")[2].isdigit()}
    return sorted(t for t in topics if t)
