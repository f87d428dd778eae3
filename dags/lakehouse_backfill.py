"""Manual Airflow DAG ``lakehouse_backfill``: land an archived TiCDC topic (Kafka log segments), merge, publish.

Trigger it with params ``{"archive": "/path/to/archive", "changefeed": "...", "protocol": null, "stop_ts": null}``
(``airflow dags trigger lakehouse_backfill --conf '{...}'``). See ``plugins/lakehouse_airflow/dag_factory.py``.
"""

import sys
from pathlib import Path

for _path in (Path(__file__).resolve().parents[1] / "plugins", Path(__file__).resolve().parents[1]):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))

from lakehouse_airflow.dag_factory import backfill_dag  # noqa: E402
from ticdc_lakehouse.runtime.config import load_settings  # noqa: E402

dag = backfill_dag(load_settings())
