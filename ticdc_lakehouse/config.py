"""Configuration: one TOML file, embedded defaults, environment overrides.

Everything local lives under ``LAKEHOUSE_HOME`` (default ``./.lakehouse``): the warehouse, the SQLite catalog, the
landing zone and the Airflow home, so two deployments never share state and deleting one is ``rm -r``.

Precedence, lowest first: embedded defaults, ``conf/lakehouse.toml`` (or the file named by ``LAKEHOUSE_CONFIG``),
then environment variables ``LAKEHOUSE__<SECTION>__<KEY>`` (for example ``LAKEHOUSE__CATALOG__URI``) and the
short forms listed in ``ENV_SHORTCUTS``. Secrets (passwords, SASL, registry credentials) are read from the
environment only and are masked whenever a config is printed.
"""

from __future__ import annotations

import copy
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ticdc_lakehouse.decode.large_messages import LargeMessageOptions

if TYPE_CHECKING:
    from ticdc_lakehouse.landing.storage import Location

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_FILE = PROJECT_ROOT / "conf" / "lakehouse.toml"

DEFAULTS: dict[str, Any] = {
    "catalog": {"name": "lake", "uri": "", "user": "", "password": "", "warehouse": ""},
    # accept_data_loss: offsets Kafka deleted before they landed are recorded (status shows them) and landing
    # goes on past them; false (the default) stops those partitions there and the run exits non-zero
    "landing": {"path": "", "accept_data_loss": False},
    # files and directories the lakehouse creates (landing zone, warehouse, SQLite catalog) get at most the
    # permissions this umask leaves, added to the process's own umask: "077" owner-only, "027" group-readable
    "storage": {"umask": "077"},
    # the S3 API of an s3:// warehouse (object_storage.py); credentials from the AWS SDK chain (AWS_* env)
    "s3": {"endpoint": "", "path_style_access": False, "region": "", "checksums": "when_supported"},
    "spark": {
        "master": "local[*]",
        "app_name": "ticdc-lakehouse",
        "driver_memory": "2g",
        "executor_memory": "2g",
        "shuffle_partitions": 4,
        "conf": {},
        "submit": "in-process",  # or "spark-submit" (Airflow SparkSubmitOperator to spark.master)
        "class_archive": True,  # map the driver JVM's class archive built by setup (see jvm_archive)
        # extra driver JVM options; the default lets C2 compile only really hot code (see spark_session)
        "driver_java_options": "-XX:Tier4InvocationThreshold=50000 -XX:Tier4CompileThreshold=60000 "
                               "-XX:Tier4BackEdgeThreshold=400000",
    },
    "merge": {
        "write_mode": "merge-on-read",  # per table override in [tables."schema.table"]
        "bucket_count": 16,
        "lock_timeout_seconds": 0,
        "parallel_tables": 4,  # tables applied at once in the final flush of a run (1: one after the other)
        "target_file_size_bytes": 134217728,
        # a message that cannot be decoded: "dead-letter" (record it, go on) or "hold" (stop its partition there
        # until it decodes or an operator skips it: nothing is applied out of order or lost)
        "on_undecodable": "dead-letter",
    },
    "maintenance": {"retain_cuts_days": 7, "retain_last_cuts": 10, "orphan_older_than_hours": 24, "schedule": "@daily",
                    # landed segments every merge is past are deleted once older than this (0: kept forever)
                    "landing_retention_hours": 0},
    "airflow": {
        "schedule": "*/10 * * * *",
        "retries": 3,
        "retry_delay_seconds": 60,
        "max_retry_delay_seconds": 3600,
        "merge_pools": True,  # merges of one changefeed also queue in an Airflow pool with one slot
    },
    "changefeeds": {},
    "tables": {},
}

DEFAULT_CHANGEFEED: dict[str, Any] = {
    "protocol": "open",
    "topics": [],
    "bootstrap_servers": "localhost:9092",
    "schema_registry_url": "",
    "kafka": {},  # extra confluent-kafka consumer settings (security.protocol, sasl.mechanism, ...)
    "schema_registry": {},  # extra SchemaRegistryClient settings
    "consumer_group": "",
    # "auto": protocols that carry resolved events wait for them; Confluent Avro (no watermark by default) does not.
    # "none": apply everything landed, each key in commit-ts order (Avro/Canal-JSON without the TiDB extension).
    "resolved_ts": "auto",
    # TiCDC's large-message handling, as set on the changefeed's sink (see decode/large_messages.py):
    # "none" | "snappy" | "lz4" (large-message-handle-compression)
    "large_message_compression": "none",
    # where claim-check files are (claim-check-storage-uri): file:///dir, s3://bucket/prefix?endpoint=..., gs://...
    "claim_check_storage_uri": "",
    "claim_check_raw_value": False,  # Canal-JSON's claim-check-raw-value
}

#: short environment variable names for the settings people change most
ENV_SHORTCUTS: dict[str, tuple[str, ...]] = {
    "LAKEHOUSE_CATALOG_URI": ("catalog", "uri"),
    "LAKEHOUSE_CATALOG_USER": ("catalog", "user"),
    "LAKEHOUSE_CATALOG_PASSWORD": ("catalog", "password"),
    "LAKEHOUSE_WAREHOUSE": ("catalog", "warehouse"),
    "LAKEHOUSE_LANDING": ("landing", "path"),
    "LAKEHOUSE_SPARK_MASTER": ("spark", "master"),
}

#: sections and keys whose members are free-form (passed on to Spark / confluent-kafka / the registry client)
FREE_FORM = {("spark", "conf"), ("changefeeds", "*", "kafka"), ("changefeeds", "*", "schema_registry")}
#: keys a ``[tables."schema.table"]`` section may set (besides every ``[merge]`` key, its fallback)
TABLE_KEYS = ("write_mode", "bucket_count")


class ConfigError(ValueError):
    """The configuration names a key the product does not know (a typo would otherwise be ignored silently)."""


SECRET_WORDS = ("password", "secret", "sasl", "token", "credential", "user.info", "basic.auth")


@dataclass(frozen=True)
class ChangefeedConfig:
    name: str
    protocol: str
    topics: tuple[str, ...]
    bootstrap_servers: str
    schema_registry_url: str
    kafka: Mapping[str, Any]
    schema_registry: Mapping[str, Any]
    consumer_group: str
    resolved_ts: str = "auto"
    large_messages: LargeMessageOptions = field(default_factory=LargeMessageOptions)

    @property
    def group_id(self) -> str:
        return self.consumer_group or f"ticdc-lakehouse-{self.name}"


@dataclass(frozen=True)
class Settings:
    """The resolved configuration of one deployment."""

    home: Path
    raw: Mapping[str, Any]
    source_file: Optional[Path] = None
    changefeeds: Mapping[str, ChangefeedConfig] = field(default_factory=dict)

    @property
    def catalog_name(self) -> str:
        return self.raw["catalog"]["name"]

    @property
    def catalog_uri(self) -> str:
        return self.raw["catalog"]["uri"] or f"jdbc:sqlite:{self.home / 'catalog.db'}"

    @property
    def catalog_user(self) -> str:
        return self.raw["catalog"]["user"]

    @property
    def catalog_password(self) -> str:
        return self.raw["catalog"]["password"]

    @property
    def warehouse(self) -> str:
        return self.raw["catalog"]["warehouse"] or str(self.home / "warehouse")

    @property
    def landing_path(self) -> "Location":
        """A local path, or an ``ObjectPath`` for ``s3://bucket/prefix`` (with the ``[s3]`` settings)."""
        from ticdc_lakehouse.landing.storage import landing_location  # here: landing imports this module

        return landing_location(str(self.raw["landing"]["path"] or self.home / "landing"), self.raw, self.home)

    @property
    def spark(self) -> Mapping[str, Any]:
        return self.raw["spark"]

    @property
    def merge(self) -> Mapping[str, Any]:
        return self.raw["merge"]

    def table_layout(self, schema: str, table: str) -> tuple[str, int]:
        """The write mode and bucket count a lake table is created with (``[tables."schema.table"]`` or
        ``[merge]``)."""
        return (str(self.table_option(schema, table, "write_mode", "merge-on-read")),
                int(self.table_option(schema, table, "bucket_count", 16)))

    def table_option(self, schema: str, table: str, key: str, default: Any = None) -> Any:
        """A per-table setting from ``[tables."schema.table"]``, else ``[merge]``, else ``default``."""
        per_table = self.raw.get("tables", {}).get(f"{schema}.{table}", {})
        if key in per_table:
            return per_table[key]
        return self.raw["merge"].get(key, default)

    def changefeed(self, name: Optional[str] = None) -> ChangefeedConfig:
        """The named changefeed, or the only/first one; ``default`` (Open Protocol) when none is configured."""
        if name is None:
            if self.changefeeds:
                return next(iter(self.changefeeds.values()))
            name = "default"
        if name in self.changefeeds:
            return self.changefeeds[name]
        return _changefeed(name, {})

    def masked(self) -> dict[str, Any]:
        """The raw config with every secret replaced by ``***``: safe to print or log."""
        return mask_secrets(self.raw)


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _coerce(text: str, like: Any) -> Any:
    if isinstance(like, bool):
        return text.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(like, int):
        return int(text)
    if isinstance(like, (list, tuple)):
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


#: a level whose keys are names the user chooses (changefeeds, tables); the level below them is checked
NAMES = ("changefeeds", "tables")


def _valid_keys(path: tuple[str, ...]) -> Optional[list[str]]:
    """The keys allowed under ``path``; None where any key is (free-form sections, changefeed/table names)."""
    if not path:
        return list(DEFAULTS)
    generic = tuple("*" if i == 1 and path[0] in NAMES else p for i, p in enumerate(path))
    if generic in FREE_FORM or path in ((name,) for name in NAMES):
        return None
    if path[0] == "changefeeds" and len(path) == 2:
        return list(DEFAULT_CHANGEFEED)
    if path[0] == "tables" and len(path) == 2:
        return list(dict.fromkeys([*TABLE_KEYS, *DEFAULTS["merge"]]))
    if len(path) == 1 and isinstance(DEFAULTS.get(path[0]), dict):
        return list(DEFAULTS[path[0]])
    return []  # below a plain value: nothing


def unknown_key(path: tuple[str, ...]) -> Optional[str]:
    """Why the dotted key ``path`` is not a setting (naming the closest valid key, by difflib), or None."""
    import difflib

    for depth in range(len(path)):
        valid = _valid_keys(path[:depth])
        if valid is None:
            if path[:depth] in ((name,) for name in NAMES):
                continue  # a changefeed's or table's name: any
            return None
        if path[depth] not in valid:
            if not valid:
                return f"{'.'.join(path[:depth])} is a value, it has no key {path[depth]!r}"
            section = ".".join(f'"{p}"' if "." in p else p for p in path[:depth])
            where = f"section [{section}]" if depth else "the top level (sections)"
            close = difflib.get_close_matches(path[depth], valid, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(sorted(valid))}"
            return f"unknown key {path[depth]!r} in {where}: {hint}"
    return None


def _tree_keys(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every leaf key path of a parsed TOML document (a table's own path when it is empty)."""
    paths: list[tuple[str, ...]] = []
    for key, value in tree.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            paths += _tree_keys(value, path)
        else:
            paths.append(path)
    return paths


def check_keys(tree: Mapping[str, Any], source: str) -> None:
    """Raise :class:`ConfigError` for the first key of ``tree`` (read from ``source``) that is no setting."""
    for path in _tree_keys(tree):
        problem = unknown_key(path)
        if problem:
            raise ConfigError(f"{source}: {problem}")


def _env_path(var: str) -> list[str]:
    return [part.lower() for part in var[len("LAKEHOUSE__"):].split("__") if part]


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    for var, path in ENV_SHORTCUTS.items():
        if env.get(var):
            raw[path[0]][path[1]] = env[var]
    for var, text in env.items():
        if not var.startswith("LAKEHOUSE__"):
            continue
        path = _env_path(var)
        if not path:
            continue
        problem = unknown_key(tuple(path))
        if problem:
            raise ConfigError(f"environment variable {var}: {problem}")
        node = raw
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _coerce(text, node.get(path[-1], ""))


def _expand_env(value: Any, env: Mapping[str, str]) -> Any:
    """``"${KAFKA_SASL_PASSWORD}"`` in the config file is read from the environment, so secrets stay out of files."""
    import re

    if isinstance(value, dict):
        return {k: _expand_env(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, env) for v in value]
    if isinstance(value, str) and "${" in value:
        def lookup(match: "re.Match[str]") -> str:
            name = match.group(1)
            if name not in env:
                raise KeyError(f"config refers to ${{{name}}} but the environment does not set it")
            return env[name]

        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lookup, value)
    return value


def _changefeed(name: str, values: Mapping[str, Any]) -> ChangefeedConfig:
    merged = _deep_merge(copy.deepcopy(DEFAULT_CHANGEFEED), values)
    topics = merged["topics"] or [f"ticdc-{name}"]
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    return ChangefeedConfig(
        name=name,
        protocol=merged["protocol"],
        topics=tuple(topics),
        bootstrap_servers=merged["bootstrap_servers"],
        schema_registry_url=merged["schema_registry_url"],
        kafka=dict(merged["kafka"]),
        schema_registry=dict(merged["schema_registry"]),
        consumer_group=merged["consumer_group"],
        resolved_ts=merged["resolved_ts"],
        large_messages=_large_messages(name, merged),
    )


def _large_messages(name: str, merged: Mapping[str, Any]) -> LargeMessageOptions:
    raw_value = merged["claim_check_raw_value"]
    if isinstance(raw_value, str):
        raw_value = _coerce(raw_value, False)
    try:
        return LargeMessageOptions(compression=str(merged["large_message_compression"] or "none").lower(),
                                   claim_check_storage_uri=str(merged["claim_check_storage_uri"] or ""),
                                   claim_check_raw_value=bool(raw_value))
    except ValueError as exc:
        raise ValueError(f"changefeed {name!r}: {exc}") from None


def load_settings(config_file: Optional[str | Path] = None, env: Optional[Mapping[str, str]] = None) -> Settings:
    """Resolve the deployment's settings from defaults, the config file and the environment."""
    env = os.environ if env is None else env
    home = Path(env.get("LAKEHOUSE_HOME") or "./.lakehouse").expanduser().resolve()
    raw = copy.deepcopy(DEFAULTS)
    path = Path(config_file or env.get("LAKEHOUSE_CONFIG") or DEFAULT_CONFIG_FILE)
    source: Optional[Path] = None
    if path.is_file():
        with path.open("rb") as handle:
            document = tomllib.load(handle)
        check_keys(document, f"config file {path}")
        _deep_merge(raw, _expand_env(document, env))
        source = path
    elif config_file or env.get("LAKEHOUSE_CONFIG"):
        raise FileNotFoundError(f"config file {path} does not exist")
    _apply_env(raw, env)
    changefeeds = {name: _changefeed(name, values) for name, values in raw.get("changefeeds", {}).items()}
    return Settings(home=home, raw=raw, source_file=source, changefeeds=changefeeds)


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def mask_secrets(value: Any, key: str = "") -> Any:
    """Replace every secret-looking value (by key name, or a password inside a URI) with ``***``."""
    if isinstance(value, Mapping):
        return {k: mask_secrets(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_secrets(v, key) for v in value]
    if key and is_secret_key(key) and value not in ("", None):
        return "***"
    if isinstance(value, str):
        return mask_uri_password(value)
    return value


def mask_uri_password(text: str) -> str:
    """``postgresql://u:pw@h/db`` -> ``postgresql://u:***@h/db``; also query parameters whose name says secret
    (``password=``, ``secret-access-key=``, ``access-key=``, ``session-token=`` ...: TiCDC's S3 URIs carry them)."""
    import re

    text = re.sub(r"(://[^:/@\s]+:)[^@\s]+(@)", r"\1***\2", text)
    return re.sub(r"((?:^|[?&;])[\w.-]*(?:password|secret|token|access[-_]key|credential)[\w.-]*=)[^&;\s]+",
                  r"\1***", text, flags=re.IGNORECASE)
