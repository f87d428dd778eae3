"""Row batching shared by the encoders of protocols that put several rows in one Kafka message (Open Protocol,
Craft): TiCDC fills a message with up to ``max-batch-size`` row events (default 16) before it starts the next."""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from ticdc_lakehouse.core.model import RowChange


class RowBatches:
    """``encode_rows`` for an encoder with ``encode_batch(rows) -> (key, value)``."""

    def encode_batch(self, rows: Sequence[RowChange]) -> tuple[Optional[bytes], bytes]:
        raise NotImplementedError

    def encode_rows(self, rows: Iterable[RowChange], max_batch_size: int = 16) -> list[tuple[Optional[bytes], bytes]]:
        """Rows batched the way TiCDC does: up to ``max_batch_size`` events per message (TiCDC's default 16)."""
        messages = []
        batch: list[RowChange] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= max_batch_size:
                messages.append(self.encode_batch(batch))
                batch = []
        if batch:
            messages.append(self.encode_batch(batch))
        return messages
