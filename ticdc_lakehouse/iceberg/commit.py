"""Spark writes whose Iceberg snapshot carries our properties, atomically with the data.

A MERGE is a SQL statement, so its snapshot summary can only be set through Iceberg's
``CommitMetadata.withCommitProperties(properties, callable, exception class)``: the statement runs inside a Java
``Callable`` that calls back into Python over py4j. The callback server is started once per session and must be
shut down before ``spark.stop()`` or the JVM waits on it forever.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Mapping


class _SqlCallable:
    """A ``java.util.concurrent.Callable`` that runs one Python function (py4j callback)."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work
        self.error: BaseException | None = None

    def call(self):  # noqa: D401 - Java interface
        try:
            self._work()
        except BaseException as exc:  # keep the Python traceback; py4j would only pass a string
            self.error = exc
            raise
        return None

    class Java:
        implements = ["java.util.concurrent.Callable"]


def ensure_callback_server(spark) -> None:
    gateway = spark.sparkContext._gateway
    if gateway._callback_server is None:
        gateway.start_callback_server()


def shutdown_callback_server(spark) -> None:
    gateway = spark.sparkContext._gateway
    if gateway._callback_server is not None:
        gateway.shutdown_callback_server()


def run_with_snapshot_properties(spark, properties: Mapping[str, str], work: Callable[[], None]) -> None:
    """Run ``work`` (Spark SQL writes) so that every Iceberg snapshot it commits carries ``properties``."""
    ensure_callback_server(spark)
    jvm = spark._jvm
    java_props = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_props.put(str(key), str(value))
    callable_ = _SqlCallable(work)
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_props, callable_, jvm.java.lang.RuntimeException._java_lang_class
        )
    except Exception:
        if callable_.error is not None:
            raise callable_.error from None
        raise


@contextmanager
def callback_session(spark) -> Iterator[None]:
    """Use around a run: the callback server lives for the run and is always shut down."""
    try:
        yield
    finally:
        shutdown_callback_server(spark)
