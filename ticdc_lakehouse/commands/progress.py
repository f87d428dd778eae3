"""Progress of the long steps (decoding, each table's apply), for a person on a terminal and for log collectors.

A step's messages go to a plain ``say(message)`` callable (what the Airflow operators pass: their task log), so the
library never needs to know who listens. While a Spark step runs, a small daemon thread on the driver reads the
scheduler's own bookkeeping (``SparkContext.statusTracker()``: active stages, tasks done/running/total) and shows
it: on a terminal as one line rewritten in place, elsewhere as a message every ``LOG_EVERY_SECONDS`` (a log gets
no carriage returns). Reading the tracker costs the job nothing: it is the driver's in-memory job state.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, TextIO

Say = Callable[[str], None]

#: how often the tracker thread looks at the scheduler (seconds)
POLL_SECONDS = 0.5
#: a sink without a live line (a log, JSON lines) gets a task-count message this often (seconds)
LOG_EVERY_SECONDS = 10.0


class Reporter:
    """A ``say`` callable for the CLI: plain lines on a terminal, one JSON object per line otherwise.

    ``live(text)`` shows a transient status (task counts): rewritten in place on a terminal; in JSON mode a record
    with ``"live": true`` at most every ``LOG_EVERY_SECONDS``."""

    def __init__(self, command: str, human: bool, stream: Optional[TextIO] = None) -> None:
        self.command = command
        self.human = human
        self.stream = stream if stream is not None else sys.stderr
        self._live_shown = False
        self._last_live = 0.0
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        self.say(message)

    def say(self, message: str, **fields: Any) -> None:
        with self._lock:
            if self.human:
                self._clear_live()
                print(message, file=self.stream, flush=True)
            else:
                self._json(message, fields)

    def live(self, text: str) -> None:
        with self._lock:
            if self.human:
                self.stream.write("\r\x1b[K" + text)
                self.stream.flush()
                self._live_shown = True
            elif time.monotonic() - self._last_live >= LOG_EVERY_SECONDS:
                self._last_live = time.monotonic()
                self._json(text, {"live": True})

    def end_live(self) -> None:
        with self._lock:
            self._clear_live()

    def _clear_live(self) -> None:
        if self._live_shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._live_shown = False

    def _json(self, message: str, fields: dict[str, Any]) -> None:
        record = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": "info",
                  "command": self.command, "message": message, **fields}
        print(json.dumps(record, ensure_ascii=False, default=str), file=self.stream, flush=True)


def task_counts(tracker) -> Optional[tuple[int, int, int, int]]:
    """(active stages, tasks done, tasks running, tasks total) of what Spark runs now; None when idle."""
    stages = done = running = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is None:
            continue
        stages += 1
        done += info.numCompletedTasks
        running += info.numActiveTasks
        total += info.numTasks
    return (stages, done, running, total) if stages else None


def counts_text(label: str, counts: tuple[int, int, int, int], seconds: float) -> str:
    stages, done, running, total = counts
    return (f"{label}: {done}/{total} Spark tasks done, {running} running "
            f"({stages} stage{'s' if stages != 1 else ''}, {seconds:.0f} s)")


@contextmanager
def spark_tasks(spark, say: Optional[Say], label: str) -> Iterator[None]:
    """Show Spark's task counts while the block runs (see the module doc); nothing without ``spark`` or ``say``."""
    if spark is None or say is None:
        yield
        return
    live = getattr(say, "live", None)
    stop = threading.Event()
    started = time.monotonic()

    def poll() -> None:
        last_logged = started
        try:
            tracker = spark.sparkContext.statusTracker()
            while not stop.wait(POLL_SECONDS):
                counts = task_counts(tracker)
                if counts is None:
                    continue
                text = counts_text(label, counts, time.monotonic() - started)
                if live is not None:
                    live(text)
                elif time.monotonic() - last_logged >= LOG_EVERY_SECONDS:
                    last_logged = time.monotonic()
                    say(text)
        except Exception:  # noqa: BLE001 - progress must never fail the step (e.g. the JVM going away at exit)
            return

    thread = threading.Thread(target=poll, name="lakehouse-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
        end = getattr(say, "end_live", None)
        if end is not None:
            end()
