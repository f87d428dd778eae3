"""Airflow integration of ticdc-lakehouse, laid out like an Airflow provider package.

- :mod:`.hooks`: ``lakehouse.LakehouseHook`` (the deployment's Settings, secrets from Airflow connections or the
  environment; a table's cut; Kafka lag) and ``spark_submit.LakehouseSparkSubmitHook`` (spark-submit to the
  configured ``spark.master``);
- :mod:`.operators`: one per file: ``land``, ``land_archive``, ``merge`` (in-process or spark-submit), ``publish``
  (the cut), ``maintain``; ``base`` holds what they share;
- :mod:`.sensors`: ``kafka_lag.KafkaLagSensor`` (records waiting in Kafka, or the landing caught up) and
  ``table_cut.TableCutSensor`` (a lake table consistent up to a moment), both deferrable;
- :mod:`.triggers`: ``table_cut.TableCutTrigger``, ``kafka_lag.KafkaLagTrigger`` (the waits of deferred sensors);
- :mod:`.lineage`: per-table assets (``iceberg://<catalog>/<namespace>/<table>``) and OpenLineage datasets;
- :mod:`.pools`: the per-changefeed merge pools (``airflow pools import``);
- :mod:`.env`: ``AIRFLOW_HOME`` under ``LAKEHOUSE_HOME`` (standard library only).

The operators are thin: each calls one ``ticdc_lakehouse.commands.pipeline`` (or ``maintenance``) function, so a DAG run and
the ``lakehouse`` CLI do exactly the same work. Nothing heavy (pyspark, confluent_kafka) is imported here or by
the DAG files at parse time.
"""

from __future__ import annotations

from typing import Any

from lakehouse_airflow.env import PROJECT_ROOT, airflow_env, apply_airflow_env, lakehouse_home

_LAZY = {
    "LakehouseHook": "lakehouse_airflow.hooks.lakehouse",
    "LakehouseSparkSubmitHook": "lakehouse_airflow.hooks.spark_submit",
    "LandChangefeedOperator": "lakehouse_airflow.operators.land",
    "LandArchiveOperator": "lakehouse_airflow.operators.land_archive",
    "MergeChangefeedOperator": "lakehouse_airflow.operators.merge",
    "PublishCutOperator": "lakehouse_airflow.operators.publish",
    "MaintainOperator": "lakehouse_airflow.operators.maintain",
    "KafkaLagSensor": "lakehouse_airflow.sensors.kafka_lag",
    "TableCutSensor": "lakehouse_airflow.sensors.table_cut",
    "TableCutTrigger": "lakehouse_airflow.triggers.table_cut",
    "KafkaLagTrigger": "lakehouse_airflow.triggers.kafka_lag",
}


def __getattr__(name: str) -> Any:
    """Import the Airflow classes on first use, so ``lakehouse_airflow.env`` works without Airflow installed."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = ["PROJECT_ROOT", "airflow_env", "apply_airflow_env", "lakehouse_home", *_LAZY]
