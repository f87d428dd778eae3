"""pyspark's ``functions`` (``F.col``, ``F.when``...) looked up in the JVM once per name, not once per call.

Why: each call of a ``pyspark.sql.functions`` function finds its JVM method by two gateway round trips before the
one that calls it: the class ``org.apache.spark.sql.functions`` by its full name (the gateway resolves it by
reflection every time), then the method by name on it. A run builds its change sets from thousands of such calls
(one Spark plan per column layout: every table of its own columns is one): the lookups were an eighth of the
driver JVM's gateway-thread time, and a run of 204 tables of distinct columns spent 54-62 s in its write jobs
with them remembered against 63-65 s without (two interleaved pairs, 20k transactions).

The method object py4j returns is a handle on the gateway it came from: the functions remembered are those of one
gateway, and a ``SparkContext`` of another (a new one) starts them afresh.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

_FUNCTIONS_CLASS = "org.apache.spark.sql.functions"


class _Remembered:
    """The JVM methods of ``org.apache.spark.sql.functions`` looked up through one gateway, by name."""

    def __init__(self) -> None:
        self.gateway: Any = None
        self.functions: dict[str, Callable] = {}
        self.lock = threading.Lock()


_remembered = _Remembered()


def jvm_function(name: str, sc: Any) -> Callable:
    """The JVM function ``name`` of ``sc``'s gateway, as pyspark's ``_get_jvm_function`` finds it, remembered."""
    with _remembered.lock:
        if _remembered.gateway is not sc._gateway:
            _remembered.gateway, _remembered.functions = sc._gateway, {}
        function = _remembered.functions.get(name)
    if function is None:
        function = getattr(getattr(sc._jvm, _FUNCTIONS_CLASS), name)
        with _remembered.lock:
            if _remembered.gateway is sc._gateway:
                _remembered.functions[name] = function
    return function


def remember_jvm_functions() -> None:
    """Make pyspark's ``functions`` find their JVM methods with ``jvm_function`` (idempotent)."""
    from pyspark.sql.functions import builtin

    builtin._get_jvm_function = jvm_function
