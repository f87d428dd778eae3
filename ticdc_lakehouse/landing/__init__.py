"""Landing: raw Kafka records (from a live cluster or an archived Kafka log) into immutable Parquet segments.

See :mod:`.segments` for the layout the merge engine reads.
"""

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


def land_from_kafka(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`.kafka_source.land_from_kafka` (imported lazily: confluent-kafka loads librdkafka)."""
    from .kafka_source import land_from_kafka as _land

    return _land(*args, **kwargs)


def land_from_archive(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`.archive.land_from_archive`."""
    from .archive import land_from_archive as _land

    return _land(*args, **kwargs)


__all__ = [
    "ArchiveCorruptError", "DataLoss", "DataLossError", "LANDED_SCHEMA", "LandingBusyError", "LandingError",
    "LandingReport", "LandingTimeoutError", "PartitionLanding", "Segment", "SegmentWriter", "check_contiguous",
    "known_partitions", "land_from_archive", "land_from_kafka", "landed_end", "landed_topics", "list_segments",
    "read_segment", "segment_path", "segments_end",
]
