"""Canal-JSON without TiCDC's TiDB extension carries no resolved events (issue 19.10): the run and `lakehouse
status` say so and what to set, and setting it applies the rows."""

from __future__ import annotations

from pathlib import Path

import pytest

CANAL = Path(__file__).resolve().parents[2] / "shared" / "ticdc-vectors" / "canal-json"


@pytest.mark.spark
def test_a_stream_without_resolved_events_is_named_with_the_setting_that_applies_it(spark, tmp_path):
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.commands.pipeline import backfill
    from ticdc_lakehouse.commands.status import collect_status, render_status

    config = tmp_path / "none.toml"  # the fixture's config file
    config.write_text('[changefeeds.shop]\nprotocol = "canal-json"\ntopics = ["canal"]\n')
    settings = load_settings()
    # TiCDC's own Canal-JSON output without enable-tidb-extension (tiflow's terminator batch: 3 row events)
    value = (CANAL / "tiflow_TestCanalJSONBatchDecoderWithTerminator.value.txt").read_bytes()
    archive = tmp_path / "archive"
    write_archive(archive, "canal", {0: [(None, value, [], None)]})
    said: list[str] = []
    result = backfill(settings, archive, changefeed="shop", spark=spark, progress=said.append)
    assert result["merge"]["no_resolved_events"] == ["canal/0"]
    assert result["ok"] is False  # the command exits non-zero: nothing can be applied as configured
    hint = [line for line in said if "no resolved event was ever seen in canal/0" in line]
    assert hint and 'set resolved_ts = "none" in [changefeeds.shop]' in hint[0]
    assert "enable-tidb-extension=true" in hint[0]
    text = render_status(collect_status(settings, changefeed="shop", kafka=False, spark=spark))
    assert "NO RESOLVED EVENTS:" in text and 'resolved_ts = "none"' in text

    config.write_text('[changefeeds.shop]\nprotocol = "canal-json"\ntopics = ["canal"]\nresolved_ts = "none"\n')
    settings = load_settings()
    result = backfill(settings, archive, changefeed="shop", spark=spark)
    assert result["merge"]["no_resolved_events"] == [] and result["ok"] is True
    assert spark.sql("SELECT count(*) FROM test.employee").collect()[0][0] == 0  # inserted, updated, deleted
    status = collect_status(settings, changefeed="shop", kafka=False, spark=spark)
    assert status["changefeeds"][0]["no_resolved_events"] == []
    assert "NO RESOLVED EVENTS" not in render_status(status)
