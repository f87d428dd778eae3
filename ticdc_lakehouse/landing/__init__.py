"""Landing: raw Kafka records (from a live cluster or an archived Kafka log) into immutable Parquet segments.

See :mod:`.segments` for the layout the merge engine reads.

Every name is loaded when first used (PEP 562): importing one light submodule (``.storage``, which the
configuration's ``landing_path`` needs, and so every command's preflight) ran this file first, and its eager
imports loaded pyarrow and pandas (0.6-0.9 s) before the CLI could start the driver JVM. ``land_from_kafka`` /
``land_from_archive`` load confluent-kafka / kafka-python only when used.
"""

from importlib import import_module
from typing import Any

#: exported name -> the submodule defining it
_EXPORTS = {
    "ArchiveCorruptError": ".errors", "DataLossError": ".errors", "LandingError": ".errors",
    "LandingTimeoutError": ".errors", "LandingBusyError": ".lock", "DataLoss": ".progress",
    "LandingReport": ".progress", "PartitionLanding": ".progress", "LANDED_SCHEMA": ".segments",
    "Segment": ".segments", "SegmentWriter": ".segments", "check_contiguous": ".segments",
    "known_partitions": ".segments", "landed_end": ".segments", "landed_topics": ".segments",
    "list_segments": ".segments", "read_segment": ".segments", "segment_path": ".segments",
    "segments_end": ".segments", "land_from_kafka": ".kafka_source", "land_from_archive": ".archive",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(name)
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


__all__ = sorted(_EXPORTS)
