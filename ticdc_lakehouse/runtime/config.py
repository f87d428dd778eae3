"""Configuration: one TOML file, embedded defaults, environment overrides.

Everything local lives under ``LAKEHOUSE_HOME`` (default ``./.lakehouse``): the warehouse, the SQLite catalog, the
landing zone and the Airflow home, so two deployments never share state and deleting one is ``rm -r``.

Precedence, lowest first: embedded defaults, ``conf/lakehouse.toml`` (or the file named by ``LAKEHOUSE_CONFIG``),
then environment variables ``LAKEHOUSE__<SECTION>__<KEY>`` (for example ``LAKEHOUSE__CATALOG__URI``) and the
short forms listed in ``ENV_SHORTCUTS``. Each ``[section]`` is a frozen dataclass below owning its keys, defaults and
checks (``Settings.merge.target_file_size_bytes``); a key no section has is an error naming the closest one. Secrets (passwords, SASL, registry credentials) are read from the
environment only and are masked whenever a config is printed.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, get_type_hints

from ticdc_lakehouse import PROJECT_ROOT
from ticdc_lakehouse.decode.large_messages import LargeMessageOptions
from ticdc_lakehouse.core.redaction import mask_secrets

if TYPE_CHECKING:
    from ticdc_lakehouse.landing.storage import Location

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_CONFIG_FILE = PROJECT_ROOT / "conf" / "lakehouse.toml"

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


class ConfigError(ValueError):
    """The configuration names a key the product does not know (a typo would otherwise be ignored silently), or
    gives a key a value of the wrong kind."""


def _flag(value: Any) -> bool:
    """A boolean setting as TOML (a bool) or the environment (a word) gives it; ``ValueError`` for a word that is
    neither (a typo such as "ture" must not read as false)."""
    if not isinstance(value, str):
        return bool(value)
    word = value.strip().lower()
    if word not in TRUE_WORDS + FALSE_WORDS:
        raise ValueError(f"{value!r} is not true or false ({', '.join(TRUE_WORDS)} / {', '.join(FALSE_WORDS[:-1])})")
    return word in TRUE_WORDS


def _convert(value: Any, kind: Any, key: str) -> Any:
    """``value`` as TOML or the environment gave it, as the setting's type; a value of another kind fails naming
    ``key`` (``section.key``): a TOML ``true`` is no number of seconds, and 2.5 no count to round down silently."""
    if kind is bool:
        if not isinstance(value, (bool, str)):
            raise ConfigError(f"{key}: {value!r} is not true or false")
        try:
            return _flag(value)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    if kind in (int, float):
        if isinstance(value, str):
            value = value.strip()
            if kind is float and not value:
                return 0.0  # an empty environment variable: the setting's zero, as before
        refused = ConfigError(f"{key}: {value!r} is not {'a whole number' if kind is int else 'a number'}")
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise refused
        try:
            return float(value) if kind is float else _whole(value)
        except ValueError:
            raise refused from None
    if kind is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{key}: expected a string, not {value!r}")
        return str(value)
    return value  # mappings (free-form sections) as given


def _whole(value: Any) -> int:
    """An integer setting's value: a whole number (TOML 3, 3.0 or "3"), never a fraction rounded down."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)  # exactly, however many digits (a TSO has 18)
        except ValueError:
            pass
    number = float(value)
    if not number.is_integer():
        raise ValueError(value)
    return int(number)


class Section:
    """One ``[section]`` of the configuration: a frozen dataclass whose fields are its keys and their defaults.

    ``from_values`` converts what TOML or the environment gave to each field's type and checks it (``check``), so
    a use site reads a typed attribute and repeats no default and no check."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any], name: str = "") -> Any:
        """The section from its raw ``values``; ``name`` (``merge``, ``tables."app.t"``) names a bad value's key."""
        types = get_type_hints(cls)
        prefix = f"{name}." if name else ""
        section = cls(**{item.name: _convert(values[item.name], types[item.name], prefix + item.name)
                         for item in fields(cls) if item.name in values})
        section.check()
        return section

    def check(self) -> None:
        """Raise ``ValueError`` (one line, naming the key) for a value the product cannot run with."""


@dataclass(frozen=True)
class CatalogSection(Section):
    name: str = "lake"
    uri: str = ""  # default: jdbc:sqlite under LAKEHOUSE_HOME (Settings.catalog_uri)
    user: str = ""
    password: str = ""
    warehouse: str = ""  # default: LAKEHOUSE_HOME/warehouse (Settings.warehouse)


@dataclass(frozen=True)
class LandingSection(Section):
    path: str = ""  # default: LAKEHOUSE_HOME/landing (Settings.landing_path)
    #: offsets Kafka deleted before they landed are recorded (status shows them) and landing goes on past them;
    #: false (the default) stops those partitions there and the run exits non-zero
    accept_data_loss: bool = False
    #: how long landing from Kafka waits on a broker (a metadata or offsets request, or a partition making no
    #: progress) before it fails naming the cause; brokers restarting take tens of seconds
    kafka_timeout_seconds: float = 60.0

    @property
    def kafka_timeout_s(self) -> float:
        """``kafka_timeout_seconds``, checked where it is read (a wrong value fails the landing, not every
        command)."""
        if not self.kafka_timeout_seconds > 0:
            raise ValueError(f"landing.kafka_timeout_seconds must be a number of seconds above 0, not "
                             f"{self.kafka_timeout_seconds!r}")
        return float(self.kafka_timeout_seconds)


@dataclass(frozen=True)
class StorageSection(Section):
    #: files and directories the lakehouse creates (landing zone, warehouse, SQLite catalog) get at most the
    #: permissions this umask leaves, added to the process's own umask: "077" owner-only, "027" group-readable
    umask: str = "077"

    @property
    def umask_bits(self) -> int:
        """``umask`` as a number ("077" -> 0o077)."""
        text = self.umask.strip() or "0"
        try:
            value = int(text, 8)
        except ValueError:
            raise ValueError(f"storage.umask must be an octal umask like \"077\" or \"027\", not {text!r}") from None
        if not 0 <= value <= 0o777:
            raise ValueError(f"storage.umask {text!r} is out of range (000-777)")
        return value


@dataclass(frozen=True)
class S3Section(Section):
    """The S3 API of an s3:// warehouse or landing zone (object_storage.py); credentials from the AWS SDK chain."""

    endpoint: str = ""
    path_style_access: bool = False
    region: str = ""
    checksums: str = "when_supported"


@dataclass(frozen=True)
class SparkSection(Section):
    master: str = "local[*]"
    app_name: str = "ticdc-lakehouse"
    driver_memory: str = "2g"
    executor_memory: str = "2g"
    shuffle_partitions: int = 4
    conf: Mapping[str, Any] = field(default_factory=dict)  # free-form: passed on to Spark as given
    submit: str = "in-process"  # or "spark-submit" (Airflow SparkSubmitOperator to spark.master)
    class_archive: bool = True  # map the driver JVM's class archive built by setup (see jvm_archive)
    kept_driver_command: bool = True  # start the driver from its kept command, not spark-submit (driver_launch)
    #: extra driver JVM options; the default compiles with C1 only (see spark_session), with the code cache the JVM
    #: reserves when C2 is on: C1 alone gets 48 MB, which a run of a few hundred tables' MERGEs filled, and then
    #: the JVM stopped compiling for the rest of the run; and collects with the parallel (throughput) collector
    driver_java_options: str = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseParallelGC"


#: what a message that cannot be decoded does: "dead-letter" (record it, go on) or "hold" (stop its partition
#: there until it decodes or an operator skips it: nothing is applied out of order or lost)
UNDECODABLE_MODES = ("dead-letter", "hold")


@dataclass(frozen=True)
class MergeSection(Section):
    """``[merge]``, and the fallback of every ``[tables."schema.table"]`` section."""

    write_mode: str = "merge-on-read"  # per table override in [tables."schema.table"]
    bucket_count: int = 16
    #: a table is partitioned by ``bucket_count`` buckets of its first key column once it holds (or a run brings
    #: it) at least this many rows; smaller ones stay unpartitioned: one file per write, not one per bucket (see
    #: ``iceberg.tables.buckets_for``; 0: every keyed table is bucketed when created)
    bucket_min_rows: int = 100_000
    lock_timeout_seconds: float = 0
    parallel_tables: int = 4  # tables applied at once in the final flush of a run (1: one after the other)
    #: tables holding fewer rows take a MERGE even where the staged way applies (see ``merge.flush``)
    staged_min_rows: int = 100_000
    #: tables holding at most this many rows are rewritten whole by the run's write jobs, not MERGEd one by one
    #: (see ``merge.batch_rewrite``; 0: never). Each rewrite's replaced files stay until their snapshots expire:
    #: the bound keeps that copy small
    rewrite_max_rows: int = 10_000
    target_file_size_bytes: int = 134217728
    on_undecodable: str = "dead-letter"  # one of UNDECODABLE_MODES
    #: where a run keeps its decoded events for its passes: "files" (Parquet files beside the landed segments,
    #: removed when the run ends; see ``merge.decoded_files``) or "cache" (Spark's cache in the executors)
    decoded_events: str = "files"

    @property
    def holding(self) -> bool:
        """An undecodable message or an invalid value halts its partition or table (``on_undecodable = "hold"``);
        checked where it is read, as before: a wrong mode fails the merge, not every command."""
        if self.on_undecodable not in UNDECODABLE_MODES:
            raise ValueError(f"merge.on_undecodable must be 'dead-letter' or 'hold', not {self.on_undecodable!r}")
        return self.on_undecodable == "hold"


@dataclass(frozen=True)
class MaintenanceSection(Section):
    retain_cuts_days: int = 7
    retain_last_cuts: int = 10
    orphan_older_than_hours: int = 24
    schedule: str = "@daily"
    #: landed segments every merge is past are deleted once older than this (0: kept forever)
    landing_retention_hours: float = 0


@dataclass(frozen=True)
class AirflowSection(Section):
    schedule: str = "*/10 * * * *"
    retries: int = 3
    retry_delay_seconds: float = 60
    max_retry_delay_seconds: float = 3600
    merge_pools: bool = True  # merges of one changefeed also queue in an Airflow pool with one slot


#: the typed sections by name, in the order a config file lists them
SECTIONS: dict[str, type[Section]] = {
    "catalog": CatalogSection,
    "landing": LandingSection,
    "storage": StorageSection,
    "s3": S3Section,
    "spark": SparkSection,
    "merge": MergeSection,
    "maintenance": MaintenanceSection,
    "airflow": AirflowSection,
}


def _defaults_of(section: type[Section]) -> dict[str, Any]:
    return {item.name: copy.deepcopy(getattr(section(), item.name)) for item in fields(section)}


#: the embedded defaults as one tree (what a config file can set), read off the section dataclasses
DEFAULTS: dict[str, Any] = {**{name: _defaults_of(cls) for name, cls in SECTIONS.items()},
                            "changefeeds": {}, "tables": {}}

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
    """The resolved configuration of one deployment: one typed section per ``[section]`` of the file.

    ``raw`` is the same configuration as a tree (defaults, file and environment merged): what ``masked()``
    prints and what the S3 helpers read."""

    home: Path
    raw: Mapping[str, Any]
    source_file: Optional[Path] = None
    changefeeds: Mapping[str, ChangefeedConfig] = field(default_factory=dict)
    catalog: CatalogSection = field(default_factory=CatalogSection)
    landing: LandingSection = field(default_factory=LandingSection)
    storage: StorageSection = field(default_factory=StorageSection)
    s3: S3Section = field(default_factory=S3Section)
    spark: SparkSection = field(default_factory=SparkSection)
    merge: MergeSection = field(default_factory=MergeSection)
    maintenance: MaintenanceSection = field(default_factory=MaintenanceSection)
    airflow: AirflowSection = field(default_factory=AirflowSection)
    #: ``[tables."schema.table"]``: the ``[merge]`` settings of one table, with that section's overrides
    tables: Mapping[str, MergeSection] = field(default_factory=dict)

    @property
    def catalog_name(self) -> str:
        return self.catalog.name

    @property
    def catalog_uri(self) -> str:
        return self.catalog.uri or f"jdbc:sqlite:{self.home / 'catalog.db'}"

    @property
    def catalog_user(self) -> str:
        return self.catalog.user

    @property
    def catalog_password(self) -> str:
        return self.catalog.password

    @property
    def warehouse(self) -> str:
        return self.catalog.warehouse or str(self.home / "warehouse")

    @property
    def landing_path(self) -> "Location":
        """A local path, or an ``ObjectPath`` for ``s3://bucket/prefix`` (with the ``[s3]`` settings)."""
        # here, not at the top: the landing package loads pyarrow, which readers of the configuration alone
        # (Airflow parsing DAG files, the CLI's start) should not pay for
        from ticdc_lakehouse.landing.storage import landing_location

        return landing_location(str(self.landing.path or self.home / "landing"), self.raw, self.home)

    def table_merge(self, schema: str, table: str) -> MergeSection:
        """The ``[merge]`` settings of one table: ``[tables."schema.table"]`` over ``[merge]``."""
        return self.tables.get(f"{schema}.{table}", self.merge)

    def table_layout(self, schema: str, table: str) -> tuple[str, int]:
        """The write mode and bucket count a lake table is created with (``[tables."schema.table"]`` or
        ``[merge]``)."""
        options = self.table_merge(schema, table)
        return options.write_mode, options.bucket_count

    def table_option(self, schema: str, table: str, key: str) -> Any:
        """A per-table setting from ``[tables."schema.table"]``, else ``[merge]``."""
        return getattr(self.table_merge(schema, table), key)

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
    """An environment variable's text as the kind of the setting's default; text that is no such value stays text
    for the section's conversion (``_convert``) to refuse naming the key."""
    if isinstance(like, bool):
        try:
            return _flag(text)
        except ValueError:
            return text
    if isinstance(like, int):
        try:
            return _whole(text)
        except ValueError:
            return text
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
    try:
        raw_value = _flag(merged["claim_check_raw_value"])
    except ValueError as exc:
        raise ConfigError(f"changefeeds.{name}.claim_check_raw_value: {exc}") from None
    try:
        return LargeMessageOptions(compression=str(merged["large_message_compression"] or "none").lower(),
                                   claim_check_storage_uri=str(merged["claim_check_storage_uri"] or ""),
                                   claim_check_raw_value=raw_value)
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
    changefeeds = {name: _changefeed(name, values) for name, values in raw["changefeeds"].items()}
    sections = {name: section.from_values(raw[name], name) for name, section in SECTIONS.items()}
    tables = {name: MergeSection.from_values({**raw["merge"], **values}, f'tables."{name}"')
              for name, values in raw["tables"].items()}
    return Settings(home=home, raw=raw, source_file=source, changefeeds=changefeeds, tables=tables, **sections)
