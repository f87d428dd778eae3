"""Classes, packages and static methods of the driver's JVM looked up once per gateway (runtime/jvm_names.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from py4j.protocol import Py4JError

from ticdc_lakehouse.runtime import jvm_names

pytestmark = pytest.mark.spark

LOOKUPS = ("r\nu\n", "r\nm\n")  # py4j's reflection commands: a name of a view or package, a member of a class


@pytest.fixture()
def view_and_lookups(spark_session, monkeypatch):
    """A fresh JVM view of the session's gateway, remembering names, and the lookups its client sends."""
    sc = spark_session.sparkContext
    holder = SimpleNamespace(_jvm=sc._gateway.new_jvm_view())
    jvm_names.remember_jvm_names(holder)
    client = holder._jvm._gateway_client
    real_send = client.send_command
    sent: list[str] = []

    def send(command, *args, **kwargs):
        if command.startswith(LOOKUPS) and ("java.util.Collections" in command or "java.lang.Integer" in command):
            sent.append(command)
        return real_send(command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", send)
    return holder._jvm, sent


def test_a_class_and_its_static_methods_are_looked_up_once_and_still_work(view_and_lookups):
    view, sent = view_and_lookups
    assert list(view.java.util.Collections.nCopies(2, "x")) == ["x", "x"]
    first = len(sent)
    assert first >= 2  # the class, then its method
    assert list(view.java.util.Collections.nCopies(3, "y")) == ["y", "y", "y"]
    assert view.java.util.Collections.emptyList().size() == 0
    assert len(sent) == first + 1  # only the new method: the class and nCopies are remembered
    assert view.java.util.Collections is view.java.util.Collections


def test_a_static_fields_value_and_an_unknown_member_are_asked_every_time(view_and_lookups):
    view, sent = view_and_lookups
    assert view.java.lang.Integer.MAX_VALUE == 2**31 - 1
    asked = len(sent)
    assert view.java.lang.Integer.MAX_VALUE == 2**31 - 1  # a field's value may change: asked again
    assert len(sent) == asked + 1
    for _ in range(2):
        with pytest.raises(Py4JError):
            view.java.lang.Integer.noSuchMember  # noqa: B018 - the lookup is the test
    assert len(sent) == asked + 3


def test_the_sessions_view_remembers_and_spark_still_runs(spark_session):
    from pyspark.sql import functions as F

    assert type(spark_session.sparkContext._jvm).__name__ == "_RememberingView"
    jvm_names.remember_jvm_names(spark_session.sparkContext)  # idempotent
    rows = spark_session.range(3).select(F.array("id", F.lit(1)).alias("a")).orderBy("id").collect()
    assert [r["a"] for r in rows] == [[0, 1], [1, 1], [2, 1]]


def test_pysparks_functions_are_looked_up_once_per_gateway_and_columns_still_compute(spark_session, monkeypatch):
    from pyspark.sql import functions as F

    F.upper(F.lit("a")), F.when(F.lit(True), "z")  # first uses: looked up, then remembered
    client = spark_session.sparkContext._jvm._gateway_client
    real_send = client.send_command
    sent: list[str] = []

    def send(command, *args, **kwargs):
        if command.startswith(LOOKUPS) and "org.apache.spark.sql.functions" in command:
            sent.append(command)
        return real_send(command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", send)
    row = spark_session.range(1).select(F.upper(F.lit("a")).alias("u"), F.when(F.col("id") == 0, "z").alias("w"))
    assert row.first().asDict() == {"u": "A", "w": "z"}
    assert sent == []  # neither the functions class nor its methods asked again
