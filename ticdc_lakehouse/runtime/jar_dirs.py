"""Where the project's JVM jars live: one folder per ``jvm/<name>/`` pom (and the derived unsigned copies).

Its own module because both the session factory (``spark_session``) and setup's steps (``unsigned_jars``) need it,
and neither should import the other."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: where the jar folders are when not in the virtualenv (the Docker image, whose Python prefix is root's)
JARS_DIR_ENV = "LAKEHOUSE_JVM_JARS"


def jvm_jar_dir(name: str = "runtime") -> Path:
    """Where ``make setup`` puts the verified jars of ``jvm/<name>/pom.xml``: inside the virtualenv (or under
    ``$LAKEHOUSE_JVM_JARS``)."""
    root = os.environ.get(JARS_DIR_ENV)
    return (Path(root) if root else Path(sys.prefix) / "share" / "ticdc-lakehouse" / "jars") / name
