"""``LandChangefeedOperator``: land new Kafka records of a changefeed into the landing zone (``pipeline.land``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from airflow.sdk.exceptions import AirflowFailException

from lakehouse_airflow.operators.base import LakehouseBaseOperator, jsonable


def only_topics(settings, changefeed: str, topics: Sequence[str]):
    """``settings`` with the changefeed restricted to ``topics`` (one mapped landing task per topic)."""
    cf = settings.changefeed(changefeed)
    unknown = sorted(set(topics) - set(cf.topics))
    if unknown:
        raise ValueError(f"topic(s) {unknown} are not part of changefeed {cf.name!r} (topics: {list(cf.topics)})")
    narrowed = dataclasses.replace(cf, topics=tuple(topics))
    return dataclasses.replace(settings, changefeeds={**settings.changefeeds, cf.name: narrowed})


class LandChangefeedOperator(LakehouseBaseOperator):
    """Land new Kafka records of a changefeed (or of some of its ``topics``) into the landing zone.

    Landing holds a per-changefeed lock, so mapped per-topic instances must run one at a time
    (``max_active_tis_per_dagrun=1``, as the generated DAGs do); they still retry independently. Records lost to
    Kafka's retention fail the task without retries. XCom: ``pipeline.land``'s result.

    :param changefeed: the changefeed (templated; default: the only or first configured one)
    :param topics: land only these topics of the changefeed (templated; default: all of them)
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    """

    template_fields: Sequence[str] = ("changefeed", "topics")
    ui_color = "#e8f4fd"

    def __init__(self, *, topics: Optional[Sequence[str]] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topics = topics

    def execute(self, context) -> dict[str, Any]:
        from ticdc_lakehouse.landing.errors import DataLossError
        from ticdc_lakehouse.commands.pipeline import land

        settings, name = self.resolve()
        if self.topics:
            settings = only_topics(settings, name, list(self.topics))
        try:
            result = land(settings, name, progress=self.log.info)
        except DataLossError as exc:
            raise AirflowFailException(
                f"{exc} -- retrying cannot bring deleted offsets back; see the landing README section on data loss"
            ) from exc
        self._lineage = (settings, name, list(settings.changefeed(name).topics), [], True)
        landing = result.get("landing") or {}
        self.log.info("changefeed %s: landed %s records, %s bytes in %s new segment(s)", name,
                      landing.get("records"), landing.get("bytes"), landing.get("files"))
        return jsonable(result)
