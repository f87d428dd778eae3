"""``lakehouse run --every SECONDS``: scheduled cycles in one long-lived driver.

Why: every ``lakehouse run`` (and every Airflow task) starts a driver JVM of its own, which loads, compiles and
generates its code again before it does any work: a 275k-event backfill took 14.5 s on a fresh driver and
8.3 s on one already warm (``bench/warm.py``). A deployment that merges all day
can keep one driver instead, as Kafka Connect and Flink keep their workers. Each cycle is the same
``pipeline.run_cycle`` the DAG runs (its own changefeed lock, its own checkpoint): a cycle is atomic and
idempotent, so stopping between cycles, or killing the process within one, loses nothing.

The loop stops at the first cycle that is not ok, with that cycle's exit code: the failure is printed like any
run's, and the supervisor (systemd, Docker's restart policy) starts a fresh process, which is also what clears
any state a failure left in the driver. SIGTERM (``docker stop``) lets the running cycle finish, then exits 0.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional


def run_every(cycle: Callable[[], dict], report: Callable[[dict], int], every_s: float,
              cycles: Optional[int] = None, stop: Optional[threading.Event] = None) -> int:
    """Run ``cycle`` and ``report`` its result (which gives the cycle's exit code) every ``every_s`` seconds,
    start to start (a cycle longer than that is followed at once), until ``cycles`` cycles ran or ``stop`` is set.

    :param cycle: one land-and-merge cycle, returning its result (``ok`` false when it failed)
    :param report: prints a result and returns its exit code (0 when ok)
    :param every_s: seconds from the start of one cycle to the start of the next
    :param cycles: stop after this many cycles (None: until ``stop`` or a failure)
    :param stop: set (by SIGTERM) to stop once the running cycle is done
    :return: the exit code of the first cycle that failed, else 0
    """
    stop = stop or threading.Event()
    done = 0
    while not stop.is_set():
        started = time.monotonic()
        code = report(cycle())
        done += 1
        if code != 0:
            return code
        if cycles is not None and done >= cycles:
            break
        stop.wait(max(0.0, every_s - (time.monotonic() - started)))
    return 0


@contextmanager
def stop_on_sigterm() -> Iterator[threading.Event]:
    """An event SIGTERM sets (instead of ending the process mid-cycle) while the block runs; the previous handler
    after it. Only the main thread can install a handler: elsewhere the event is returned unwired."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
