"""``LakehouseHook``: the deployment's :class:`~ticdc_lakehouse.runtime.config.Settings` as Airflow sees them, and the
reads every lakehouse task shares (a changefeed's name, a table's cut, Kafka lag).

Why a hook: Airflow keeps secrets in connections (or a secrets backend), the project keeps them in the
environment. ``LakehouseHook`` turns the optional connections into the same ``LAKEHOUSE_*`` environment overrides
``load_settings`` already understands, so there is one way to resolve settings, the CLI and the DAGs agree, and a
spark-submit job receives the very same overrides through its environment (never on its command line).

Connections (all optional; without them the environment and the TOML file are used as they are):

``lakehouse_default`` -- the Iceberg catalog. ``postgres`` type: host/port/schema give
    ``jdbc:postgresql://host:port/schema``; login/password the catalog user/password. Extra (JSON) may set
    ``catalog_uri``, ``warehouse``, ``landing``, ``home``, ``config_file``, ``spark_master`` and any
    ``LAKEHOUSE_...`` variable verbatim.
``lakehouse_kafka_<changefeed>`` -- the changefeed's Kafka: host[:port] the bootstrap servers, login/password
    ``sasl.username``/``sasl.password``, extra = more librdkafka settings (``security.protocol``, ...).
``lakehouse_schema_registry_<changefeed>`` -- its schema registry: host (a URL, or host + port), login/password
    basic auth; extra = more ``SchemaRegistryClient`` settings.

Every secret value is registered with Airflow's log masker before it is used; the hook logs only the masked
config.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

#: ``lakehouse_default`` extra keys -> the environment variable ``load_settings`` reads
EXTRA_TO_ENV = {
    "catalog_uri": "LAKEHOUSE_CATALOG_URI",
    "warehouse": "LAKEHOUSE_WAREHOUSE",
    "landing": "LAKEHOUSE_LANDING",
    "home": "LAKEHOUSE_HOME",
    "config_file": "LAKEHOUSE_CONFIG",
    "spark_master": "LAKEHOUSE_SPARK_MASTER",
}


def kafka_conn_id(changefeed: str) -> str:
    return f"lakehouse_kafka_{changefeed}"


def schema_registry_conn_id(changefeed: str) -> str:
    return f"lakehouse_schema_registry_{changefeed}"


def _changefeed_var(changefeed: str, *path: str) -> str:
    """``LAKEHOUSE__CHANGEFEEDS__<cf>__...``: config._apply_env lower-cases each part, keys keep their dots."""
    return "__".join(("LAKEHOUSE", "CHANGEFEEDS", changefeed, *path))


def catalog_overrides(conn: Any) -> dict[str, str]:
    """Environment overrides from the ``lakehouse_default`` connection (pure: takes any Connection-like object)."""
    env: dict[str, str] = {}
    conn_type = (conn.conn_type or "").lower()
    if conn_type in ("postgres", "postgresql") and conn.host:
        port = f":{conn.port}" if conn.port else ""
        env["LAKEHOUSE_CATALOG_URI"] = f"jdbc:postgresql://{conn.host}{port}/{conn.schema or ''}"
    if conn.login:
        env["LAKEHOUSE_CATALOG_USER"] = conn.login
    if conn.password:
        env["LAKEHOUSE_CATALOG_PASSWORD"] = conn.password
    for key, value in (conn.extra_dejson or {}).items():
        if key in EXTRA_TO_ENV:
            env[EXTRA_TO_ENV[key]] = str(value)
        elif key.upper().startswith("LAKEHOUSE"):
            env[key] = str(value)
    return env


def kafka_overrides(changefeed: str, conn: Any) -> dict[str, str]:
    """Environment overrides from ``lakehouse_kafka_<changefeed>``."""
    env: dict[str, str] = {}
    if conn.host:
        servers = conn.host if conn.port is None or "," in conn.host else f"{conn.host}:{conn.port}"
        env[_changefeed_var(changefeed, "BOOTSTRAP_SERVERS")] = servers
    if conn.login:
        env[_changefeed_var(changefeed, "KAFKA", "sasl.username")] = conn.login
    if conn.password:
        env[_changefeed_var(changefeed, "KAFKA", "sasl.password")] = conn.password
    for key, value in (conn.extra_dejson or {}).items():
        env[_changefeed_var(changefeed, "KAFKA", key)] = str(value)
    return env


def schema_registry_overrides(changefeed: str, conn: Any) -> dict[str, str]:
    """Environment overrides from ``lakehouse_schema_registry_<changefeed>``."""
    env: dict[str, str] = {}
    if conn.host:
        url = conn.host if "://" in conn.host else f"{conn.schema or 'http'}://{conn.host}"
        if conn.port and "://" not in conn.host:
            url += f":{conn.port}"
        env[_changefeed_var(changefeed, "SCHEMA_REGISTRY_URL")] = url
    if conn.login:
        env[_changefeed_var(changefeed, "SCHEMA_REGISTRY", "basic.auth.credentials.source")] = "USER_INFO"
        env[_changefeed_var(changefeed, "SCHEMA_REGISTRY", "basic.auth.user.info")] = (
            f"{conn.login}:{conn.password or ''}"
        )
    for key, value in (conn.extra_dejson or {}).items():
        env[_changefeed_var(changefeed, "SCHEMA_REGISTRY", key)] = str(value)
    return env


def _mask(value: str) -> None:
    """Register a secret with Airflow's log masker (a no-op outside a task)."""
    if not value:
        return
    try:
        from airflow.sdk.log import mask_secret

        mask_secret(value)
    except Exception:  # noqa: BLE001 - masking is best effort, never a reason to fail a task
        pass


class LakehouseHook(BaseHook):
    """Resolves the deployment's Settings (defaults, TOML, environment, then Airflow connections) and reads what
    the lakehouse tasks share: which changefeed a task means, a lake table's cut, a changefeed's Kafka lag.

    :param lakehouse_conn_id: the Airflow connection with the catalog settings (optional; ``lakehouse_default``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param environ: the environment to resolve against (default: ``os.environ``)
    """

    conn_name_attr = "lakehouse_conn_id"
    default_conn_name = "lakehouse_default"
    conn_type = "lakehouse"
    hook_name = "TiCDC Lakehouse"

    def __init__(self, lakehouse_conn_id: str = default_conn_name, config_file: Optional[str] = None,
                 environ: Optional[Mapping[str, str]] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file
        self.environ = environ

    def _optional_connection(self, conn_id: str):
        try:
            return self.get_connection(conn_id)
        except AirflowNotFoundException:
            return None

    def env_overrides(self, changefeed: Optional[str] = None) -> dict[str, str]:
        """``LAKEHOUSE_*`` variables derived from the connections that exist (secrets included: don't log)."""
        env: dict[str, str] = {}
        conn = self._optional_connection(self.lakehouse_conn_id)
        if conn is not None:
            env.update(catalog_overrides(conn))
        if changefeed:
            conn = self._optional_connection(kafka_conn_id(changefeed))
            if conn is not None:
                env.update(kafka_overrides(changefeed, conn))
            conn = self._optional_connection(schema_registry_conn_id(changefeed))
            if conn is not None:
                env.update(schema_registry_overrides(changefeed, conn))
        from ticdc_lakehouse.core.redaction import is_secret_key

        for key, value in env.items():
            if is_secret_key(key):
                _mask(value)
        return env

    def get_settings(self, changefeed: Optional[str] = None):
        """The Settings a task of ``changefeed`` works with; secrets are registered with the log masker."""
        from ticdc_lakehouse.runtime.config import load_settings

        base = os.environ if self.environ is None else self.environ
        settings = load_settings(self.config_file, env={**base, **self.env_overrides(changefeed)})
        _mask(settings.catalog_password)
        for cf in settings.changefeeds.values():
            for mapping in (cf.kafka, cf.schema_registry):
                for key, value in mapping.items():
                    if _is_secret(key):
                        _mask(str(value))
        self.log.debug("lakehouse settings: %s", settings.masked())
        return settings

    def get_conn(self):
        """The Settings (a hook's connection object): see :meth:`get_settings`."""
        return self.get_settings()

    def resolve(self, changefeed: Optional[str] = None) -> tuple[Any, str]:
        """(Settings, the changefeed's name): ``changefeed`` may be a rendered template, ``None`` or ``"None"``
        (then the only or first configured changefeed)."""
        wanted = text_or_none(changefeed)
        settings = self.get_settings(wanted)
        return settings, settings.changefeed(wanted).name

    def table_watermark(self, table: str) -> int:
        """The cut of lake table ``namespace.table``: see :func:`table_watermark`."""
        return table_watermark(self.get_settings(), table)

    def kafka_lag(self, changefeed: Optional[str] = None, timeout_s: float = 10.0) -> dict[str, Any]:
        """``{"changefeed", "lag", "partitions": {"topic/partition": records not landed}}`` (see :func:`kafka_lag`)."""
        settings, name = self.resolve(changefeed)
        partitions = kafka_lag(settings.changefeed(name), settings.landing_path, timeout_s)
        return {"changefeed": name, "lag": sum(partitions.values()), "partitions": partitions}


def text_or_none(value: Any) -> Optional[str]:
    """A rendered template as a string; ``None`` for nothing (native rendering turns ``"123"`` into an int and
    non-native rendering turns ``None`` into ``"None"``)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    return str(value)


def table_watermark(settings, table: str) -> int:
    """The greatest upstream commit ts (TSO) applied to lake table ``namespace.table`` (0: none yet).

    Read with pyiceberg from the catalog both share, no Spark; maintenance snapshots carry no watermark, so the
    ancestry is walked back to the newest snapshot that has one (as ``iceberg.java_api.watermark_of`` does in
    the JVM)."""
    from ticdc_lakehouse.iceberg.java_api import RESOLVED_TS_PROPERTY
    from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog

    metadata = pyiceberg_catalog(settings).load_table(table).metadata
    snapshot = metadata.current_snapshot()
    while snapshot is not None:
        value = snapshot.summary.get(RESOLVED_TS_PROPERTY) if snapshot.summary is not None else None
        if value:
            return int(value)
        snapshot = (metadata.snapshot_by_id(snapshot.parent_snapshot_id)
                    if snapshot.parent_snapshot_id is not None else None)
    return 0


def kafka_lag(changefeed, landing_root, timeout_s: float = 10.0,
              topics: Optional[Sequence[str]] = None) -> dict[str, int]:
    """``"topic/partition" -> records in Kafka not landed yet`` for the changefeed's topics, computed as the
    landing does: Kafka's high watermark minus the landed end (or the low watermark when nothing landed)."""
    from confluent_kafka import Consumer, TopicPartition

    from ticdc_lakehouse.landing.kafka_source import ClientLog, consumer_config, plan_partition
    from ticdc_lakehouse.landing.segments import landed_end

    config = consumer_config(changefeed)
    config["logger"] = ClientLog()  # a down broker: not a thousand librdkafka lines in the task log
    consumer = Consumer(config)
    try:
        lag: dict[str, int] = {}
        for topic in topics or changefeed.topics:
            info = consumer.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise RuntimeError(f"topic {topic!r} of changefeed {changefeed.name!r} is not available: "
                                   f"{info.error if info is not None and info.error else 'no partitions'}")
            for partition in sorted(info.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s,
                                                           cached=False)
                plan = plan_partition(topic, partition, low, high,
                                      landed_end(landing_root, changefeed.name, topic, partition))
                lag[f"{topic}/{partition}"] = max(plan.high - plan.start, 0)
        return lag
    finally:
        consumer.close()


def _is_secret(key: str) -> bool:
    from ticdc_lakehouse.core.redaction import is_secret_key

    return is_secret_key(key)
