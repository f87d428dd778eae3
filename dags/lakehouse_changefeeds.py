"""One scheduled Airflow DAG per configured TiCDC changefeed: land -> merge -> publish the consistent cut.

DAG ids are ``lakehouse_<changefeed>``; with no ``[changefeeds]`` configured there is one, ``lakehouse_default``.
Schedule, retries and backoff come from ``[airflow]`` in the lakehouse config (``LAKEHOUSE_CONFIG`` or
``conf/lakehouse.toml``); see ``plugins/lakehouse_airflow/dag_factory.py``. Parsing imports nothing heavy.
"""

import sys
from pathlib import Path

for _path in (Path(__file__).resolve().parents[1] / "plugins", Path(__file__).resolve().parents[1]):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))

from lakehouse_airflow.dag_factory import changefeed_dags  # noqa: E402
from ticdc_lakehouse.runtime.config import load_settings  # noqa: E402

globals().update(changefeed_dags(load_settings()))
