"""Landing-zone retention: delete landed segments that no merge will ever read again.

Landed segments are immutable copies of Kafka records; without retention the landing zone grows forever. A
segment may go when all of these hold (``plan_landing_retention``, pure):

* it ends at or below its partition's restart offset in the latest checkpoint: every record in it is applied
  (or a replay of an applied one), so no merge reads it again. A partition held at an undecodable message
  (``merge.on_undecodable = "hold"``) restarts at that message, so its segment stays;
* it is not the partition's last segment: the last segment's end is where landing resumes (the landed files are
  the truth about what has landed), so it always stays;
* its file is older than ``maintenance.landing_retention_hours`` (0, the default, keeps every segment): recent
  segments stay for inspection and replays by hand.

Deleting only from the front of a partition keeps the remaining segments contiguous, which ``lakehouse status``
checks. Maintenance holds the merge lock, so no merge reads the segments meanwhile; a landing run only adds
segments after the last one.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .segments import Segment, list_segments
from .storage import Location, storage_of

PartitionKey = tuple[str, int]


def plan_landing_retention(segments: Mapping[PartitionKey, Sequence[Segment]], restart: Mapping[PartitionKey, int],
                           older_than_s: float, mtime: Callable[[Segment], float]) -> list[Segment]:
    """The segments that may be deleted (see the module doc); ``older_than_s``: files modified before it only."""
    doomed = []
    for key, items in sorted(segments.items()):
        ordered = sorted(items, key=lambda s: (s.start, s.end))
        bound = restart.get(key)
        if bound is None:
            continue  # never merged: everything is still to be read
        for segment in ordered[:-1]:
            if segment.end > bound or mtime(segment) >= older_than_s:
                break  # keep this one and every later one: deletions stay at the front
            doomed.append(segment)
    return doomed


def apply_landing_retention(landing_root: Location, changefeed: str, restart: Mapping[PartitionKey, int],
                            older_than_s: float, dry_run: bool) -> dict[str, Any]:
    """Delete (or, dry, list) the segments ``plan_landing_retention`` allows; returns what went and its size."""
    doomed = plan_landing_retention(list_segments(landing_root, changefeed), restart, older_than_s,
                                    lambda segment: storage_of(segment.path).mtime(segment.path))
    size = sum(storage_of(segment.path).size(segment.path) for segment in doomed)
    if not dry_run:
        for segment in doomed:
            storage_of(segment.path).delete(segment.path)
    return {"segments": [str(segment.path) for segment in doomed], "bytes": size, "dry_run": dry_run}
