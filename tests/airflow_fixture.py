"""A real Airflow for tests: a throw-away ``AIRFLOW_HOME`` with a SQLite metadata DB, the repo's dags/ and plugins/.

Airflow reads its configuration once, when ``airflow`` is first imported, so importing this module sets the
environment first. ``airflow_db`` (session) creates the metadata tables, as
``airflow db migrate`` does; ``dag.test()`` needs them (it runs tasks in-process, in the test's own thread, so an
in-process Spark session of the test is reused by the tasks).
"""

from __future__ import annotations

import atexit
import json
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
        # OpenLineage events of every task go to a file the tests read (the provider reads this once per process);
        # emitted from a thread, not a fork of a process that runs a JVM
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(Path(_home) / "openlineage.jsonl"), "append": True}),
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
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


def lineage_events() -> list[dict]:
    """The OpenLineage events emitted so far in this test session (see the file transport above)."""
    path = Path(os.environ["AIRFLOW_HOME"]) / "openlineage.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sync_dag(dag, paused: bool = False) -> None:
    """Write a DAG defined in a test to the metadata DB, as the dag-processor does for a DAG file, unpaused: a
    DAG scheduled on assets is then queued by their events, and ``dag.test()`` finds it."""
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.models.dag import DagModel
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    from airflow.dag_processing.bundles.manager import DagBundlesManager

    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    with create_session() as session:
        update_dag_parsing_results_in_db("dags-folder", None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(),
                                         session=session)
    with create_session() as session:
        session.query(DagModel).filter(DagModel.dag_id == dag.dag_id).update({"is_paused": paused})
