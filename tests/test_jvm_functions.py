"""pyspark's functions looked up in the JVM once per name (runtime/jvm_functions.py), in the shared session."""

from __future__ import annotations

import pytest

from ticdc_lakehouse.runtime import jvm_functions

pytestmark = pytest.mark.spark


def test_a_function_is_looked_up_once_per_gateway_and_columns_still_compute(spark_session, monkeypatch):
    from pyspark.sql import functions as F
    from pyspark.sql.functions import builtin

    assert builtin._get_jvm_function is jvm_functions.jvm_function  # installed when the session started
    monkeypatch.setattr(jvm_functions, "_remembered", jvm_functions._Remembered())
    sc = spark_session.sparkContext
    lookups = []
    real_getattr = getattr

    class CountingJvm:
        def __getattr__(self, name):
            lookups.append(name)
            return real_getattr(sc._jvm, name)

    class CountingContext:
        _gateway = sc._gateway
        _jvm = CountingJvm()

    first = jvm_functions.jvm_function("upper", CountingContext())
    assert jvm_functions.jvm_function("upper", CountingContext()) is first
    assert lookups == ["org.apache.spark.sql.functions"]

    class OtherGateway(CountingContext):
        _gateway = object()  # a new SparkContext's gateway: its functions are looked up afresh

    jvm_functions.jvm_function("upper", OtherGateway())
    assert len(lookups) == 2
    row = spark_session.range(1).select(F.upper(F.lit("a")).alias("u"), F.when(F.col("id") == 0, "z").alias("w"))
    assert row.first().asDict() == {"u": "A", "w": "z"}
