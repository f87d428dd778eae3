"""One table's work in a run (merge/table_work.py): whether a ts range holds rows, answered from the decode
tasks' aggregates where they can answer, by one Spark job over the cached events only where they cannot."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ticdc_lakehouse.merge.plan import table_key
from ticdc_lakehouse.merge.staged_stats import TableStats
from ticdc_lakehouse.merge.table_work import has_rows

KEY = table_key("app", "a")


class UnreadEvents:
    """The cached events of a run whose questions the aggregates answer: reading them fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the cached events were read ({name}) for a question the aggregates answer")


def ctx_with(min_ts: int, max_ts: int) -> SimpleNamespace:
    stats = TableStats("app", "a", 10, min_ts, max_ts, [], ["id"], None, True, {})
    return SimpleNamespace(row_stats={KEY: stats}, range_checks={}, events=UnreadEvents())


@pytest.mark.parametrize(("lower", "upto", "expected"), [
    (300, 400, False),  # every row at or below lower
    (0, 50, False),  # every row above upto
    (0, 300, True),  # every row in range
    (150, 400, True),  # a TRUNCATE at 150: the last row (300) is above it
    (50, 150, True),  # a DDL at 151: the first row (100) is below it
])
def test_a_range_the_first_or_last_row_falls_in_is_answered_without_a_job(lower, upto, expected):
    assert has_rows(ctx_with(100, 300), KEY, lower, upto) is expected


def test_a_range_strictly_inside_the_rows_and_made_up_ts_ask_the_events():
    for ctx, lower, upto in ((ctx_with(100, 300), 150, 250), (ctx_with(0, 300), 150, 400)):
        with pytest.raises(AssertionError, match="cached events were read"):
            has_rows(ctx, KEY, lower, upto)
