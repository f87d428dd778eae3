"""Where the JVM parts of an installation live: pyspark's jars, and beside the virtualenv the project's own (one
folder per ``jvm/<name>/`` pom, the unsigned copies), the class archive and the kept driver commands.

Its own module because the session factory (``spark_session``), the class archive (``jvm_archive``), the driver's
start (``driver_launch``) and setup's steps (``unsigned_jars``) all need it, and none should import another for it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

#: where the jar folders are when not in the virtualenv (the Docker image, whose Python prefix is root's)
JARS_DIR_ENV = "LAKEHOUSE_JVM_JARS"


def installation_dir() -> Path:
    """The virtualenv's ``share/ticdc-lakehouse``: what setup and the runs keep beside the installation."""
    return Path(sys.prefix) / "share" / "ticdc-lakehouse"


def jvm_jar_dir(name: str = "runtime") -> Path:
    """Where ``make setup`` puts the verified jars of ``jvm/<name>/pom.xml``: inside the virtualenv (or under
    ``$LAKEHOUSE_JVM_JARS``)."""
    root = os.environ.get(JARS_DIR_ENV)
    return (Path(root) if root else installation_dir() / "jars") / name


def spark_jars_dir() -> Optional[Path]:
    """pyspark's ``jars`` folder, or None without pyspark."""
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent / "jars"
