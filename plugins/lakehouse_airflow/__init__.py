"""Airflow integration of ticdc-lakehouse, laid out like an Airflow provider package.

- :mod:`.hooks`: ``LakehouseHook`` (the deployment's Settings, secrets from Airflow connections or the environment)
  and ``LakehouseSparkSubmitHook`` (spark-submit to the configured ``spark.master``);
- :mod:`.operators`: land, land-from-archive, merge (in-process or spark-submit), publish the cut, maintain;
- :mod:`.sensors`: ``KafkaLagSensor`` (new records waiting in Kafka; deferrable);
- :mod:`.table_cut_sensor`: ``TableCutSensor`` (a lake table consistent up to a moment; deferrable);
- :mod:`.triggers`: ``TableCutTrigger``, ``KafkaLagTrigger`` (the waits of the deferred sensors);
- :mod:`.lineage`: per-table assets (``iceberg://<catalog>/<namespace>/<table>``) and OpenLineage datasets;
- :mod:`.pools`: the per-changefeed merge pools (``airflow pools import``);
- :mod:`.env`: ``AIRFLOW_HOME`` under ``LAKEHOUSE_HOME`` (standard library only).

The operators are thin: each calls one ``ticdc_lakehouse.pipeline`` (or ``maintenance``) function, so a DAG run and
the ``lakehouse`` CLI do exactly the same work. Nothing heavy (pyspark, confluent_kafka) is imported here or by
the DAG files at parse time.
"""

from __future__ import annotations

from typing import Any

from lakehouse_airflow.env import PROJECT_ROOT, airflow_env, apply_airflow_env, lakehouse_home

_LAZY = {
    "LakehouseHook": "lakehouse_airflow.hooks",
    "LakehouseSparkSubmitHook": "lakehouse_airflow.hooks",
    "LandChangefeedOperator": "lakehouse_airflow.operators",
    "LandArchiveOperator": "lakehouse_airflow.operators",
    "MergeChangefeedOperator": "lakehouse_airflow.operators",
    "PublishCutOperator": "lakehouse_airflow.operators",
    "MaintainOperator": "lakehouse_airflow.operators",
    "KafkaLagSensor": "lakehouse_airflow.sensors",
    "TableCutSensor": "lakehouse_airflow.table_cut_sensor",
    "TableCutTrigger": "lakehouse_airflow.triggers",
    "KafkaLagTrigger": "lakehouse_airflow.triggers",
}


def __getattr__(name: str) -> Any:
    """Import the Airflow classes on first use, so ``lakehouse_airflow.env`` works without Airflow installed."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = ["PROJECT_ROOT", "airflow_env", "apply_airflow_env", "lakehouse_home", *_LAZY]
