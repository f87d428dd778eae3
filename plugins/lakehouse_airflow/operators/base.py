"""What every lakehouse task shares: its connection and config file, the Settings through ``LakehouseHook``, and
its OpenLineage report.

Each operator is a thin shell around one ``ticdc_lakehouse.commands.pipeline`` (or ``maintenance``) function: it resolves
the Settings, calls the function with the task log as progress callback and returns the function's JSON result as
XCom. Failures that a retry cannot fix (data lost to retention, a corrupt archive, a table halted at a DDL) raise
``AirflowFailException`` so the task fails at once instead of burning its retries; everything else (broker
unreachable, the changefeed's merge lock held by another run) raises normally and is retried with backoff.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from airflow.sdk import BaseOperator

from lakehouse_airflow.hooks.lakehouse import LakehouseHook


def jsonable(value: Any) -> Any:
    """What XCom can store: the pipeline's dicts with anything exotic (paths, datetimes) turned into strings."""
    return json.loads(json.dumps(value, default=str))


class LakehouseBaseOperator(BaseOperator):
    """What every lakehouse operator and sensor takes: which deployment (connection, config file) and changefeed it
    works on; it resolves them through ``LakehouseHook`` and reports the task's lineage (see ``lineage``).

    :param changefeed: the changefeed (templated where the task lists it; default: the only or first configured)
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    """

    #: set by ``execute``: (settings, changefeed, topics read, tables written, landing written)
    _lineage: Optional[tuple[Any, str, Sequence[str], Sequence[str], bool]] = None

    def __init__(self, *, changefeed: Optional[str] = None,
                 lakehouse_conn_id: str = LakehouseHook.default_conn_name, config_file: Optional[str] = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.changefeed = changefeed
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file

    def lakehouse_hook(self) -> LakehouseHook:
        return LakehouseHook(self.lakehouse_conn_id, self.config_file)

    def resolve(self) -> tuple[Any, str]:
        """(Settings, changefeed name) of this task, after template rendering."""
        return self.lakehouse_hook().resolve(self.changefeed)

    def get_openlineage_facets_on_complete(self, task_instance):
        """OpenLineage inputs (Kafka topics) and outputs (Iceberg tables, the landing zone) of the finished task;
        None without the OpenLineage provider."""
        from lakehouse_airflow.lineage import operator_lineage

        if self._lineage is None:
            return None
        settings, changefeed, topics, tables, landing = self._lineage
        return operator_lineage(settings, changefeed, topics, tables, landing)
