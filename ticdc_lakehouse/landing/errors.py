"""Landing failures. Each carries the partial :class:`LandingReport` so a caller can show what did land."""

from __future__ import annotations

from typing import Optional

from .progress import LandingReport


class LandingError(RuntimeError):
    """Landing could not complete; what landed before the failure is durable and a rerun continues from it."""

    def __init__(self, message: str, report: Optional[LandingReport] = None) -> None:
        super().__init__(message)
        self.report = report


class DataLossError(LandingError):
    """Kafka no longer holds offsets that were never landed (retention deleted them)."""


class LandingTimeoutError(LandingError):
    """Reading a partition made no progress for too long; nothing of that partition's range was kept."""


class ArchiveCorruptError(LandingError):
    """An archived Kafka log file holds a damaged record batch."""
