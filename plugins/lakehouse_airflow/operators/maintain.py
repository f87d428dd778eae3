"""``MaintainOperator``: Iceberg maintenance of a changefeed's tables (``ticdc_lakehouse.commands.maintenance.maintain``)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from airflow.sdk.exceptions import AirflowFailException

from lakehouse_airflow.operators.base import LakehouseBaseOperator, jsonable


class MaintainOperator(LakehouseBaseOperator):
    """Table maintenance of a changefeed's tables: compaction, delete-file rewrite, snapshot expiry, orphans.

    The generated maintenance DAG puts it in the changefeed's merge pool so it never overlaps a merge of the
    same tables in Airflow. Problems found fail the task without retries (the result is pushed as XCom
    ``result`` first).

    :param changefeed: the changefeed whose tables to maintain (templated; default: the only or first one)
    :param dry_run: only report what would be done (templated: a bool or ``"true"``/``"1"``)
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    """

    template_fields: Sequence[str] = ("changefeed", "dry_run")
    ui_color = "#f3e9fb"

    def __init__(self, *, dry_run: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dry_run = dry_run

    def execute(self, context) -> dict[str, Any]:
        from ticdc_lakehouse.commands.maintenance import maintain

        settings, name = self.resolve()
        dry_run = self.dry_run if isinstance(self.dry_run, bool) else str(self.dry_run).lower() in ("1", "true")
        result = jsonable(maintain(settings, changefeed=name, dry_run=dry_run, progress=self.log.info))
        if not result.get("ok", True):
            context["ti"].xcom_push(key="result", value=result)
            raise AirflowFailException(f"maintenance of changefeed {name} found problems: {result.get('problems')}")
        return result
