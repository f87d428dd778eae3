"""The decode task of the merge's first stage (merge/decode_stage.py), run as Spark runs it, without Spark."""

from __future__ import annotations

import gc

import pyarrow as pa

from ticdc_lakehouse.decode import DecoderOptions
from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
from ticdc_lakehouse.core.events_arrow import EVENT_ARROW_SCHEMA
from ticdc_lakehouse.landing.segments import LANDED_SCHEMA
from ticdc_lakehouse.merge.decode_stage import DECODE_GC_THRESHOLDS, decode_batches
from ticdc_lakehouse.core.model import Position, ResolvedEvent, RowChange


def landed_batch(count: int) -> pa.RecordBatch:
    encoder = OpenProtocolEncoder()
    records = [encoder.encode(RowChange("s", "t", 10 + i, "I", {"id": str(i)}, None, ("id",), {"id": "int"},
                                        Position("k", 0, i))) for i in range(count)]
    records.append(encoder.encode(ResolvedEvent(10 + count, Position("k", 0, count))))
    records.append((b"not open protocol", b"{"))
    return pa.RecordBatch.from_pydict(
        {"topic": ["k"] * len(records), "partition": [0] * len(records), "offset": list(range(len(records))),
         "timestamp": [None] * len(records), "key": [k for k, _ in records], "value": [v for _, v in records],
         "headers": [[]] * len(records)},
        schema=LANDED_SCHEMA,
    )


def test_a_task_decodes_every_record_in_bounded_batches_and_restores_the_collector():
    default = gc.get_threshold()
    seen_thresholds = []
    run = decode_batches("open", DecoderOptions())
    batches = []
    for batch in run(iter([landed_batch(5000), landed_batch(10)])):
        seen_thresholds.append(gc.get_threshold())
        batches.append(batch)
    assert gc.get_threshold() == default
    assert set(seen_thresholds) == {DECODE_GC_THRESHOLDS}
    assert all(b.schema == EVENT_ARROW_SCHEMA and b.num_rows <= 4096 + 2 for b in batches)
    kinds = [k for b in batches for k in b.column("kind").to_pylist()]
    assert kinds.count("row") == 5010 and kinds.count("resolved") == 2 and kinds.count("error") == 2
