"""One step over many tables a few at a time (runtime/parallel.py): results in order, at most N at once, errors
raised, one at a time in the calling thread."""

from __future__ import annotations

import threading
import time

import pytest

from ticdc_lakehouse.runtime.parallel import commits_at_once, map_at_most


def test_results_keep_the_items_order_and_at_most_n_run_at_once():
    running, peak, lock = [0], [0], threading.Lock()

    def step(item: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02 * (5 - item % 5))  # later items finish first
        with lock:
            running[0] -= 1
        return item * 10

    assert map_at_most(step, range(12), 3, "test") == [i * 10 for i in range(12)]
    assert peak[0] == 3


def test_the_first_error_raises_after_every_step_ran():
    ran = []

    def step(item: int) -> int:
        ran.append(item)
        if item in (2, 4):
            raise ValueError(f"table {item}")
        return item

    with pytest.raises(ValueError, match="table 2"):
        map_at_most(step, range(6), 3, "test")
    assert sorted(ran) == list(range(6))


def test_one_at_a_time_runs_in_the_calling_thread():
    caller = threading.current_thread()
    assert map_at_most(lambda item: threading.current_thread() is caller, [1, 2, 3], 1, "test") == [True] * 3
    assert map_at_most(lambda item: threading.current_thread() is caller, [1], 4, "test") == [True]


def test_catalog_commits_run_twice_parallel_tables_at_once_and_one_stays_one():
    assert [commits_at_once(n) for n in (1, 2, 4)] == [1, 4, 8]
