"""Iceberg's Java API reached through the Spark session's py4j gateway.

Why not SQL: a DDL must change the schema *and* record the commit ts it reached in one atomic commit, so a crash
between the two can never make a rerun apply the DDL twice or skip it. Iceberg transactions do exactly that
(``updateSchema`` + an empty append snapshot carrying ``tidb.resolved-ts``), and the empty snapshot also pins the
new schema for time travel. Spark SQL cannot express either.
"""

from __future__ import annotations

import json
import re
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

RESOLVED_TS_PROPERTY = "tidb.resolved-ts"

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


class JavaIceberg:
    """Thin typed wrapper over the JVM objects of one Spark session's Iceberg catalog."""

    def __init__(self, spark, catalog_name: str) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.gateway = spark.sparkContext._gateway
        self.catalog = spark._jsparkSession.sessionState().catalogManager().catalog(catalog_name).icebergCatalog()
        self._classes: dict[str, Any] = {}
        self._direct: Any = None  # a direct executor service (``in_calling_thread``)
        self.types = self.java("org.apache.iceberg.types.Types")
        # What ``resolve`` and ``listed`` ask over and over (a run resolves each table several times): namespaces
        # seen to exist, and each namespace's table names, listed once. Kept in step by this object's own creates,
        # drops and renames (a run holds its changefeed's lock); ``table_exists`` itself is never cached.
        self._lock = threading.Lock()
        self._namespaces: set[str] = set()
        self._table_names: dict[str, _TableNames] = {}
        self._namespace_objects: dict[str, Any] = {}
        self._identifiers: dict[tuple[str, str], Any] = {}
        # Tables created with ``staged=True`` whose create transaction is not committed yet: the transaction, the
        # summary of its first snapshot, and a lock that makes its one commit happen once (``create_table``).
        self._staged: dict[tuple[str, str], tuple[Any, dict[str, str], threading.Lock]] = {}

    def java(self, name: str):
        """A JVM class by its full name, looked up once: each step of a ``jvm.org.apache...`` path is a gateway
        round trip, and a run of hundreds of tables asked for the same few classes thousands of times."""
        found = self._classes.get(name)
        if found is None:
            found = self.jvm
            for part in name.split("."):
                found = getattr(found, part)
            self._classes[name] = found
        return found

    def in_calling_thread(self, update):
        """``update`` (an append) doing in the calling thread what it would hand to Iceberg's worker pool: reading
        its manifests' metadata for the manifest list, and merging manifests (``newAppend``).

        Why: Iceberg polls the worker pool's futures with a 10 ms sleep (``Tasks.waitFor``, seen in JFR's
        thread-sleep events), and a small table's commit waited for it each time; a run commits tables in parallel
        threads already. (The manifests of new files go through the pool whatever this says: ``file_appender``
        writes them itself.)"""
        if self._direct is None:
            self._direct = self.java(
                "org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors"
            ).newDirectExecutorService()
        return update.scanManifestsWith(self._direct)

    # -- identifiers -------------------------------------------------------------------------------------
    def namespace(self, name: str):
        cached = self._namespace_objects.get(name)
        if cached is None:  # immutable JVM values: built once (each is several gateway calls)
            names = self.gateway.new_array(self.java("java.lang.String"), 1)
            names[0] = name
            cached = self._namespace_objects[name] = self.java("org.apache.iceberg.catalog.Namespace").of(names)
        return cached

    def identifier(self, namespace: str, table: str):
        cached = self._identifiers.get((namespace, table))
        if cached is None:
            cached = self.java("org.apache.iceberg.catalog.TableIdentifier").of(self.namespace(namespace), table)
            self._identifiers[(namespace, table)] = cached
        return cached

    # -- types -------------------------------------------------------------------------------------------
    def type_of(self, spark_type: str):
        """Java Iceberg primitive type for a Spark SQL type name produced by ``mysql_types.iceberg_type`` (the one
        mapping, ``iceberg_json_type``, also names the types of ``schema_json``)."""
        return self.types.fromPrimitiveString(iceberg_json_type(spark_type))

    # -- catalog -----------------------------------------------------------------------------------------
    def namespace_exists(self, name: str) -> bool:
        if name in self._namespaces:
            return True
        exists = bool(self.catalog.namespaceExists(self.namespace(name)))
        if exists:
            self._namespaces.add(name)
        return exists

    def create_namespace(self, name: str) -> None:
        """Create the namespace unless it exists. Tables of one new namespace may be created by concurrent flushes
        (tables first seen through their rows), so losing the race to another thread or writer is success."""
        if self.namespace_exists(name):
            return
        try:
            self.catalog.createNamespace(self.namespace(name))
        except Exception:
            if not self.namespace_exists(name):
                raise

    def list_tables(self, namespace: str) -> list[str]:
        """The namespace's tables as the catalog lists them: its staged creates are committed first."""
        self._commit_staged_in(namespace)
        return self._listed(namespace)

    def _listed(self, namespace: str) -> list[str]:
        if not self.namespace_exists(namespace):
            return []
        return [ident.name() for ident in self.catalog.listTables(self.namespace(namespace))]

    def list_namespaces(self) -> list[str]:
        return [str(ns.level(0)) for ns in self.catalog.listNamespaces()]

    def find_namespace(self, name: str) -> Optional[str]:
        """The existing namespace whose name equals ``name`` ignoring case (TiDB names are case-insensitive)."""
        if self.namespace_exists(name):
            return name
        lowered = name.lower()
        return next((ns for ns in self.list_namespaces() if ns.lower() == lowered), None)

    def resolve(self, schema: str, table: str) -> tuple[str, str]:
        """The Iceberg (namespace, table) for an upstream name: an existing one matched ignoring case, else the
        upstream spelling as it is (so the lake shows the names as upstream created them)."""
        namespace = self.find_namespace(schema) or schema
        if self.namespace_exists(namespace):
            names = self._names_in(namespace)
            if table not in names.exact:
                return namespace, names.by_lower.get(table.lower(), table)
        return namespace, table

    def listed(self, namespace: str, table: str) -> bool:
        """Whether the table exists, as this object's listing of its namespace says (see ``__init__``): no
        catalog round trip, where ``table_exists`` loads the table. For the tables of the run's changefeed."""
        return self.namespace_exists(namespace) and table in self._names_in(namespace).exact

    def table_exists(self, namespace: str, table: str) -> bool:
        if (namespace, table) in self._staged:
            return True
        return bool(self.catalog.tableExists(self.identifier(namespace, table)))

    def load(self, namespace: str, table: str):
        """The table, to change or to read through Spark: a staged create is committed first."""
        self.commit_staged(namespace, table)
        return self.catalog.loadTable(self.identifier(namespace, table))

    def read_view(self, namespace: str, table: str):
        """The table for reading its metadata (schema, spec, location, snapshots) or for an append that
        ``commit_staged`` then commits: a staged create's table as its transaction holds it (no snapshot yet,
        see ``staged_watermark``), not committed."""
        entry = self._staged.get((namespace, table))
        if entry is not None:
            return entry[0].table()
        return self.catalog.loadTable(self.identifier(namespace, table))

    def staged_watermark(self, namespace: str, table: str) -> Optional[int]:
        """The watermark a staged create starts the table at (its CREATE's commit ts); None when not staged."""
        entry = self._staged.get((namespace, table))
        return int(entry[1][RESOLVED_TS_PROPERTY]) if entry is not None else None

    def commit_staged(self, namespace: str, table: str) -> None:
        """Commit the table's staged create transaction, if any: with the rows appended to it since, whose
        snapshot carries the newer watermark, else with an empty snapshot carrying the create's summary."""
        entry = self._staged.get((namespace, table))
        if entry is None:
            return
        transaction, summary, lock = entry
        with lock:
            if (namespace, table) not in self._staged:
                return  # another thread committed it meanwhile
            try:
                with self._changing(namespace):
                    if transaction.table().currentSnapshot() is None:
                        self.commit_marker(transaction, summary)
                    transaction.commitTransaction()
            finally:
                with self._lock:
                    self._staged.pop((namespace, table), None)

    def _commit_staged_in(self, namespace: str) -> None:
        for staged_namespace, table in list(self._staged):
            if staged_namespace == namespace:
                self.commit_staged(staged_namespace, table)

    def commit_all_staged(self) -> None:
        """Commit every staged create: before anything outside this object (Spark SQL, another process, the
        checkpoint) may look the tables up."""
        for namespace, table in list(self._staged):
            self.commit_staged(namespace, table)

    def drop_table(self, namespace: str, table: str) -> bool:
        self.commit_staged(namespace, table)
        with self._changing(namespace):
            dropped = bool(self.catalog.dropTable(self.identifier(namespace, table), False))
        self._note(namespace, table, exists=False)
        return dropped

    def rename_table(self, namespace: str, table: str, new_namespace: str, new_table: str) -> None:
        self.commit_staged(namespace, table)
        with self._changing(namespace, new_namespace):
            self.catalog.renameTable(self.identifier(namespace, table), self.identifier(new_namespace, new_table))
        self._note(namespace, table, exists=False)
        self._note(new_namespace, new_table, exists=True)

    def drop_namespace(self, name: str) -> bool:
        self._commit_staged_in(name)
        if not self.namespace_exists(name):
            return False
        try:
            return bool(self.catalog.dropNamespace(self.namespace(name)))
        finally:
            self._namespaces.discard(name)
            self._forget_names(name)

    def _forget_names(self, *namespaces: str) -> None:
        with self._lock:
            for namespace in namespaces:
                self._table_names.pop(namespace, None)

    @contextmanager
    def _changing(self, *namespaces: str) -> Iterator[None]:
        """Around a catalog change of these namespaces' tables: if it fails, it may or may not have happened, so
        their names are listed again when next asked (``_note`` records a change that happened)."""
        try:
            yield
        except BaseException:
            self._forget_names(*namespaces)
            raise

    def _note(self, namespace: str, table: str, exists: bool) -> None:
        """Keep a listed namespace's names in step with a create, drop or rename of ``table`` that happened (a
        failed one: ``_changing``). Asking the catalog here instead loaded the table, under the lock every
        committing thread takes."""
        with self._lock:
            names = self._table_names.get(namespace)
            if names is None:
                return
            if exists:
                names.add(table)
            else:
                names.remove(table)

    def _names_in(self, namespace: str) -> "_TableNames":
        """The namespace's table names (listed once, then kept in step, see ``__init__``)."""
        with self._lock:
            names = self._table_names.get(namespace)
            if names is None:  # the catalog's tables and the staged creates (``list_tables`` would commit them)
                names = _TableNames(self._listed(namespace) + [t for ns, t in self._staged if ns == namespace])
                self._table_names[namespace] = names
            return names

    # -- schemas -----------------------------------------------------------------------------------------
    def columns_of(self, jtable) -> tuple[list[tuple[str, str, bool, Optional[str]]], list[str]]:
        """The table's columns and key names (``columns_of_json``), read in one gateway call."""
        return columns_of_json(json.loads(str(self.java("org.apache.iceberg.SchemaParser").toJson(jtable.schema()))))

    def build_schema(self, columns: Iterable[tuple[str, str, bool, Optional[str]]], identifier: Iterable[str]):
        """``columns``: (name, spark type, required, doc). Field ids are assigned in order from 1. Built from
        Iceberg's JSON form of the schema (``schema_json``) in one gateway call, not a few per column."""
        return self.java("org.apache.iceberg.SchemaParser").fromJson(schema_json(columns, identifier))

    def bucket_spec(self, schema, column: Optional[str], buckets: int):
        builder = self.java("org.apache.iceberg.PartitionSpec").builderFor(schema)
        if column:
            builder = builder.bucket(column, buckets)
        return builder.build()

    def string_map(self, values: Mapping[str, Any]):
        """A Java ``Map<String, String>`` of ``values``, built from their JSON in two gateway calls instead of one
        per entry (a table's properties: a dozen entries, for each of hundreds of tables a run creates)."""
        util = self.java("org.apache.iceberg.util.JsonUtil")
        node = util.mapper().readTree(json.dumps({"map": {str(k): str(v) for k, v in values.items()}}))
        return util.getStringMap("map", node)

    def create_table(self, namespace: str, table: str, schema, spec, properties: Mapping[str, str],
                     summary: Mapping[str, str], staged: bool = False) -> None:
        """Create the table and its first (empty) snapshot carrying ``summary`` in one atomic commit.

        ``staged``: the commit waits for the table's first rows (an append to ``read_view``, then
        ``commit_staged``), so a new table costs one catalog commit and one snapshot, not two of each: a run
        that creates hundreds of tables paid most of its per-table time in them. The table's first snapshot is
        then its rows at their watermark; the empty snapshot at the CREATE's ts is written only when no rows
        come. Anything else that uses the table (``load``, a drop, a rename) commits it first; a run that fails
        before then leaves no table, and its rerun applies the CREATE again."""
        tx = self.catalog.newCreateTableTransaction(
            self.identifier(namespace, table), schema, spec, self.string_map(properties)
        )
        if staged:
            with self._lock:
                self._staged[(namespace, table)] = (tx, {k: str(v) for k, v in summary.items()}, threading.Lock())
            self._note(namespace, table, exists=True)
            return
        self.commit_marker(tx, summary)
        with self._changing(namespace):
            tx.commitTransaction()
        self._note(namespace, table, exists=True)

    def create_plain_table(self, namespace: str, table: str, columns, properties: Mapping[str, str]) -> None:
        """Create an unpartitioned table of ``columns`` (a pyspark ``StructType``), converted as Spark's own
        ``CREATE TABLE`` converts them, unless it exists: losing the race to another writer is success (see
        ``create_namespace``). The columns reach the JVM as their JSON, not a DDL string for Spark's parser (see
        ``local_frame.session_row_schema``)."""
        struct = self.java("org.apache.spark.sql.types.DataType").fromJson(columns.json())
        schema = self.java("org.apache.iceberg.spark.SparkSchemaUtil").convert(struct)
        spec = self.java("org.apache.iceberg.PartitionSpec").unpartitioned()
        try:
            with self._changing(namespace):
                self.catalog.createTable(self.identifier(namespace, table), schema, spec,
                                         self.string_map(properties))
        except Exception:
            if not self.table_exists(namespace, table):
                raise
        self._note(namespace, table, exists=True)

    def delete_file_counts(self, jtable) -> tuple[int, int]:
        """(deletion vectors, other delete files) the current snapshot applies: what a reader merges in.

        The snapshot summary counts both as delete files; a DV is the format-v3 kind (a Puffin blob for one data
        file), the others are v2 position-delete or equality-delete files. Reads the delete manifests only."""
        snapshot = jtable.currentSnapshot()
        if snapshot is None:
            return 0, 0
        io, specs = jtable.io(), jtable.specs()
        vectors = others = 0
        for manifest in snapshot.deleteManifests(io):
            reader = self.java("org.apache.iceberg.ManifestFiles").readDeleteManifest(manifest, io, specs)
            try:
                entries = reader.iterator()
                while entries.hasNext():
                    if entries.next().format().name() == "PUFFIN":
                        vectors += 1
                    else:
                        others += 1
            finally:
                reader.close()
        return vectors, others

    def commit_marker(self, jtable_or_tx, summary: Mapping[str, str]) -> None:
        """An empty append whose snapshot summary records ``summary`` (the watermark) and pins the schema."""
        append = self.in_calling_thread(jtable_or_tx.newAppend())
        for key, value in summary.items():
            append = append.set(key, str(value))
        append.commit()


class _TableNames:
    """One namespace's table names: as spelled, and by lower-case name (upstream names match ignoring case)."""

    def __init__(self, names: Sequence[str]):
        self.exact: set[str] = set()
        self.by_lower: dict[str, str] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        self.exact.add(name)
        self.by_lower[name.lower()] = name

    def remove(self, name: str) -> None:
        self.exact.discard(name)
        if self.by_lower.get(name.lower()) == name:
            del self.by_lower[name.lower()]
            other = next((n for n in self.exact if n.lower() == name.lower()), None)
            if other is not None:
                self.by_lower[name.lower()] = other


def snapshot_summary(jtable) -> dict[str, str]:
    snapshot = jtable.currentSnapshot()
    if snapshot is None:
        return {}
    return dict(snapshot.summary())


def format_version(jtable) -> int:
    """The table's Iceberg format version (2: position-delete files, 3: deletion vectors)."""
    return int(jtable.operations().current().formatVersion())


def watermark_of(jtable) -> int:
    """The greatest commit ts applied to a table, recorded in the summary of the newest snapshot that has it.

    Maintenance (compaction, delete-file rewrites) adds snapshots that change no rows and carry no watermark, so
    the table's ancestry is walked back to the last snapshot this pipeline wrote.
    """
    snapshot = jtable.currentSnapshot()
    while snapshot is not None:
        value = snapshot.summary().get(RESOLVED_TS_PROPERTY)
        if value:
            return int(value)
        parent = snapshot.parentId()
        snapshot = jtable.snapshot(parent) if parent is not None else None
    return 0


#: Iceberg's JSON type names of the Spark types ``mysql_types.iceberg_type`` produces (decimals aside)
_ICEBERG_JSON_TYPES = {
    "int": "int", "integer": "int", "bigint": "long", "long": "long", "float": "float", "double": "double",
    "string": "string", "binary": "binary", "boolean": "boolean", "date": "date", "timestamp_ntz": "timestamp",
    "timestamp": "timestamptz",
}


def iceberg_json_type(spark_type: str) -> str:
    """Iceberg's JSON name of a Spark type name (``decimal(p,s)`` -> ``decimal(p, s)``)."""
    name = spark_type.strip().lower()
    if name in _ICEBERG_JSON_TYPES:
        return _ICEBERG_JSON_TYPES[name]
    match = _DECIMAL.fullmatch(name)
    if match:
        return f"decimal({int(match.group(1))}, {int(match.group(2))})"
    raise ValueError(f"no Iceberg type for Spark type {spark_type!r}")


def schema_json(columns: Iterable[tuple[str, str, bool, Optional[str]]], identifier: Iterable[str]) -> str:
    """Iceberg's JSON form of a flat schema (``SchemaParser``): ``columns`` as (name, Spark type, required,
    doc) with field ids from 1, ``identifier`` the key column names."""
    fields = []
    ids: dict[str, int] = {}
    for index, (name, spark_type, required, doc) in enumerate(columns, start=1):
        field: dict[str, Any] = {"id": index, "name": name, "required": bool(required),
                                 "type": iceberg_json_type(spark_type)}
        if doc is not None:
            field["doc"] = doc
        fields.append(field)
        ids[name.lower()] = index
    schema = {"type": "struct", "schema-id": 0, "fields": fields,
              "identifier-field-ids": [ids[name.lower()] for name in identifier]}
    return json.dumps(schema)


def columns_of_json(parsed: Mapping[str, Any]) -> tuple[list[tuple[str, str, bool, Optional[str]]], list[str]]:
    """The top-level columns of a schema in Iceberg's JSON form as (name, Iceberg type text, required, doc), and
    its identifier (key) column names. A nested type's text is its JSON kind (``struct``, ``list``, ``map``)."""
    by_id: dict[int, str] = {}
    columns = []
    for field in parsed.get("fields", []):
        kind = field["type"] if isinstance(field["type"], str) else str(field["type"].get("type", "struct"))
        columns.append((field["name"], kind, bool(field.get("required")), field.get("doc")))
        by_id[int(field["id"])] = field["name"]
    keys = [by_id[i] for i in parsed.get("identifier-field-ids", []) if i in by_id]
    return columns, keys
