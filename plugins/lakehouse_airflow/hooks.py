"""Hooks: the deployment's :class:`~ticdc_lakehouse.config.Settings` as Airflow sees them, and spark-submit.

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
from typing import Any, Mapping, Optional

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
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
    """Resolves the deployment's Settings: defaults, TOML, environment, then Airflow connections."""

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
        from ticdc_lakehouse.redaction import is_secret_key

        for key, value in env.items():
            if is_secret_key(key):
                _mask(value)
        return env

    def get_settings(self, changefeed: Optional[str] = None):
        """The Settings a task of ``changefeed`` works with; secrets are registered with the log masker."""
        from ticdc_lakehouse.config import load_settings

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
        return self.get_settings()


def _is_secret(key: str) -> bool:
    from ticdc_lakehouse.redaction import is_secret_key

    return is_secret_key(key)


class LakehouseSparkSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` that submits to the lakehouse config's ``spark.master``.

    The provider takes the master from an Airflow connection (``spark_default``, else YARN); the lakehouse
    config is the single place the master is set, so it wins. The connection, when it exists, still contributes
    its extras (``deploy-mode``, ``spark-binary``, ...).
    """

    def __init__(self, *, master: str, **kwargs: Any) -> None:
        self._lakehouse_master = master
        super().__init__(**kwargs)

    def _resolve_connection(self) -> dict[str, Any]:
        data = super()._resolve_connection()
        data["master"] = self._lakehouse_master
        return data
