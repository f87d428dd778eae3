"""Expected mistakes are found before any work starts and said in one line (``lakehouse`` as a user runs it)."""

from __future__ import annotations

import socket
from pathlib import Path
import time

import pytest

from tests.test_cli import cli_env, run  # noqa: F401 - cli_env: the fixture


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return lines[0]


def _archive(tmp_path):
    from ticdc_lakehouse.sim.workload import Workload, write_to_archive

    workload = Workload(seed=3, partitions=1)
    workload.create_sample_tables()
    workload.transaction(2)
    workload.resolve(final=True)
    write_to_archive(workload, tmp_path / "archive", "ticdc", "open")
    return tmp_path / "archive"


def test_a_wrong_protocol_name_is_one_line_before_anything_lands(cli_env, tmp_path):
    archive = _archive(tmp_path)
    started = time.monotonic()
    line = _one_error_line(run(["backfill", "--archive", str(archive), "--protocol", "opn"], cli_env, check=False))
    assert time.monotonic() - started < 20  # no JVM was started
    assert "unknown protocol 'opn' (--protocol)" in line and "open" in line and "simple-json" in line
    assert not (tmp_path / "home" / "landing").exists()  # nothing landed


def test_a_wrong_protocol_in_the_config_names_the_setting(cli_env, tmp_path):
    config = tmp_path / "lakehouse.toml"
    config.write_text('[changefeeds.shop]\nprotocol = "canal"\ntopics = ["t"]\n')
    line = _one_error_line(run(["--config", str(config), "merge"], cli_env, check=False))
    assert "unknown protocol 'canal' (changefeeds.shop.protocol)" in line


def test_an_unwritable_catalog_path_says_catalog_and_which_setting(cli_env, tmp_path):
    (tmp_path / "blocker").write_text("a file where a directory should be")
    cli_env["LAKEHOUSE_CATALOG_URI"] = f"jdbc:sqlite:{tmp_path / 'blocker' / 'lake' / 'catalog.db'}"
    line = _one_error_line(run(["backfill", "--archive", str(_archive(tmp_path))], cli_env, check=False))
    assert line.startswith("error: catalog: ") and str(tmp_path / "blocker") in line
    assert "LAKEHOUSE_CATALOG_URI" in line


def test_an_unwritable_landing_zone_is_named(cli_env, tmp_path):
    (tmp_path / "blocker").write_text("")
    cli_env["LAKEHOUSE_LANDING"] = str(tmp_path / "blocker" / "landing")
    line = _one_error_line(run(["merge"], cli_env, check=False))
    assert line.startswith("error: landing zone: ") and "LAKEHOUSE_LANDING" in line


def test_a_broker_that_is_down_is_one_line_naming_the_servers_within_seconds(cli_env, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "lakehouse.toml"
    config.write_text(f'[changefeeds.shop]\nprotocol = "open"\ntopics = ["ticdc-shop"]\n'
                      f'bootstrap_servers = "127.0.0.1:{port}"\n')
    for command in ("run", "land"):
        started = time.monotonic()
        line = _one_error_line(run(["--config", str(config), command], cli_env, check=False))
        assert time.monotonic() - started < 15
        assert f"127.0.0.1:{port}" in line and "changefeeds.shop.bootstrap_servers" in line
        assert line.startswith("error: Kafka: no bootstrap server of changefeed shop")


def test_verbose_shows_the_trace(cli_env, tmp_path):
    result = run(["-v", "backfill", "--archive", str(_archive(tmp_path)), "--protocol", "opn"], cli_env, check=False)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "PreflightError" in result.stderr


def test_a_missing_archive_is_one_line(cli_env, tmp_path):
    line = _one_error_line(run(["backfill", "--archive", str(tmp_path / "nope")], cli_env, check=False))
    assert "archive directory" in line and "--archive" in line


@pytest.mark.parametrize("servers, expected", [
    ("kafka:9092", [("kafka", 9092)]),
    ("PLAINTEXT://a:1, b:2", [("a", 1), ("b", 2)]),
    ("[::1]:9092", [("::1", 9092)]),
])
def test_bootstrap_addresses(servers, expected):
    from ticdc_lakehouse.commands.preflight import bootstrap_addresses

    assert bootstrap_addresses(servers) == expected


def test_a_read_only_place_is_refused_even_for_root(tmp_path):
    """/proc accepts no new files, whoever asks (root passes every permission check)."""
    from ticdc_lakehouse.commands.preflight import PreflightError, check_writable

    with pytest.raises(PreflightError, match=r"^catalog: cannot write /proc/lakehouse/catalog\.db \(/proc is not "
                                             r"writable by this user\); set catalog\.uri"):
        check_writable(Path("/proc/lakehouse/catalog.db"), "catalog", "catalog.uri (LAKEHOUSE_CATALOG_URI)")
    check_writable(tmp_path / "new" / "catalog.db", "catalog", "catalog.uri")  # creatable: fine


def test_the_checks_before_the_jvm_starts_load_no_heavy_library(tmp_path):
    """A command starts its driver JVM right after its preflight: the checks must not load pyarrow or pandas
    (importing the landing package for its storage paths once took 0.6-0.9 s, and the JVM's start waited)."""
    import json
    import subprocess
    import sys
    import textwrap

    archive = _archive(tmp_path)
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from ticdc_lakehouse.commands.preflight import preflight
        from ticdc_lakehouse.runtime.config import load_settings
        settings = load_settings(env={{"LAKEHOUSE_HOME": {str(tmp_path / "home")!r}}})
        preflight(settings, None, "open", archive=Path({str(archive)!r}))
        print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'pandas', 'pyspark'))))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
