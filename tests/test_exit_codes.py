"""What a cron job or CI sees: exit codes and one-line errors of `lakehouse` run as a subprocess (issues 19.9,
19.11, 20.8)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.postgres_fixture import postgres_url  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
LAKEHOUSE = [sys.executable, "-m", "ticdc_lakehouse.commands.cli"]


def lakehouse(args, env, cwd=ROOT, timeout=600):
    return subprocess.run(LAKEHOUSE + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env["LAKEHOUSE_HOME"] = str(tmp_path / "home")
    return env


def test_a_misspelled_key_is_an_error_naming_the_right_one_before_any_work(clean_env, tmp_path):
    config = tmp_path / "lakehouse.toml"
    config.write_text('[changefeeds.shop]\nprotocol = "open"\nbootstrap_server = "kafka.example:9092"\n')
    result = lakehouse(["--config", str(config), "status", "--no-kafka"], clean_env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'bootstrap_server'" in lines[0] and "did you mean 'bootstrap_servers'?" in lines[0]
    assert str(config) in lines[0]
    assert not (tmp_path / "home").exists()  # nothing was started or created


def test_a_misspelled_environment_override_is_an_error_too(clean_env, tmp_path):
    clean_env["LAKEHOUSE__MERGE__ON_UNDECODEABLE"] = "hold"
    result = lakehouse(["status", "--no-kafka"], clean_env)
    assert result.returncode != 0
    line = result.stderr.strip()
    assert "LAKEHOUSE__MERGE__ON_UNDECODEABLE" in line and "did you mean 'on_undecodable'?" in line
    assert "\n" not in line and not (tmp_path / "home").exists()


def test_valid_keys_of_every_section_are_accepted(tmp_path):
    from ticdc_lakehouse.runtime.config import load_settings

    config = tmp_path / "c.toml"
    config.write_text(
        '[spark]\nmaster = "local[2]"\n[spark.conf]\n"spark.sql.anything" = "1"\n'
        '[merge]\nwrite_mode = "copy-on-write"\n[maintenance]\nlanding_retention_hours = 2\n'
        '[airflow]\nmerge_pools = false\n[changefeeds.shop]\nbootstrap_servers = "k:9092"\nresolved_ts = "none"\n'
        '[changefeeds.shop.kafka]\n"security.protocol" = "SASL_SSL"\n[tables."shop.orders"]\nbucket_count = 4\n'
    )
    settings = load_settings(config, env={"LAKEHOUSE_HOME": str(tmp_path),
                                          "LAKEHOUSE__CHANGEFEEDS__SHOP__KAFKA__SASL.MECHANISM": "PLAIN"})
    assert settings.changefeed("shop").kafka == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}


def test_backfill_of_a_directory_without_kafka_log_files_fails_and_says_what_is_expected(clean_env, tmp_path):
    archive = tmp_path / "archive"
    (archive / "orders").mkdir(parents=True)
    (archive / "orders" / "data.json").write_text("{}")
    result = lakehouse(["backfill", "--archive", str(archive)], clean_env)
    assert result.returncode != 0
    assert "no Kafka log files found" in result.stderr
    assert "<topic>-<partition>/<20-digit base offset>.log" in result.stderr
    assert '"ok": true' not in result.stdout


def test_a_held_lock_names_its_holder(settings):
    from ticdc_lakehouse.runtime.locks import changefeed_lock

    with changefeed_lock(settings, "default", purpose="maintenance"):
        result = lakehouse(["merge"], dict(os.environ), timeout=120)
    assert result.returncode != 0
    assert "not started: another maintenance (pid" in result.stderr and "holds its lock" in result.stderr
    assert "another merge" not in result.stderr


@pytest.mark.spark
def test_merge_exits_non_zero_when_it_did_not_apply_everything(spark, tmp_path):
    """A partition held at an undecodable message: the merge ran but is not through: `"ok": false`, exit 1."""
    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.sim.encode.open_protocol import OpenProtocolEncoder
    from ticdc_lakehouse.core.model import Position, ResolvedEvent
    from ticdc_lakehouse.commands.pipeline import backfill
    from tests.lake_helpers import create_app_table

    (tmp_path / "none.toml").write_text('[merge]\non_undecodable = "hold"\n')  # the fixture's config file
    settings = load_settings()
    at = Position("t", 0, 0)
    encoder = OpenProtocolEncoder()
    records = [(*encoder.encode(e), [], None) for e in create_app_table(at)]
    records.append((b"not json", b"{", [], None))
    records.append((*encoder.encode(ResolvedEvent(500, at)), [], None))
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: records})
    assert backfill(settings, archive, protocol="open", spark=spark)["ok"] is False
    result = lakehouse(["merge", "--protocol", "open"], dict(os.environ))
    assert '"ok": false' in result.stdout, result.stderr[-2000:]
    assert result.returncode == 1


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:  # a port on 127.0.0.1 nothing listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_broker_that_is_down_gives_one_line_not_a_flood(clean_env, tmp_path):
    port = _closed_port()
    config = tmp_path / "lakehouse.toml"
    config.write_text(f'[changefeeds.shop]\nbootstrap_servers = "127.0.0.1:{port}"\ntopics = ["orders"]\n')
    result = lakehouse(["--config", str(config), "land"], clean_env, timeout=300)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr:\n" + "\n".join(lines[:5])
    assert f"127.0.0.1:{port}" in lines[0] and "bootstrap_servers" in lines[0]


LAND_SCRIPT = """
import logging, sys
from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.commands.pipeline import land
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # as the CLI and an Airflow task log
try:
    land(load_settings(sys.argv[1]), "shop")
except Exception as exc:
    print(exc, file=sys.stderr)
    sys.exit(1)
"""


def test_landing_from_a_broker_that_is_down_names_the_cause_in_one_line(clean_env, tmp_path):
    """The library path (an Airflow task, no CLI preflight): librdkafka's thousand connection failures stay out
    of the log; the error names the cause and what to check."""
    port = _closed_port()
    config = tmp_path / "lakehouse.toml"
    # landing.kafka_timeout_seconds: a broker that never answers fails the landing after 5 s, not the default 60
    config.write_text(f'[landing]\nkafka_timeout_seconds = 5\n[changefeeds.shop]\n'
                      f'bootstrap_servers = "127.0.0.1:{port}"\ntopics = ["orders"]\n')
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", LAND_SCRIPT, str(config)], env=clean_env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert time.monotonic() - started < 50, "the configured timeout, not the default one, ended the landing"
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr:\n" + "\n".join(lines[:5])
    assert "Connection refused" in lines[0]  # the cause
    assert f"Check bootstrap_servers (127.0.0.1:{port})" in lines[0]  # what to check


@pytest.mark.spark
def test_a_dead_letter_keeps_the_raw_bytes_whole(spark, settings, tmp_path):
    """The README promises the raw bytes of an undecodable message: all of them, not the first 64 KiB."""
    import base64

    from ticdc_lakehouse.sim.archive_writer import write_archive
    from ticdc_lakehouse.commands.pipeline import backfill

    value = b"{" + bytes(range(256)) * 600  # 150 KiB that no protocol decodes
    archive = tmp_path / "archive"
    write_archive(archive, "t", {0: [(b"k" * 70_000, value, [], None)]})
    backfill(settings, archive, protocol="open", spark=spark)
    row = spark.sql("SELECT raw_key, raw_value FROM _lakehouse.dead_letters").collect()
    assert len(row) == 1
    assert base64.b64decode(row[0]["raw_value"]) == value
    assert base64.b64decode(row[0]["raw_key"]) == b"k" * 70_000


@pytest.mark.parametrize("changefeed", ["shop", "default"])  # lock ids of both signs
def test_the_postgres_advisory_lock_names_its_holder_too(postgres_url, tmp_path, changefeed):  # noqa: F811
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.locks import LockBusy, changefeed_lock

    uri, user, password = postgres_url
    settings = load_settings(env={"LAKEHOUSE_HOME": str(tmp_path), "LAKEHOUSE_CONFIG": "", "LAKEHOUSE_CATALOG_URI": uri,
                                  "LAKEHOUSE_CATALOG_USER": user, "LAKEHOUSE_CATALOG_PASSWORD": password})
    with changefeed_lock(settings, changefeed, purpose="maintenance"):
        with pytest.raises(LockBusy, match=rf"merge of changefeed '{changefeed}' not started: another maintenance "
                                           r"\(pid \d+\)"):
            with changefeed_lock(settings, changefeed):
                pass


_RUN_WITH_A_THREAD = """
import sys, threading, time
from ticdc_lakehouse.commands import cli

def main():
    def late():
        time.sleep(0.3)
        open(sys.argv[1], "w").write("done")
    threading.Thread(target=late).start()  # not a daemon: the normal exit would wait for it
    print("result printed")
    return 3

cli.main = main
cli.run()
"""


def test_the_command_ends_at_once_with_its_code_after_its_threads_and_output(clean_env, tmp_path):
    """``cli.run`` ends the process without the interpreter's teardown: the exit code is the command's, the printed
    result is all there, and a thread that is not a daemon still finished first, as with the normal exit."""
    marker = tmp_path / "thread-finished"
    result = subprocess.run([sys.executable, "-c", _RUN_WITH_A_THREAD, str(marker)], env=clean_env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert result.stdout == "result printed\n"
    assert marker.read_text() == "done"
