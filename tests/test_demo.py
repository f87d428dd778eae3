"""``lakehouse demo`` as a newcomer runs it: it checks itself, shows each run's summary and says where to go next."""

from __future__ import annotations

import re

import pytest

from tests.test_cli import cli_env, run  # noqa: F401 - cli_env: the fixture


@pytest.mark.spark
def test_demo_ends_ok_and_prints_where_to_go_next(cli_env, tmp_path):
    out = run(["demo"], cli_env).stdout
    assert re.search(r"demo OK in \d+ s", out), out[-3000:]
    assert len(re.findall(r"consistent up to TSO \d+", out)) == 2  # each backfill's summary
    home = tmp_path / "home" / "demo"
    assert "Where to go next" in out
    assert f"LAKEHOUSE_HOME={home} .venv/bin/lakehouse status --no-kafka" in out
    first = re.search(r"consistent up to TSO (\d+)", out).group(1)
    assert f"--as-of-tso {first}   # time travel" in out
    assert "airflow dags unpause lakehouse_backfill" in out and str(home / "archive") in out
