"""``LakehouseSparkSubmitHook`` and what a spark-submit merge needs: the job, its arguments, plan and environment.

Why here and not in the operator: these are the "how to call Spark" half of the merge, pure functions of the
Settings, tested without Airflow running a task; the operator only decides between in-process and spark-submit.
No secret ever goes on the command line: the job resolves the same Settings from its environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from lakehouse_airflow.env import PROJECT_ROOT

MERGE_JOB = str(PROJECT_ROOT / "spark_jobs" / "merge_job.py")
BACKFILL_JOB = str(PROJECT_ROOT / "spark_jobs" / "backfill_job.py")


def submit_arguments(settings, changefeed: str, protocol: Optional[str], stop_ts: Optional[int],
                     result_file: str) -> list[str]:
    """``merge_job.py`` arguments for one merge (pure)."""
    args = ["--changefeed", changefeed, "--result-file", result_file]
    if protocol:
        args += ["--protocol", str(protocol)]
    if stop_ts not in (None, ""):
        args += ["--stop-ts", str(int(stop_ts))]
    return args


def submit_plan(settings, app_name: str) -> dict[str, Any]:
    """What spark-submit needs, from ``spark_plan``: no secret ever goes on the command line.

    The catalog password (and any other secret-looking Spark setting) is left out of ``--conf``: the job
    resolves the same Settings from its environment and ``get_spark`` sets them inside the driver.
    """
    from ticdc_lakehouse.core.redaction import is_secret_key
    from ticdc_lakehouse.runtime.spark_session import session_plan

    plan = session_plan(settings, app_name)
    conf = {key: value for key, value in plan.conf.items() if not is_secret_key(key)}
    return {
        "master": plan.master,
        "name": plan.app_name,
        "conf": conf,
        "jars": ",".join(plan.jars),
        "driver_class_path": os.pathsep.join(plan.jars),
        "driver_memory": settings.spark.driver_memory,
        "executor_memory": settings.spark.executor_memory,
    }


def job_environment(settings, overrides: Mapping[str, str]) -> dict[str, str]:
    """The environment of a spark-submit job: same deployment, same config file, same secrets, venv tools first."""
    env = dict(overrides)  # the rest of the worker's environment is inherited by spark-submit
    env["LAKEHOUSE_HOME"] = str(settings.home)
    if settings.source_file is not None:
        env["LAKEHOUSE_CONFIG"] = str(settings.source_file)
    env["PYSPARK_PYTHON"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
    env["PATH"] = os.pathsep.join(dict.fromkeys([str(Path(sys.executable).parent)]
                                                + os.environ.get("PATH", os.defpath).split(os.pathsep)))
    return env


class LakehouseSparkSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` that submits to the lakehouse config's ``spark.master``.

    The provider takes the master from an Airflow connection (``spark_default``, else YARN); the lakehouse
    config is the single place the master is set, so it wins. The connection, when it exists, still contributes
    its extras (``deploy-mode``, ``spark-binary``, ...).

    :param master: the Spark master to submit to (``spark.master`` of the lakehouse config)
    :param kwargs: the provider's ``SparkSubmitHook`` arguments (conf, jars, application_args, env_vars, ...)
    """

    def __init__(self, *, master: str, **kwargs: Any) -> None:
        self._lakehouse_master = master
        super().__init__(**kwargs)

    def _resolve_connection(self) -> dict[str, Any]:
        data = super()._resolve_connection()
        data["master"] = self._lakehouse_master
        return data
