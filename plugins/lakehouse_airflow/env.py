"""Where Airflow lives for this project: ``$LAKEHOUSE_HOME/airflow``, with the repo's ``dags/`` and ``plugins/``.

Standard library only (no Airflow, no ticdc_lakehouse): it must run *before* Airflow is imported, because Airflow
reads ``AIRFLOW_HOME`` and its ``AIRFLOW__*`` settings once, at import. Keeping Airflow's home under
``LAKEHOUSE_HOME`` means one deployment's metadata DB, logs and config sit beside its warehouse and landing zone
and are removed with them.

``python plugins/lakehouse_airflow/env.py`` prints ``export`` lines (``scripts/airflow_env.sh`` evals them).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Mapping, Optional

#: the repository root (``plugins/lakehouse_airflow/env.py`` -> ``.``)
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = PROJECT_ROOT / "dags"
#: tasks a local Airflow (``airflow standalone``) runs at once
LOCAL_PARALLELISM = 4
PLUGINS_FOLDER = PROJECT_ROOT / "plugins"


def lakehouse_home(environ: Optional[Mapping[str, str]] = None) -> Path:
    """``LAKEHOUSE_HOME`` resolved exactly as ``ticdc_lakehouse.runtime.config.load_settings`` resolves it."""
    environ = os.environ if environ is None else environ
    return Path(environ.get("LAKEHOUSE_HOME") or "./.lakehouse").expanduser().resolve()


def airflow_env(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment variables that point Airflow at this repo and at ``$LAKEHOUSE_HOME/airflow``.

    Values already set in ``environ`` win (docker-compose sets its own PostgreSQL database, for example), except
    ``LAKEHOUSE_HOME`` which is made absolute: the scheduler, the dag-processor and every task process must agree
    on it whatever their working directory.
    """
    environ = os.environ if environ is None else environ
    home = lakehouse_home(environ)
    airflow_home = Path(environ.get("AIRFLOW_HOME") or home / "airflow")
    python_path = [str(PLUGINS_FOLDER), str(PROJECT_ROOT)]
    existing = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in python_path]
    wanted = {
        "LAKEHOUSE_HOME": str(home),
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # the LocalExecutor starts this many worker processes up front (Airflow's default 32: ~4 GiB of idle
        # workers); a local deployment runs a few tasks at once, each merge with its own Spark driver
        "AIRFLOW__CORE__PARALLELISM": str(LOCAL_PARALLELISM),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        # spark-submit and the venv's tools must be found by task processes too
        "PATH": os.pathsep.join(dict.fromkeys([str(Path(sys.executable).parent)]
                                              + environ.get("PATH", os.defpath).split(os.pathsep))),
        "PYTHONPATH": os.pathsep.join(python_path + existing),
    }
    result = {}
    for key, value in wanted.items():
        keep_existing = key not in ("LAKEHOUSE_HOME", "PATH", "PYTHONPATH") and environ.get(key)
        result[key] = environ[key] if keep_existing else value
    return result


def apply_airflow_env(environ: Optional[dict[str, str]] = None) -> dict[str, str]:
    """Set :func:`airflow_env` into ``environ`` (``os.environ`` by default) and create ``AIRFLOW_HOME``."""
    target = os.environ if environ is None else environ
    values = airflow_env(target)
    target.update(values)
    Path(values["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
    return values


def shell_exports(values: Mapping[str, str]) -> str:
    return "\n".join(f"export {key}={shlex.quote(value)}" for key, value in values.items())


def main() -> int:
    print(shell_exports(airflow_env()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
