"""Airflow DAG ``lakehouse_maintenance``: Iceberg maintenance of every changefeed's tables.

Runs on ``[maintenance] schedule`` (default ``@daily``); each changefeed's task shares that changefeed's merge
pool so it never overlaps its merge. Param ``dry_run`` only reports. See ``plugins/lakehouse_airflow/dag_factory.py``.
"""

import sys
from pathlib import Path

for _path in (Path(__file__).resolve().parents[1] / "plugins", Path(__file__).resolve().parents[1]):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))

from lakehouse_airflow.dag_factory import maintenance_dag  # noqa: E402
from ticdc_lakehouse.runtime.config import load_settings  # noqa: E402

dag = maintenance_dag(load_settings())
