"""Land a changefeed's Kafka topics into immutable segments, exactly once per offset.

Per partition, each run lands ``[start, end)`` where ``start`` is the landed end (the last segment's end, or the
partition's low watermark when nothing has landed) and ``end`` is the high watermark captured when the run starts.
The run reads exactly that range with manual assignment (no group rebalancing, no auto commit), writes it as
one segment, and only after the file is durable commits ``end`` as the consumer group's offset (together with other
partitions' durable ends), which is there for lag monitoring: the landed files, not the group offset, decide where
the next run starts. So a crash at any point (before the rename, after it, before the commit) makes the rerun land
the same offsets, never twice.

Several partitions are read at once and worker threads encode, compress and write row groups while the loop keeps
consuming, so landing runs close to the speed of a bare consume (``bench/land.py`` measures the ratio).

The captured end is the *last stable offset* under ``read_committed`` (the default), so an open transaction
never makes the run wait for records it could not read. Reaching the end is detected by the partition-EOF event,
which also works when the range ends in transaction markers or compacted-away offsets that no message carries.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from ticdc_lakehouse.runtime.config import ChangefeedConfig, LandingSection
from ticdc_lakehouse.core.redaction import mask_secrets, mask_uri_password
from .errors import DataLossError, LandingError, LandingTimeoutError
from .lock import landing_lock
from .progress import DataLoss, LandingReport, PartitionLanding, ProgressFn, notify
from .quarantine import mark_relanded, missing_ranges, quarantined_ranges
from .storage import landing_location, storage_of
from .segments import (
    BackgroundWrites,
    SegmentWriter,
    clean_temp_files,
    landed_end,
    partition_segments,
    topic_dir,
    write_atomically,
    write_partition_count,
)

log = logging.getLogger("ticdc_lakehouse.landing.kafka")

MiB = 1024 * 1024

#: consumer settings that let a single message of tens of MiB through (TiCDC's max-message-bytes can be large)
#: and keep the read exact; ``changefeed.kafka`` overrides any of them (SASL, TLS, bigger limits, ...)
DEFAULT_CONSUMER_CONFIG: dict[str, Any] = {
    "client.id": "ticdc-lakehouse-landing",
    "auto.offset.reset": "error",  # never silently jump when an offset vanished under us
    "isolation.level": "read_committed",
    "check.crcs": True,
    "message.max.bytes": 64 * MiB,
    "fetch.max.bytes": 64 * MiB,
    "max.partition.fetch.bytes": 16 * MiB,
    "receive.message.max.bytes": 65 * MiB,
    "queued.max.messages.kbytes": 64 * 1024,  # the prefetch queue, shared by all assigned partitions
    "socket.keepalive.enable": True,
}

#: settings the landing logic depends on; user overrides of these are ignored (with a warning)
FORCED_KEYS = ("group.id", "enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof")

#: ``landing.kafka_timeout_seconds``'s default, for callers of the library without settings
DEFAULT_TIMEOUT_S = LandingSection.kafka_timeout_seconds
DEFAULT_PARALLEL = 8
CONSUME_BATCH = 2000
#: consume() waits until the batch is full or this elapses: short, so small partitions finish promptly
CONSUME_WAIT_S = 0.1
DATA_LOSS_FILE = "_data_loss.json"
#: durable segments' group offsets are committed together at most this often (and when the run ends)
COMMIT_INTERVAL_S = 10.0


def consumer_config(changefeed: ChangefeedConfig) -> dict[str, Any]:
    """The confluent-kafka consumer settings for a changefeed (pure; contains secrets: never log it unmasked)."""
    config: dict[str, Any] = dict(DEFAULT_CONSUMER_CONFIG)
    config["bootstrap.servers"] = changefeed.bootstrap_servers
    extra = dict(changefeed.kafka)
    for key in FORCED_KEYS:
        if key in extra:
            log.warning("ignoring kafka setting %s for changefeed %s: landing manages it", key, changefeed.name)
            extra.pop(key)
    config.update(extra)
    config.update(
        {
            "group.id": changefeed.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
        }
    )
    # librdkafka refuses a fetch smaller than one message, and a response buffer smaller than a full fetch
    config["fetch.max.bytes"] = max(int(config["fetch.max.bytes"]), int(config["message.max.bytes"]))
    needed = int(config["fetch.max.bytes"]) + 512
    if int(config.get("receive.message.max.bytes", 0)) < needed:
        config["receive.message.max.bytes"] = needed
    return config


@dataclass
class PartitionPlan:
    """What one run will do for one partition."""

    topic: str
    partition: int
    low: int
    high: int
    landed: Optional[int]  # landed end before the run, None when nothing has landed
    committed: Optional[int]  # the group's committed offset, None when unknown / none

    @property
    def start(self) -> int:
        return self.low if self.landed is None else max(self.landed, 0)

    @property
    def lost(self) -> Optional[tuple[int, int]]:
        """Offsets never landed that Kafka no longer has: ``[landed end, low watermark)``; on a first landing,
        ``[0, low watermark)``: a partition's log starts at offset 0, so a higher low watermark means retention
        (or a delete-records request) removed records before anything landed them."""
        landed = 0 if self.landed is None else self.landed
        if landed < self.low:
            return landed, self.low
        return None

    @property
    def regressed(self) -> bool:
        """The landed end is beyond what Kafka has: the topic was recreated or the log truncated."""
        return self.landed is not None and self.landed > self.high


def plan_partition(topic: str, partition: int, low: int, high: int, landed: Optional[int],
                   committed: Optional[int] = None) -> PartitionPlan:
    """The plan for one partition from its watermarks and landed end (pure; the lag sensor uses it too)."""
    return PartitionPlan(topic, partition, low, high, landed, committed)


def _kafka_call(what: str, func: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return func(*args, **kwargs)
    except KafkaException as exc:
        raise LandingError(f"Kafka {what} failed: {exc.args[0] if exc.args else exc}") from exc


def _topic_partitions(consumer: Consumer, topic: str, timeout_s: float) -> list[int]:
    metadata = _kafka_call(f"metadata request for topic {topic!r}", consumer.list_topics, topic=topic,
                           timeout=timeout_s)
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        reason = info.error if info is not None and info.error is not None else "no partitions"
        raise LandingError(
            f"topic {topic!r} is not available on {metadata.orig_broker_name or 'the cluster'}: {reason}; "
            "check the changefeed's topics and bootstrap_servers"
        )
    return sorted(info.partitions)


def _committed(consumer: Consumer, tps: Sequence[TopicPartition], timeout_s: float) -> dict[tuple[str, int], int]:
    """The group's committed offsets; empty when they cannot be read (they are informational only)."""
    if not tps:
        return {}
    try:
        result = consumer.committed(list(tps), timeout=timeout_s)
    except KafkaException as exc:
        log.warning("cannot read committed offsets of the group: %s", exc)
        return {}
    return {(tp.topic, tp.partition): tp.offset for tp in result if tp.offset >= 0 and tp.error is None}


def _plan(consumer: Consumer, changefeed: ChangefeedConfig, landing_root: Path, topics: Sequence[str],
          timeout_s: float) -> list[PartitionPlan]:
    partitions: list[tuple[str, int]] = []
    for topic in topics:
        numbers = _topic_partitions(consumer, topic, timeout_s)
        write_partition_count(landing_root, changefeed.name, topic, max(numbers) + 1)
        partitions += [(topic, p) for p in numbers]
    committed = _committed(consumer, [TopicPartition(t, p) for t, p in partitions], timeout_s)
    plans = []
    for topic, partition in partitions:
        low, high = _kafka_call(
            f"watermark query for {topic}/{partition}", consumer.get_watermark_offsets,
            TopicPartition(topic, partition), timeout=timeout_s, cached=False,
        )
        plans.append(plan_partition(topic, partition, low, high,
                                    landed_end(landing_root, changefeed.name, topic, partition),
                                    committed.get((topic, partition))))
    return plans


def _record_data_loss(landing_root: Path, changefeed: str, loss: DataLoss, accepted: bool = True) -> None:
    """Append the loss to ``{topic}/_data_loss.json`` so it stays visible next to the data (once per range and
    verdict: a loss not accepted is found again by every run until it is)."""
    path = topic_dir(landing_root, changefeed, loss.topic) / DATA_LOSS_FILE
    entries = json.loads(storage_of(path).read(path)) if storage_of(path).exists(path) else []
    if any((e.get("partition"), e.get("start"), e.get("end"), e.get("accepted", True))
           == (loss.partition, loss.start, loss.end, accepted) for e in entries):
        return
    entries.append({"partition": loss.partition, "start": loss.start, "end": loss.end, "reason": loss.reason,
                    "accepted": accepted, "recorded_at_ms": int(time.time() * 1000)})
    write_atomically(path, json.dumps(entries, indent=1).encode())


class ClientLog:
    """Where librdkafka's own log lines go: DEBUG of ``ticdc_lakehouse.landing.librdkafka``.

    It logs every failed connection attempt, and a broker that is down gives about a thousand of them in a second;
    the error callback (:class:`_ErrorLog`) already reports each distinct cause once, and the run's error names it.
    ``-v`` with DEBUG logging shows them all."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("ticdc_lakehouse.landing.librdkafka")

    def log(self, level: int, message: str, *args: Any, **kwargs: Any) -> None:
        self.logger.debug(message, *args)


def _without_repeats(text: str) -> str:
    """A client error's text without librdkafka's "(after 0ms in state CONNECT, 3 identical error(s)
    suppressed)" tail."""
    return re.sub(r"\s*\((after \d+ms|\d+ identical error)([^()]|\(s\))*\)", "", text)


def _error_kind(text: str) -> str:
    """What stays the same between repeats of one error (numbers blanked)."""
    return re.sub(r"\d+", "N", _without_repeats(text))
def _lose(loss: DataLoss, landing_root: Path, changefeed: str, report: LandingReport, allow_gap: bool) -> bool:
    """Report offsets Kafka no longer has; recorded in ``_data_loss.json`` either way (status shows it), with a
    zero-row segment over them when accepted (``allow_gap``). Returns whether landing may go past them."""
    report.data_loss.append(loss)
    _record_data_loss(landing_root, changefeed, loss, accepted=allow_gap)
    if not allow_gap:
        log.error("DATA LOSS: %s", loss)
        return False
    log.warning("DATA LOSS accepted: %s", loss)
    with SegmentWriter(landing_root, changefeed, loss.topic, loss.partition, loss.start,
                       expected_end=loss.end) as marker:
        marker.commit(loss.end)
    return True


def _holes(landing_root: Path, changefeed: str, plans: Sequence[PartitionPlan]
           ) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Per partition, the missing ranges below its landed end (a quarantined or deleted segment)."""
    quarantined = quarantined_ranges(landing_root, changefeed)
    result = {}
    for plan in plans:
        if plan.landed is None:
            continue
        key = (plan.topic, plan.partition)
        segments = partition_segments(landing_root, changefeed, plan.topic, plan.partition)
        found = [(a, b) for a, b in missing_ranges(segments, quarantined.get(key, [])) if b <= plan.landed]
        if found:
            result[key] = found
    return result


def _refill(plan: PartitionPlan, holes: Sequence[tuple[int, int]], landing_root: Path, changefeed: str,
            report: LandingReport, allow_gap: bool) -> list[tuple[PartitionPlan, int]]:
    """The reads that land a partition's holes again, and the data loss for any part Kafka no longer holds."""
    reads = []
    for start, end in holes:
        first = min(max(start, plan.low), end)
        if first > start:
            loss = DataLoss(plan.topic, plan.partition, start, first,
                            f"a landed segment of these offsets was unreadable or deleted and Kafka's low watermark "
                            f"is {plan.low}: retention removed them")
            if not _lose(loss, landing_root, changefeed, report, allow_gap):
                continue
        if first < end:
            reads.append((PartitionPlan(plan.topic, plan.partition, plan.low, end, first, None), first))
    return reads


class _ErrorLog:
    """Collects client-level errors (broker down, authentication) to explain a timeout or fail fast. Each kind of
    error is logged once (a down broker repeats the same one for as long as it stays down)."""

    def __init__(self) -> None:
        self.last: Optional[KafkaError] = None
        self.fatal: Optional[str] = None
        self.kinds: set[str] = set()

    def __call__(self, error: KafkaError) -> None:
        kind = _error_kind(error.str())
        repeated = kind in self.kinds
        self.kinds.add(kind)
        self.last = error
        text = error.str()
        if error.fatal() or error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                                             KafkaError._SSL):
            self.fatal = str(error)
        elif "increase receive.message.max.bytes" in text:
            # retrying can never succeed: the same fetch response comes back every time
            self.fatal = (f"{text}. The broker answered a fetch with more bytes than receive.message.max.bytes "
                          "allows; raise it (and fetch.max.bytes) in the changefeed's kafka settings")
        # the first of each kind, at INFO (-v): a failing request's error names the last one (see land_from_kafka)
        (log.debug if repeated else log.warning if self.fatal else log.info)("kafka client: %s", error)


def _commit(consumer: Consumer, items: Sequence[PartitionLanding], report: LandingReport) -> None:
    """Commit each item's ``end`` as the group offset, all in one request; sets ``item.committed``.

    Only called for ranges that are already durable. A failure is a warning, not an error: the landed files, not
    the group offset, decide where landing resumes, and the next run commits it.
    """
    if not items:
        return
    failed: dict[tuple[str, int], Any] = {}
    try:
        result = consumer.commit(offsets=[TopicPartition(i.topic, i.partition, i.end) for i in items],
                                 asynchronous=False)
        for tp in result or ():
            if tp.error is not None:
                failed[(tp.topic, tp.partition)] = tp.error
    except KafkaException as exc:
        failed = {(i.topic, i.partition): exc for i in items}
    for item in items:
        error = failed.get((item.topic, item.partition))
        item.committed = error is None
        if error is not None:
            report.warnings.append(
                f"{item.topic}/{item.partition}: landed up to {item.end} but committing the group offset failed "
                f"({error}); the next run commits it (the landed files decide where landing resumes)"
            )


@dataclass(eq=False)
class _Reading:
    """A partition being read: its writer and the records of the current consumed batch, column-wise."""

    plan: PartitionPlan
    start: int
    writer: SegmentWriter
    began: float
    last_progress: float
    eof_at: Optional[int] = None
    done: bool = False
    seen: bool = False  # anything (a record, an end-of-partition event) arrived in this consumed batch

    def __post_init__(self) -> None:
        self.end = self.plan.high
        self.reset()

    def reset(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[Optional[int]] = []
        self.keys: list[Optional[bytes]] = []
        self.values: list[Optional[bytes]] = []
        self.headers: list[Any] = []

    @property
    def reached(self) -> int:
        last = self.writer.last_offset
        return self.start if last is None else last + 1


class _RangeReader:
    """Reads the planned ranges of several partitions at once, each into its own segment.

    Up to ``parallel`` partitions are assigned together (``incremental_assign``) so fetches overlap like a normal
    consumer's; a partition is unassigned and its segment made durable as soon as its range is complete,
    independently of the others. Group offsets of durable segments are committed together, in one request every
    :data:`COMMIT_INTERVAL_S` and when the run ends, rather than one blocking round trip per partition in the
    middle of the consume loop. Memory stays bounded: each writer flushes row
    groups at a byte limit, at most a few row groups wait for the writer threads, and librdkafka's prefetch
    queue is capped by ``queued.max.messages.kbytes``.
    """

    def __init__(self, consumer: Consumer, landing_root: Path, changefeed: str, report: LandingReport,
                 errors: _ErrorLog, timeout_s: float, progress: Optional[ProgressFn], parallel: int,
                 commit_offsets: bool = True) -> None:
        self.commit_offsets = commit_offsets  # False when filling holes: their ends are not the landed end
        self.consumer = consumer
        self.landing_root = landing_root
        self.changefeed = changefeed
        self.report = report
        self.errors = errors
        self.timeout_s = timeout_s
        self.progress = progress
        self.parallel = max(1, parallel)
        self.active: dict[tuple[str, int], _Reading] = {}
        self.committing: deque[tuple[_Reading, Future]] = deque()
        self.background: Optional[BackgroundWrites] = None
        self.uncommitted: list[PartitionLanding] = []  # durable, group offset not committed yet
        self.committed_at = time.monotonic()

    def run(self, work: Sequence[tuple[PartitionPlan, int]]) -> None:
        pending = deque(work)
        self.background = BackgroundWrites()
        try:
            while pending or self.active or self.committing:
                while pending and len(self.active) < self.parallel:
                    plan, start = pending.popleft()
                    if start >= plan.high:
                        self._up_to_date(plan, start)
                    else:
                        self._activate(plan, start)
                if self.active:
                    self._poll()
                self._collect(wait=not self.active)
                if self.uncommitted and time.monotonic() - self.committed_at >= COMMIT_INTERVAL_S:
                    self._commit_durable()
            self._commit_durable()
        except BaseException:
            # no commit here: a broker that is down would block it, and the next run commits what is durable
            for reading in self.active.values():
                reading.writer.abort()
            self.active.clear()
            self._collect(wait=True, quiet=True)
            raise
        finally:
            self.background.close()

    def _commit_durable(self) -> None:
        items, self.uncommitted = self.uncommitted, []
        if not self.commit_offsets:
            return
        _commit(self.consumer, items, self.report)
        self.committed_at = time.monotonic()

    def _up_to_date(self, plan: PartitionPlan, start: int) -> None:
        """Nothing new; still make the group offset match what is durable (a crash may have skipped it)."""
        item = PartitionLanding(plan.topic, plan.partition, start, start)
        if plan.landed is not None and plan.committed != start:
            self.uncommitted.append(item)
        self.report.partitions.append(item)
        notify(self.progress, item)

    def _activate(self, plan: PartitionPlan, start: int) -> None:
        writer = SegmentWriter(self.landing_root, self.changefeed, plan.topic, plan.partition, start,
                               expected_end=plan.high, background=self.background)
        now = time.monotonic()
        self.active[(plan.topic, plan.partition)] = _Reading(plan, start, writer, now, now)
        _kafka_call(f"assign {plan.topic}/{plan.partition}", self.consumer.incremental_assign,
                    [TopicPartition(plan.topic, plan.partition, start)])

    def _poll(self) -> None:
        if self.errors.fatal is not None:
            raise LandingError(f"Kafka client error: {self.errors.fatal}")
        messages = self.consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_WAIT_S)
        active = self.active
        # The landing hot path. Messages come in runs of one partition, so the partition's state and its column
        # lists' append methods are looked up once per run; records go to the writer once per consumed batch.
        reading: Optional[_Reading] = None
        current: Optional[tuple[str, int]] = None
        end = 0
        add_offset = add_timestamp = add_key = add_value = add_headers = None  # type: Any
        for message in messages:
            key = (message.topic(), message.partition())
            if key != current:
                current = key
                reading = active.get(key)
                if reading is not None:
                    end = reading.end
                    add_offset, add_timestamp = reading.offsets.append, reading.timestamps.append
                    add_key, add_value, add_headers = reading.keys.append, reading.values.append, reading.headers.append
            if reading is None or reading.done:
                continue  # a stale message of an earlier assignment, or past the range
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    reading.eof_at = message.offset()
                    reading.seen = True
                    if reading.eof_at >= end:
                        reading.done = True
                    continue
                if error.fatal() or not error.retriable():
                    raise LandingError(f"Kafka error while reading {key[0]}/{key[1]} at offset {reading.reached}: "
                                       f"{error}")
                self.errors.last = error
                continue
            offset = message.offset()
            if offset >= end:
                reading.done = True
                continue
            ts_type, ts = message.timestamp()
            add_offset(offset)
            add_timestamp(None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts)
            add_key(message.key())
            add_value(message.value())
            add_headers(message.headers())
            if offset + 1 >= end:
                reading.done = True
        now = time.monotonic()
        for reading in list(active.values()):
            if not (reading.offsets or reading.seen or reading.done):
                if now - reading.last_progress > self.timeout_s:
                    self._timeout(reading)
                continue
            reading.last_progress, reading.seen = now, False
            if reading.offsets:
                reading.writer.extend(reading.offsets, reading.timestamps, reading.keys, reading.values,
                                      reading.headers)
                reading.reset()
            if reading.done:
                self._finish(reading)

    def _finish(self, reading: _Reading) -> None:
        """The range is read: stop fetching it and have the worker make its segment durable."""
        plan = reading.plan
        del self.active[(plan.topic, plan.partition)]
        try:
            self.consumer.incremental_unassign([TopicPartition(plan.topic, plan.partition)])
        except KafkaException as exc:
            log.debug("unassign %s/%s: %s", plan.topic, plan.partition, exc)
        self.committing.append((reading, reading.writer.commit_async(plan.high)))

    def _collect(self, wait: bool, quiet: bool = False) -> None:
        """For each segment made durable (in order): report, notify, queue its group offset for the next commit.

        ``quiet`` (while failing): record what became durable but call no progress callback and keep going
        past failed writes, so the original error is the one raised.
        """
        while self.committing and (wait or self.committing[0][1].done()):
            reading, future = self.committing.popleft()
            plan = reading.plan
            try:
                segment = future.result()
            except BaseException:
                if quiet:
                    continue
                raise
            item = PartitionLanding(plan.topic, plan.partition, reading.start, plan.high, reading.writer.records,
                                    reading.writer.bytes, str(segment.path) if segment else None)
            item.seconds = time.monotonic() - reading.began
            self.report.partitions.append(item)
            self.uncommitted.append(item)
            if not quiet:
                notify(self.progress, item)

    def _timeout(self, reading: _Reading) -> None:
        plan, errors = reading.plan, self.errors
        detail = f"; last client error: {errors.last}" if errors.last is not None else ""
        eof = f"; the broker reports the end at {reading.eof_at}" if reading.eof_at is not None else ""
        raise LandingTimeoutError(
            f"reading {plan.topic}/{plan.partition} range [{reading.start}, {plan.high}) made no progress for "
            f"{self.timeout_s:.0f}s at offset {reading.reached}{eof}{detail}. Nothing of this range was kept "
            "(partitions completed before it are landed); check the brokers and rerun (raise the landing timeout "
            "for slow clusters)"
        )


def land_from_kafka(
    changefeed: ChangefeedConfig,
    landing_root: Path | str,
    progress: Optional[ProgressFn] = None,
    *,
    allow_gap: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    topics: Optional[Sequence[str]] = None,
    parallel: int = DEFAULT_PARALLEL,
) -> LandingReport:
    """Land every partition of the changefeed's topics up to the high watermarks seen at the start.

    ``allow_gap``: when retention already deleted offsets that never landed, record the loss (report,
    ``{topic}/_data_loss.json`` and a zero-row segment over the lost range so ranges stay contiguous) and carry
    on from the low watermark; without it such partitions are left untouched and :class:`DataLossError` is
    raised after the others landed. ``timeout_s``: the longest a partition may make no progress.
    ``parallel``: how many partitions are read at once (each buffers up to one row group).
    Raises :class:`LandingError` subclasses; each carries the report of what did land.
    """
    landing_root = landing_location(landing_root)
    began = time.monotonic()
    report = LandingReport(changefeed.name, f"kafka:{changefeed.bootstrap_servers}")
    topics = list(topics or changefeed.topics)
    with landing_lock(landing_root, changefeed.name):
        report.removed_temp_files = [str(p) for p in clean_temp_files(landing_root, changefeed.name)]
        errors = _ErrorLog()
        config = consumer_config(changefeed)
        log.debug("consumer config for %s: %s", changefeed.name, mask_secrets(config))
        config["error_cb"] = errors
        config["logger"] = ClientLog()
        consumer = Consumer(config)
        problems: list[str] = []
        try:
            try:
                plans = _plan(consumer, changefeed, landing_root, topics, timeout_s)
            except LandingError as exc:
                consumer.poll(0)  # serves the client's queued error callbacks: what the request saw
                if errors.last is not None and exc.args:  # the request's error hides the cause the client saw
                    exc.args = (f"{exc.args[0]}; cause: {_without_repeats(errors.last.str())}. Check bootstrap_servers "
                                f"({mask_uri_password(changefeed.bootstrap_servers)}) and that the brokers are up "
                                "and reachable from this host",)
                exc.report = report
                raise
            work: list[tuple[PartitionPlan, int]] = []
            holes: list[tuple[PartitionPlan, int]] = []
            holes_of = _holes(landing_root, changefeed.name, plans)
            for plan in plans:
                start = plan.start
                if plan.regressed:
                    problems.append(
                        f"{plan.topic}/{plan.partition}: landed up to offset {plan.landed} but Kafka's high "
                        f"watermark is {plan.high}: the topic was recreated or its log truncated. Move "
                        f"{topic_dir(landing_root, changefeed.name, plan.topic)} aside to land it afresh"
                    )
                    continue
                holes.extend(_refill(plan, holes_of.get((plan.topic, plan.partition), []), landing_root,
                                     changefeed.name, report, allow_gap))
                lost = plan.lost
                if lost is not None:
                    reason = (f"retention deleted offsets below the low watermark {plan.low} before they were "
                              "landed")
                    if not _lose(DataLoss(plan.topic, plan.partition, lost[0], lost[1], reason), landing_root,
                                 changefeed.name, report, allow_gap):
                        continue
                    start = lost[1]
                work.append((plan, start))
            try:
                if holes:  # first: a partition is read by one reader at a time
                    _RangeReader(consumer, landing_root, changefeed.name, report, errors, timeout_s, progress,
                                 parallel, commit_offsets=False).run(holes)
                _RangeReader(consumer, landing_root, changefeed.name, report, errors, timeout_s, progress,
                             parallel).run(work)
                mark_relanded(landing_root, changefeed.name)
            except LandingError as exc:
                exc.report = report
                raise
        finally:
            consumer.close()
            report.seconds = time.monotonic() - began
    if report.data_loss and not allow_gap:
        raise DataLossError(
            "data loss: " + "; ".join(str(d) for d in report.data_loss)
            + ". Those partitions were not landed past the loss. Restore the data from an archive first, or accept "
            "the loss (landing.accept_data_loss = true, or LAKEHOUSE__LANDING__ACCEPT_DATA_LOSS=true for one run): "
            "landing then goes on from the low watermark",
            report,
        )
    if problems:
        raise LandingError("; ".join(problems), report)
    return report
