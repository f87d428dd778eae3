"""The project's DAGs, built from the lakehouse configuration (the files in ``dags/`` only call these).

Why factories: the DAG shapes are tested by building them from a given ``Settings`` -- no environment juggling
-- and the dag-processor parses three tiny files that import nothing heavy (no pyspark, no confluent_kafka).

- :func:`changefeed_dag` -- one per changefeed, on ``[airflow] schedule``: land (one mapped task per topic) ->
  merge -> publish;
- :func:`backfill_dag` -- manual, with params: land an archive -> merge -> publish;
- :func:`maintenance_dag` -- on ``[maintenance] schedule`` (default ``@daily``): maintain every changefeed.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from airflow.sdk import DAG, Asset, AssetAlias, Param

from lakehouse_airflow.operators.land import LandChangefeedOperator
from lakehouse_airflow.operators.land_archive import LandArchiveOperator
from lakehouse_airflow.operators.maintain import MaintainOperator
from lakehouse_airflow.operators.merge import MergeChangefeedOperator
from lakehouse_airflow.operators.publish import PublishCutOperator
from lakehouse_airflow.pools import dag_changefeeds, merge_pool, pools_enabled

START_DATE = datetime(2024, 1, 1, tzinfo=timezone.utc)
BACKFILL_DAG_ID = "lakehouse_backfill"
MAINTENANCE_DAG_ID = "lakehouse_maintenance"
BACKOFF_MULTIPLIER = 2.0


def safe_id(name: str) -> str:
    """A changefeed name as a DAG/task id fragment (Airflow allows letters, digits, ``_ - .``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def changefeed_dag_id(changefeed: str) -> str:
    return f"lakehouse_{safe_id(changefeed)}"


def changefeed_asset(changefeed: str) -> Asset:
    """What a changefeed's publish task emits on every merge: downstream DAGs can be scheduled on it."""
    return Asset(name=f"lakehouse_{safe_id(changefeed)}", uri=f"lakehouse://changefeeds/{changefeed}")


def tables_alias(source: str) -> AssetAlias:
    """The alias through which a publish task emits one event per changed Iceberg table (``lineage``): the tables
    are only known at run time, so they cannot be declared as outlets."""
    return AssetAlias(name=f"lakehouse_{safe_id(source)}_tables")


def _schedule(value: Any) -> Optional[str]:
    if value is None or str(value).strip().lower() in ("", "none", "null", "manual"):
        return None
    return str(value)


def default_args(settings) -> dict[str, Any]:
    """Retries with exponential backoff from ``[airflow]`` (retries, retry_delay_seconds, max_retry_delay_seconds)."""
    conf = settings.airflow
    return {
        "owner": "lakehouse",
        "retries": conf.retries,
        "retry_delay": timedelta(seconds=conf.retry_delay_seconds),
        "retry_exponential_backoff": BACKOFF_MULTIPLIER,
        "max_retry_delay": timedelta(seconds=conf.max_retry_delay_seconds),
    }


def _pool(settings, changefeed: str) -> dict[str, Any]:
    return {"pool": merge_pool(changefeed), "pool_slots": 1} if pools_enabled(settings) else {}


def changefeed_dag(settings, changefeed: str) -> DAG:
    """The scheduled cycle of one changefeed: land -> merge -> publish, never two runs at once."""
    cf = settings.changefeed(changefeed)
    pool = _pool(settings, cf.name)
    with DAG(
        dag_id=changefeed_dag_id(cf.name),
        description=f"TiCDC changefeed {cf.name} ({cf.protocol}) -> Iceberg: land, merge, publish the cut",
        schedule=_schedule(settings.airflow.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(settings),
        tags=["lakehouse", "ticdc", cf.protocol, cf.name],
        doc_md=__doc__,
    ) as dag:
        land = LandChangefeedOperator.partial(
            task_id="land", changefeed=cf.name, max_active_tis_per_dagrun=1,
            map_index_template="{{ task.topics | join(',') }}",
        ).expand(topics=[[topic] for topic in cf.topics])
        merge = MergeChangefeedOperator(task_id="merge", changefeed=cf.name, **pool)
        publish = PublishCutOperator(task_id="publish", changefeed=cf.name, merge_result=merge.output,
                                     outlets=[changefeed_asset(cf.name), tables_alias(cf.name)], retries=0)
        land >> merge >> publish
    return dag


def backfill_dag(settings) -> DAG:
    """Manual backfill of an archived topic: land the archive -> merge (even after a corrupt batch) -> publish.

    Params: ``archive`` (directory of ``<topic>-<partition>/<offset>.log``), ``changefeed``, ``protocol``
    (default: the changefeed's), ``stop_ts`` (merge no further than this TSO).
    """
    from ticdc_lakehouse.decode import PROTOCOLS

    default_cf = settings.changefeed().name
    with DAG(
        dag_id=BACKFILL_DAG_ID,
        description="Backfill an archived TiCDC topic (Kafka log segments) into Iceberg",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(settings),
        render_template_as_native_obj=True,
        tags=["lakehouse", "ticdc", "backfill"],
        doc_md=backfill_dag.__doc__,
        params={
            "archive": Param(type="string", minLength=1,
                             description="archive directory: <topic>-<partition>/<offset>.log files"),
            "changefeed": Param(default_cf, type="string", minLength=1,
                                description="changefeed to land into (its landing zone, checkpoints, tables)"),
            "protocol": Param(None, type=["null", "string"], enum=[None, *sorted(PROTOCOLS)],
                              description="protocol of the archived messages (default: the changefeed's)"),
            "stop_ts": Param(None, type=["null", "integer"], minimum=0,
                             description="merge no further than this TSO (default: the global resolved ts)"),
        },
    ) as dag:
        land = LandArchiveOperator(task_id="land_archive", archive="{{ params.archive }}",
                                   changefeed="{{ params.changefeed }}")
        merge = MergeChangefeedOperator(
            task_id="merge", changefeed="{{ params.changefeed }}", protocol="{{ params.protocol }}",
            stop_ts="{{ params.stop_ts }}", trigger_rule="all_done", **_pool(settings, default_cf),
        )
        publish = PublishCutOperator(task_id="publish", changefeed="{{ params.changefeed }}",
                                     merge_result=merge.output, outlets=[tables_alias("backfill")], retries=0)
        land >> merge >> publish
        land >> publish  # a failed landing fails the run even though the merge of what landed succeeded
    return dag


def maintenance_dag(settings) -> DAG:
    """Table maintenance of every changefeed on ``[maintenance] schedule``, each in its changefeed's pool."""
    schedule = settings.maintenance.schedule
    with DAG(
        dag_id=MAINTENANCE_DAG_ID,
        description="Iceberg maintenance: compaction, delete-file rewrite, snapshot expiry, orphan cleanup",
        schedule=_schedule(schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(settings),
        render_template_as_native_obj=True,
        tags=["lakehouse", "maintenance"],
        doc_md=maintenance_dag.__doc__,
        params={"dry_run": Param(False, type="boolean", description="only report what would be done")},
    ) as dag:
        for name in dag_changefeeds(settings):
            MaintainOperator(task_id=f"maintain_{safe_id(name)}", changefeed=name, dry_run="{{ params.dry_run }}",
                             **_pool(settings, name))
    return dag


def changefeed_dags(settings) -> dict[str, DAG]:
    return {changefeed_dag_id(name): changefeed_dag(settings, name) for name in dag_changefeeds(settings)}
