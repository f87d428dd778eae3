"""Cuts by TSO and by time, and the SQL rewrite that points every table at its snapshot in a cut."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ticdc_lakehouse.runtime.state import Checkpoint
from ticdc_lakehouse.commands.timetravel import (
    AsOfError,
    choose_cut,
    datetime_to_tso,
    parse_time,
    rewrite_as_of,
    tso_to_datetime,
)

# a real TSO from the TiBigData vectors: physical time 2021-03-12 02:18:19 UTC
TSO = 423497695015731209


def test_tso_physical_part_is_upstream_wall_clock():
    assert tso_to_datetime(TSO).strftime("%Y-%m-%d %H:%M:%S") == "2021-03-12 02:18:19"


def test_time_to_tso_covers_every_commit_in_that_millisecond():
    moment = tso_to_datetime(TSO)
    assert datetime_to_tso(moment) >= TSO
    assert datetime_to_tso(moment) >> 18 == TSO >> 18
    assert parse_time("2021-03-12 02:18:19") == datetime(2021, 3, 12, 2, 18, 19)
    assert datetime_to_tso(parse_time("2021-03-12 02:18:19+00:00")) == datetime_to_tso(
        datetime(2021, 3, 12, 2, 18, 19, tzinfo=timezone.utc))
    with pytest.raises(AsOfError):
        parse_time("yesterday")


def test_choose_the_greatest_cut_not_after_the_tso():
    cuts = [Checkpoint("cf", resolved_ts=ts, tables={"s.t": ts}) for ts in (100, 200, 300)]
    assert choose_cut(cuts, 250).resolved_ts == 200
    assert choose_cut(cuts, 300).resolved_ts == 300
    with pytest.raises(AsOfError, match="beyond what has been applied"):
        choose_cut(cuts, 301)
    with pytest.raises(AsOfError, match="before the first applied cut"):
        choose_cut(cuts, 99)


def test_rewrite_points_each_table_at_its_snapshot_and_keeps_the_rest():
    sql = rewrite_as_of(
        "WITH x AS (SELECT id FROM shop.orders o WHERE o.id > 1) "
        "SELECT c.name, count(*) FROM shop.Customers c JOIN x ON x.id = c.id GROUP BY c.name",
        {"shop.orders": 11, "shop.customers": 22},
        "lake",
    )
    assert "`shop`.`orders`.`snapshot_id_11`" in sql
    assert "`shop`.`customers`.`snapshot_id_22`" in sql
    assert "FROM x" in sql or "JOIN x" in sql


def test_rewrite_refuses_tables_that_did_not_exist_at_the_cut():
    with pytest.raises(AsOfError, match="did not exist"):
        rewrite_as_of("SELECT * FROM shop.later", {"shop.orders": 1}, "lake")
    with pytest.raises(AsOfError, match="schema-qualified"):
        rewrite_as_of("SELECT * FROM orders", {"shop.orders": 1}, "lake")


def test_rewrite_quotes_hostile_names():
    sql = rewrite_as_of("SELECT * FROM `we``ird`.`ta ble`", {"we`ird.ta ble": 5}, "lake")
    assert "`we``ird`.`ta ble`.`snapshot_id_5`" in sql
