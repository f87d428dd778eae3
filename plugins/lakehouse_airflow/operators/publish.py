"""``PublishCutOperator``: make a merge's consistent cut visible: log, metrics, and asset events per table."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from lakehouse_airflow.hooks.lakehouse import text_or_none

TSO_LOGICAL_BITS = 18


def tso_time(tso: int) -> datetime:
    """The upstream wall-clock time of a TSO (its physical part is Unix milliseconds)."""
    return datetime.fromtimestamp((tso >> TSO_LOGICAL_BITS) / 1000, tz=timezone.utc)


def cut_metrics(changefeed: str, merge_result: Mapping[str, Any], now: Optional[float] = None) -> dict[str, Any]:
    """The metrics of one merge (pure): the cut, whether it is new, its tag, freshness, halts, dead letters."""
    from ticdc_lakehouse.decode.protocols import carries_resolved_ts

    report = merge_result.get("merge", merge_result) if merge_result else {}
    resolved = int(report.get("resolved_ts") or 0)
    previous = int(report.get("previous_resolved_ts") or 0)
    new_cut = resolved > previous
    tagged = new_cut and carries_resolved_ts(report.get("protocol"))
    now = time.time() if now is None else now
    return {
        "changefeed": changefeed,
        "run_id": report.get("run_id"),
        "resolved_ts": resolved,
        "previous_resolved_ts": previous,
        "new_cut": new_cut,
        "tag": f"tso_{resolved}" if tagged else None,
        "cut_time": tso_time(resolved).isoformat() if resolved else None,
        "freshness_seconds": round(now - tso_time(resolved).timestamp(), 3) if resolved else None,
        "events_read": int(report.get("events_read") or 0),
        "tables_merged": len(report.get("tables_merged") or []),
        "ddls_applied": len(report.get("ddls_applied") or []),
        "halted_tables": [h.get("table") for h in report.get("halted") or []],
        "held_partitions": [
            f"{h.get('topic')}/{h.get('partition')}/{h.get('offset')}" for h in report.get("held") or []
        ],
        "pending_tables": list(report.get("pending_tables") or []),
        "dead_letters": int(report.get("dead_letters") or 0),
        "merge_seconds": float(report.get("seconds") or 0.0),
    }


class PublishCutOperator(BaseOperator):
    """Publish the merge's consistent cut: log it, push its metrics (XCom, StatsD), emit the changefeed's asset
    and one asset event per Iceberg table the merge changed.

    The merge already committed the cut and tagged every table ``tso_<ts>``; this task makes the outcome visible
    to people and to downstream DAGs, scheduled on ``Asset("lakehouse://changefeeds/<changefeed>")`` (events carry
    the metrics as ``extra``) or on one table, ``Asset("iceberg://<catalog>/<namespace>/<table>")``: an
    ``AssetAlias`` among the outlets receives an event for each changed table, with the cut in its ``extra``
    (``lineage.table_extra``). With ``fail_on_halt`` a table halted at a DDL fails the task (no retry) so the run
    turns red until ``lakehouse resume`` resolves it; the metrics and asset events are pushed first.

    :param changefeed: the changefeed (templated; default: the merge result's)
    :param merge_result: the merge task's XCom (``merge.output``)
    :param fail_on_halt: fail when a table is halted at a DDL or a partition is held
    """

    template_fields: Sequence[str] = ("changefeed", "merge_result")
    ui_color = "#e9f7ec"

    def __init__(self, *, changefeed: Optional[str] = None, merge_result: Any = None, fail_on_halt: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changefeed = changefeed
        self.merge_result = merge_result
        self.fail_on_halt = fail_on_halt

    def execute(self, context) -> dict[str, Any]:
        result = self.merge_result or {}
        if isinstance(result, str):
            result = json.loads(result)
        name = text_or_none(self.changefeed) or (result.get("merge") or {}).get("changefeed") or "default"
        metrics = cut_metrics(name, result)
        if metrics["new_cut"]:
            self.log.info("changefeed %s: consistent cut %s at %s UTC%s", name, metrics["resolved_ts"],
                          metrics["cut_time"], f", tagged {metrics['tag']}" if metrics["tag"] else "")
        else:
            self.log.info("changefeed %s: no new cut (still %s)", name, metrics["resolved_ts"])
        _emit_stats(name, metrics)
        from airflow.sdk import Asset, AssetAlias

        from lakehouse_airflow.lineage import changed_tables, table_asset_uri, table_extra

        report = result.get("merge", result) if result else {}
        for outlet in self.outlets or []:
            if isinstance(outlet, AssetAlias):
                catalog = result.get("catalog") or "lake"
                for table in changed_tables(report):
                    context["outlet_events"][outlet].add(Asset(table_asset_uri(catalog, table)),
                                                         extra=table_extra(table, metrics, report))
            elif isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = metrics
        if metrics["halted_tables"] and self.fail_on_halt:
            context["ti"].xcom_push(key="metrics", value=metrics)
            raise AirflowFailException(
                f"changefeed {name}: table(s) halted at a DDL: {', '.join(metrics['halted_tables'])}. Fix and run "
                "`lakehouse resume <schema.table> --skip-ddl|--retry`; the other tables are merged."
            )
        if metrics["held_partitions"] and self.fail_on_halt:
            context["ti"].xcom_push(key="metrics", value=metrics)
            raise AirflowFailException(
                f"changefeed {name}: partition(s) held at an undecodable message: "
                f"{', '.join(metrics['held_partitions'])}. Fix the cause and rerun, or skip the message with "
                "`lakehouse skip-message TOPIC/PARTITION/OFFSET` (it goes to the dead-letter table)."
            )
        return metrics


def _emit_stats(changefeed: str, metrics: Mapping[str, Any]) -> None:
    """StatsD/OpenTelemetry gauges through Airflow's metrics (a no-op unless metrics are enabled)."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # pragma: no cover - older task SDK
        return
    prefix = f"lakehouse.{changefeed}"
    if metrics["resolved_ts"]:
        Stats.gauge(f"{prefix}.freshness_seconds", metrics["freshness_seconds"])
    Stats.gauge(f"{prefix}.halted_tables", len(metrics["halted_tables"]))
    Stats.gauge(f"{prefix}.held_partitions", len(metrics["held_partitions"]))
    Stats.gauge(f"{prefix}.dead_letters", metrics["dead_letters"])
    Stats.gauge(f"{prefix}.events_read", metrics["events_read"])
    Stats.timing(f"{prefix}.merge_seconds", metrics["merge_seconds"] * 1000)
