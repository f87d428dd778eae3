"""Secrets never reach a process's command line, which every user of the machine reads (``ps -eo args``).

A real ``lakehouse`` command with a password-protected PostgreSQL catalog runs while the test reads every
process's ``/proc/PID/cmdline``: the Spark JVM is seen there, the password never is, and the command still
reaches the catalog (so the password did get to the JVM, by the Py4J socket).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.postgres_fixture import postgres_url  # noqa: F401
from ticdc_lakehouse.runtime.config import load_settings

ROOT = Path(__file__).resolve().parents[1]


def _command_lines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # the process ended meanwhile
    return lines


def test_plan_keeps_every_secret_out_of_the_jvm_arguments():
    settings = load_settings(env={
        "LAKEHOUSE_HOME": "/tmp/x", "LAKEHOUSE_CONFIG": "",
        "LAKEHOUSE_CATALOG_URI": "jdbc:postgresql://db:5432/lake?sslmode=require&password=in-uri-7c1",
        "LAKEHOUSE_CATALOG_USER": "lake", "LAKEHOUSE_CATALOG_PASSWORD": "pw-3a9",
        "LAKEHOUSE__SPARK__CONF__SPARK.HADOOP.FS.S3A.SECRET.KEY": "s3-5d2",
    })
    from ticdc_lakehouse.runtime.spark_session import spark_plan

    plan = spark_plan(settings)
    public = " ".join(f"{k}={v}" for k, v in plan.conf.items())
    for secret in ("in-uri-7c1", "pw-3a9", "s3-5d2"):
        assert secret not in public
        assert any(secret in value for value in plan.secrets.values())
    assert plan.conf["spark.sql.catalog.lake.type"] == "jdbc"


@pytest.mark.spark
def test_a_running_command_never_shows_the_catalog_password(postgres_url, tmp_path):  # noqa: F811
    uri, user, password = postgres_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update({"LAKEHOUSE_HOME": str(tmp_path / "home"), "LAKEHOUSE_CONFIG": str(tmp_path / "none.toml"),
                "LAKEHOUSE_CATALOG_URI": uri, "LAKEHOUSE_CATALOG_USER": user,
                "LAKEHOUSE_CATALOG_PASSWORD": password})
    (tmp_path / "none.toml").write_text("")
    process = subprocess.Popen(
        [sys.executable, "-m", "ticdc_lakehouse.commands.cli", "sql",
         "CREATE NAMESPACE IF NOT EXISTS secrets_probe; SHOW NAMESPACES"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    saw_jvm, leaks = False, []
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        for line in _command_lines():
            saw_jvm = saw_jvm or "org.apache.spark.deploy.SparkSubmit" in line
            if password in line:
                leaks.append(line[:300])
        time.sleep(0.05)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-2000:]
    assert saw_jvm, "the Spark JVM was never seen in the process list"
    assert leaks == []
    assert "secrets_probe" in out
    assert password not in out and password not in err
