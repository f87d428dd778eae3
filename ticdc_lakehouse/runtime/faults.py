"""Named crash points for the fault-injection suite (tests/test_crash_points.py).

``fault_point("merge.after_table_commit")`` does nothing unless the environment names that point in
``LAKEHOUSE_FAULT_POINT``; then, at its ``LAKEHOUSE_FAULT_HIT``-th pass (default 1), the process kills itself with
SIGKILL: no cleanup, no finally blocks, no flushing, exactly like a machine or container dying there.
"""

from __future__ import annotations

import os
import signal

_hits: dict[str, int] = {}

POINTS = (
    "land.before_rename",  # a landed segment is written and fsynced under its temporary name
    "land.after_rename",  # the segment has its final name; the consumer group offset is not committed yet
    "backfill.after_landing",  # the archive is landed; nothing merged
    "merge.after_table_commit",  # one table's MERGE (or DDL) committed; the others not yet
    "merge.before_append_commits",  # the data files of the tables new to the lake written; none committed
    "merge.after_ddl",  # a DDL applied inside a barrier; rows after it not merged yet
    "merge.before_checkpoint",  # every table committed; the checkpoint not written
    "merge.after_checkpoint",  # the checkpoint written; the cut not tagged yet
)


def fault_point(name: str) -> None:
    wanted = os.environ.get("LAKEHOUSE_FAULT_POINT")
    if not wanted or wanted != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= int(os.environ.get("LAKEHOUSE_FAULT_HIT", "1")):
        os.kill(os.getpid(), signal.SIGKILL)
