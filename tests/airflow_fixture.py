"""A real Airflow for tests: a throw-away ``AIRFLOW_HOME`` with a SQLite metadata DB, the repo's dags/ and plugins/.

Airflow reads its configuration once, when ``airflow`` is first imported, so importing this module sets the
environment first. ``airflow_db`` (session) creates the metadata tables, as
``airflow db migrate`` does; ``dag.test()`` needs them (it runs tasks in-process, in the test's own thread, so an
in-process Spark session of the test is reused by the tasks).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
DAGS = REPO / "dags"
PLUGINS = REPO / "plugins"

if str(PLUGINS) not in sys.path:
    sys.path.append(str(PLUGINS))

if "airflow" not in sys.modules:
    # never the developer's own AIRFLOW_HOME (initdb would touch its database); subprocesses reuse the parent's
    _home = os.environ.get("LAKEHOUSE_TEST_AIRFLOW_HOME")
    if not _home:
        _home = tempfile.mkdtemp(prefix="lakehouse-airflow-test-")
        os.environ["LAKEHOUSE_TEST_AIRFLOW_HOME"] = _home
        atexit.register(shutil.rmtree, _home, True)
    os.environ.update({
        "AIRFLOW_HOME": _home,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{Path(_home) / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    })


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """The metadata DB, created once per test session; yields ``AIRFLOW_HOME``."""
    from airflow.utils import db

    db.initdb()
    yield Path(os.environ["AIRFLOW_HOME"])


def ensure_pools(settings) -> list[str]:
    """Create the per-changefeed merge pools, as ``airflow pools import`` would in a deployment."""
    from airflow.models.pool import Pool

    from lakehouse_airflow.pools import pool_definitions

    names = []
    for name, spec in pool_definitions(settings).items():
        Pool.create_or_update_pool(name, spec["slots"], spec["description"], spec["include_deferred"])
        names.append(name)
    return names


def dag_bag(**kwargs):
    """Parse the repo's dags/ folder with the current environment (a fresh import of every DAG file)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(str(DAGS), **kwargs)
