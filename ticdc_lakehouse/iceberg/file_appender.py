"""Add a table's written data files to an Iceberg append, or to an overwrite replacing all of its files, in one
gateway call.

Why: the append path (``merge.table_commit``) commits files the Spark job wrote; describing each to Iceberg through
py4j (a ``DataFiles`` builder, its path, size, row count and partition, then ``appendFile``) costs a dozen gateway
round trips a file, which the driver's threads pay one after the other (the GIL). A run of 204 small tables writes
16 files a table, one per bucket: 3,264 files and about 40k round trips. This module compiles, once per JVM, a
small Java class (through Janino, the compiler Spark itself ships for its generated code) that builds every file
of a table from one string. The Java code only calls Iceberg's public API, as the Python side did.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence
from urllib.parse import quote

#: the class body: ``dataFiles`` builds one ``DataFile`` per line of ``files``; ``replaceAll`` adds them to an
#: overwrite of the whole table (a table rewritten whole, ``merge.batch_rewrite``); ``add`` writes them to one manifest
#: in the calling thread (as the append would, in the table's metadata directory, with its manifest compression) and
#: appends that manifest. Each line holds the file's path, size, row count, partition path (percent-encoded: paths and
#: partition names come from upstream names) and whether to read full column metrics from its footer, separated by
#: tabs.
#: Why the manifest: an append writes the manifests of its files in Iceberg's worker pool and polls the futures with
#: a 10 ms sleep, which was a third of a small table's commit. A manifest added whole counts its files and rows in
#: the snapshot summary but not their size, so ``add`` sets ``added-files-size`` (the summary's total follows).
JAVA_SOURCE = """
private java.util.List dataFiles(org.apache.iceberg.Table table, String files) throws Exception {
    org.apache.iceberg.PartitionSpec spec = table.spec();
    org.apache.iceberg.MetricsConfig config = null;
    java.util.List built = new java.util.ArrayList();
    String[] lines = files.split("\\n");
    for (int i = 0; i < lines.length; i++) {
        if (lines[i].length() == 0) {
            continue;
        }
        String[] field = lines[i].split("\\t", -1);
        String path = java.net.URLDecoder.decode(field[0], "UTF-8");
        long size = Long.parseLong(field[1]);
        org.apache.iceberg.DataFiles.Builder builder = org.apache.iceberg.DataFiles.builder(spec).withPath(path)
            .withFormat(org.apache.iceberg.FileFormat.PARQUET).withFileSizeInBytes(size);
        if (field[4].equals("1")) {
            if (config == null) {
                config = org.apache.iceberg.MetricsConfig.forTable(table);
            }
            builder = builder.withMetrics(
                org.apache.iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(path), config));
        } else {
            builder = builder.withRecordCount(Long.parseLong(field[2]));
        }
        if (field[3].length() > 0) {
            builder = builder.withPartitionPath(java.net.URLDecoder.decode(field[3], "UTF-8"));
        }
        built.add(builder.build());
    }
    return built;
}

public org.apache.iceberg.AppendFiles add(org.apache.iceberg.AppendFiles append, org.apache.iceberg.Table table,
                                          String files) throws Exception {
    org.apache.iceberg.TableOperations ops = ((org.apache.iceberg.HasTableOperations) table).operations();
    org.apache.iceberg.TableMetadata metadata = ops.current();
    java.util.Map properties = new java.util.HashMap();
    properties.put(org.apache.iceberg.TableProperties.AVRO_COMPRESSION, metadata.property(
        org.apache.iceberg.TableProperties.AVRO_COMPRESSION, org.apache.iceberg.TableProperties.AVRO_COMPRESSION_DEFAULT));
    String level = metadata.property(org.apache.iceberg.TableProperties.AVRO_COMPRESSION_LEVEL, null);
    if (level != null) {
        properties.put(org.apache.iceberg.TableProperties.AVRO_COMPRESSION_LEVEL, level);
    }
    java.util.List built = dataFiles(table, files);
    org.apache.iceberg.io.OutputFile out = table.io().newOutputFile(ops.metadataFileLocation(
        java.util.UUID.randomUUID().toString() + "-m0.avro"));
    org.apache.iceberg.ManifestWriter writer = org.apache.iceberg.ManifestFiles.write(
        metadata.formatVersion(), table.spec(), ops.encryption().encrypt(out), (Long) null, properties);
    long bytes = 0;
    try {
        for (int i = 0; i < built.size(); i++) {
            org.apache.iceberg.DataFile file = (org.apache.iceberg.DataFile) built.get(i);
            writer.add(file);
            bytes += file.fileSizeInBytes();
        }
    } finally {
        writer.close();
    }
    append.appendManifest(writer.toManifestFile());
    // a manifest added whole counts its files and rows in the snapshot summary, not their size
    append.set(org.apache.iceberg.SnapshotSummary.ADDED_FILE_SIZE_PROP, String.valueOf(bytes));
    return append;
}

public org.apache.iceberg.OverwriteFiles replaceAll(org.apache.iceberg.OverwriteFiles overwrite,
                                                    org.apache.iceberg.Table table, String files) throws Exception {
    overwrite.overwriteByRowFilter(org.apache.iceberg.expressions.Expressions.alwaysTrue());
    java.util.List built = dataFiles(table, files);
    for (int i = 0; i < built.size(); i++) {
        overwrite.addFile((org.apache.iceberg.DataFile) built.get(i));
    }
    return overwrite;
}
"""

_compiled: dict[int, Any] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class FileEntry:
    """One written data file as the append gets it."""

    path: str
    size: int
    rows: int
    partition_path: Optional[str]  # ``<field>=<value>``, None for an unpartitioned table
    full_metrics: bool  # read the footer's column metrics (else the row count only)


def file_system_path(location: str) -> str:
    """The file-system path of a data file location (``file:/...`` or a bare path): where the driver or a write
    task writes a file it then adds by its location. Object storage never takes this path (its callers check)."""
    if location.startswith("file:"):
        location = location[len("file:"):]
        while location.startswith("//"):
            location = location[1:]
    return location


def encode(entries: Sequence[FileEntry]) -> str:
    """The ``files`` argument of ``JAVA_SOURCE``'s ``add``. Percent-encoding (space as ``%20``, ``+`` as ``%2B``)
    is what ``URLDecoder`` reverses exactly, so no upstream name can break a line or a field."""
    return "\n".join(
        "\t".join((quote(e.path, safe="/:"), str(e.size), str(e.rows), quote(e.partition_path or "", safe=""),
                   "1" if e.full_metrics else "0"))
        for e in entries)


def appender(jvm) -> Any:
    """The compiled helper for this JVM (compiled on first use, about 0.2 s)."""
    key = id(jvm._gateway_client)
    with _lock:
        found = _compiled.get(key)
        if found is None:
            evaluator = jvm.org.codehaus.janino.ClassBodyEvaluator()
            evaluator.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
            evaluator.cook(JAVA_SOURCE)
            found = _compiled[key] = evaluator.getClazz().newInstance()  # its one public no-argument constructor
        return found


def replace_all_files(jvm, overwrite, jtable, entries: Sequence[FileEntry]) -> None:
    """Make ``overwrite`` (an ``OverwriteFiles`` of ``jtable``) remove every data and delete file of the table and
    add every entry's data file, in one gateway call: a table rewritten whole (``batch_rewrite``)."""
    appender(jvm).replaceAll(overwrite, jtable, encode(entries))


def add_files(jvm, append, jtable, entries: Sequence[FileEntry]) -> None:
    """Append every entry's data file to ``append`` (an ``AppendFiles`` of ``jtable``) in one gateway call, as one
    manifest written in the calling thread."""
    if entries:
        appender(jvm).add(append, jtable, encode(entries))
