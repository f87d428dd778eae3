"""``LandArchiveOperator``: land an archived topic (a directory of Kafka log segments), the backfill's first step."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from airflow.sdk.exceptions import AirflowFailException

from lakehouse_airflow.hooks.lakehouse import text_or_none
from lakehouse_airflow.operators.base import LakehouseBaseOperator, jsonable


class LandArchiveOperator(LakehouseBaseOperator):
    """Land an archived topic (a directory of Kafka log segments) for a changefeed: the backfill's first step.

    A corrupt batch lands everything readable before it and then fails this task without retries; the backfill
    DAG still merges what landed (its merge runs with ``trigger_rule="all_done"``) and the run ends failed.

    :param archive: the archive directory, ``<topic>-<partition>/<offset>.log`` files (templated)
    :param changefeed: the changefeed to land into (templated; default: the only or first configured one)
    :param topics: land only these topics of the archive (templated; default: all of them)
    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    """

    template_fields: Sequence[str] = ("archive", "changefeed", "topics")
    ui_color = "#e8f4fd"

    def __init__(self, *, archive: str, topics: Optional[Sequence[str]] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.archive = archive
        self.topics = topics

    def execute(self, context) -> dict[str, Any]:
        from ticdc_lakehouse.landing import land_from_archive
        from ticdc_lakehouse.landing.errors import ArchiveCorruptError

        from lakehouse_airflow.lineage import archive_topics

        archive = text_or_none(self.archive)
        if archive is None or not Path(archive).is_dir():
            raise AirflowFailException(f"archive directory {self.archive!r} does not exist")
        settings, name = self.resolve()
        try:
            report = land_from_archive(Path(archive), settings.landing_path, name,
                                       topics=list(self.topics) if self.topics else None,
                                       progress=_landing_progress(self.log.info))
        except ArchiveCorruptError as exc:
            landed = getattr(exc, "report", None)
            if landed is not None:
                self.log.error("landed before the corrupt batch: %s", landed.summary())
            raise AirflowFailException(f"archive {self.archive}: {exc}") from exc
        self.log.info(report.summary())
        self._lineage = (settings, name, list(self.topics) if self.topics else archive_topics(archive), [], True)
        return jsonable({"ok": True, "changefeed": name, "landing": report.to_dict()})


def _landing_progress(say):
    def notify(item) -> None:
        say(f"landed {item.topic}[{item.partition}] offsets {item.start}..{item.end}: {item.records} records")

    return notify
