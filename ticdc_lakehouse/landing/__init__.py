"""Landing: raw Kafka records (from a live cluster or an archived Kafka log) into immutable Parquet segments.

See :mod:`.segments` for the layout the merge engine reads.
"""

from typing import Any

from .errors import ArchiveCorruptError, DataLossError, LandingError, LandingTimeoutError
from .lock import LandingBusyError
from .progress import DataLoss, LandingReport, PartitionLanding
from .segments import (
    LANDED_SCHEMA,
    Segment,
    SegmentWriter,
    check_contiguous,
    known_partitions,
    landed_end,
    landed_topics,
    list_segments,
    read_segment,
    segment_path,
    segments_end,
)


def __getattr__(name: str) -> Any:
    """``land_from_kafka`` / ``land_from_archive`` load confluent-kafka / kafka-python only when used, so readers
    of the layout (the merge engine) import this package cheaply."""
    if name == "land_from_kafka":
        from .kafka_source import land_from_kafka

        return land_from_kafka
    if name == "land_from_archive":
        from .archive import land_from_archive

        return land_from_archive
    raise AttributeError(name)


__all__ = [
    "ArchiveCorruptError", "DataLoss", "DataLossError", "LANDED_SCHEMA", "LandingBusyError", "LandingError",
    "LandingReport", "LandingTimeoutError", "PartitionLanding", "Segment", "SegmentWriter", "check_contiguous",
    "known_partitions", "land_from_archive", "land_from_kafka", "landed_end", "landed_topics", "list_segments",
    "read_segment", "segment_path", "segments_end",
]
