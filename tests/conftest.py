"""Shared fixtures: one real Spark session per test process, a fresh deployment (catalog, warehouse, landing) per
test.

A Spark JVM costs ~10 s to start, so the session is shared by a process's tests (``make test`` runs two processes,
pytest-xdist, each test file in one of them); each test gets its own ``LAKEHOUSE_HOME`` and its own
catalog name (registered in the running session), so tests never see each other's tables.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
_catalog_ids = itertools.count(1)


#: the fixtures that start a real server process, and the marker their tests get (``-m "not broker"`` skips them)
SERVER_FIXTURES = {"kafka_broker": "broker", "private_broker": "broker", "schema_registry": "registry"}


def pytest_collection_modifyitems(items):
    """Mark every test by the real servers it takes, wherever its module imported the fixture from."""
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & set(SERVER_FIXTURES):
            item.add_marker(SERVER_FIXTURES[fixture])


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory):
    from ticdc_lakehouse.runtime.config import load_settings
    from ticdc_lakehouse.runtime.spark_session import get_spark

    home = tmp_path_factory.mktemp("spark-home")
    settings = load_settings(env={"LAKEHOUSE_HOME": str(home), "LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS": "2"})
    spark = get_spark(settings, "ticdc-lakehouse-tests")
    yield spark
    from ticdc_lakehouse.iceberg.commit import shutdown_callback_server

    shutdown_callback_server(spark)
    spark.stop()


@pytest.fixture
def lakehouse_env(tmp_path, monkeypatch):
    """A fresh deployment: ``LAKEHOUSE_HOME`` under tmp_path and a catalog name of its own."""
    home = tmp_path / "lakehouse"
    env = {
        "LAKEHOUSE_HOME": str(home),
        "LAKEHOUSE__CATALOG__NAME": f"lake_t{next(_catalog_ids)}",
        "LAKEHOUSE_CONFIG": str(tmp_path / "none.toml"),
    }
    (tmp_path / "none.toml").write_text("")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def settings(lakehouse_env):
    from ticdc_lakehouse.runtime.config import load_settings

    return load_settings()


@pytest.fixture
def spark(spark_session, settings):
    """The shared session with this test's catalog current."""
    from ticdc_lakehouse.runtime.spark_session import use_catalog

    # the session Spark's SQL settings resolve through on this thread (``SQLConf.get``: the thread's active session,
    # else the default one): a test that started and stopped a driver of its own may have left neither set
    sessions = spark_session._jvm.org.apache.spark.sql.SparkSession
    sessions.setActiveSession(spark_session._jsparkSession)
    sessions.setDefaultSession(spark_session._jsparkSession)
    use_catalog(spark_session, settings)
    return spark_session
