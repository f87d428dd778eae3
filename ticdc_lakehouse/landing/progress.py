"""What a landing run did, per partition, and how it tells a caller while it runs.

A run's report is what an operator (or an Airflow task log / XCom) reads to answer "did everything land, how
much, and was anything lost?", so data loss and warnings are first-class fields rather than log lines.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

log = logging.getLogger("ticdc_lakehouse.landing")


@dataclass
class PartitionLanding:
    """One partition in one run: the range ``[start, end)`` landed (start == end: nothing new)."""

    topic: str
    partition: int
    start: int
    end: int
    records: int = 0
    bytes: int = 0  # key + value bytes
    path: Optional[str] = None  # the segment written, None when nothing was written
    committed: Optional[bool] = None  # consumer-group offset committed (Kafka only)
    seconds: float = 0.0

    @property
    def landed(self) -> bool:
        return self.path is not None


@dataclass
class DataLoss:
    """Offsets that were never landed and can no longer be read (retention deleted them)."""

    topic: str
    partition: int
    start: int
    end: int
    reason: str

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition} offsets [{self.start}, {self.end}) lost: {self.reason}"


@dataclass
class LandingReport:
    """The outcome of one landing run of one changefeed."""

    changefeed: str
    source: str  # "kafka" or "archive:<dir>"
    partitions: list[PartitionLanding] = field(default_factory=list)
    data_loss: list[DataLoss] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    removed_temp_files: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def files(self) -> int:
        return sum(1 for p in self.partitions if p.landed)

    def partition(self, topic: str, partition: int) -> Optional[PartitionLanding]:
        for item in self.partitions:
            if item.topic == topic and item.partition == partition:
                return item
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (Airflow XCom, CLI ``--json``)."""
        data = asdict(self)
        data["data_loss"] = [asdict(d) for d in self.data_loss]
        data.update(records=self.records, bytes=self.bytes, files=self.files)
        return data

    def summary(self) -> str:
        """One human line plus one line per loss/warning."""
        lines = [
            f"changefeed {self.changefeed} from {self.source}: {self.records} records, {self.bytes} bytes, "
            f"{self.files} new segment(s) over {len(self.partitions)} partition(s) in {self.seconds:.1f}s"
        ]
        lines += [f"DATA LOSS: {loss}" for loss in self.data_loss]
        lines += [f"warning: {warning}" for warning in self.warnings]
        return "\n".join(lines)


#: called once per partition when it is done (landed or found up to date)
ProgressFn = Callable[[PartitionLanding], None]


def log_progress(item: PartitionLanding) -> None:
    """The default progress callback: one log line per partition."""
    if item.landed:
        log.info(
            "landed %s/%s [%d, %d): %d records, %d bytes in %.1fs",
            item.topic, item.partition, item.start, item.end, item.records, item.bytes, item.seconds,
        )
    else:
        log.info("%s/%s up to date at offset %d", item.topic, item.partition, item.end)


def notify(progress: Optional[ProgressFn], item: PartitionLanding) -> None:
    (progress or log_progress)(item)
