"""The production catalog: Iceberg's JDBC catalog on a real PostgreSQL server.

Concurrent commits to one table conflict in the catalog (optimistic concurrency on the metadata pointer) and are
retried by Iceberg: none is lost. The whole pipeline runs on it, with the advisory-lock merge guard, and pyiceberg
reads the same catalog.
"""

from __future__ import annotations

import pytest

from tests.lake_helpers import assert_lake_equals_upstream, run_concurrently
from tests.postgres_fixture import postgres_url  # noqa: F401
from ticdc_lakehouse.runtime.config import load_settings
from ticdc_lakehouse.runtime.locks import LockBusy, changefeed_lock
from ticdc_lakehouse.commands.pipeline import backfill
from ticdc_lakehouse.runtime.spark_session import pyiceberg_catalog, use_catalog
from ticdc_lakehouse.sim.workload import Workload, write_to_archive

pytestmark = pytest.mark.spark


@pytest.fixture
def pg_settings(postgres_url, tmp_path):  # noqa: F811
    uri, user, password = postgres_url
    return load_settings(env={
        "LAKEHOUSE_HOME": str(tmp_path / "home"), "LAKEHOUSE_CONFIG": "", "LAKEHOUSE_CATALOG_URI": uri,
        "LAKEHOUSE_CATALOG_USER": user, "LAKEHOUSE_CATALOG_PASSWORD": password, "LAKEHOUSE__CATALOG__NAME": "pglake",
    })


def test_concurrent_commits_are_retried_and_none_is_lost(spark_session, pg_settings):
    spark = spark_session
    use_catalog(spark, pg_settings)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS pglake.conc")
    spark.sql("CREATE TABLE pglake.conc.t (writer int, n int) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'commit.retry.num-retries'='20')")
    errors = []

    def writer(index: int) -> None:
        try:
            for n in range(4):
                spark.sql(f"INSERT INTO pglake.conc.t VALUES ({index}, {n})")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    run_concurrently(writer, 3)
    assert errors == []
    rows = sorted(tuple(r) for r in spark.sql("SELECT writer, n FROM pglake.conc.t").collect())
    assert rows == [(w, n) for w in range(3) for n in range(4)]
    assert spark.sql("SELECT count(*) FROM pglake.conc.t.snapshots").collect()[0][0] == 12


def test_pipeline_on_the_postgres_catalog(spark_session, pg_settings, tmp_path):
    spark = spark_session
    use_catalog(spark, pg_settings)
    workload = Workload.started(seed=88, partitions=2, transactions=6)
    workload.resolve(final=True)
    archive = tmp_path / "archive"
    write_to_archive(workload, archive, "ticdc", "open")
    backfill(pg_settings, archive, protocol="open", spark=spark)
    assert_lake_equals_upstream(spark, workload, workload.global_resolved_ts())
    table = pyiceberg_catalog(pg_settings).load_table("shop.orders")
    assert table.scan().to_arrow().num_rows == len(workload.expected_json(workload.global_resolved_ts())["shop.orders"])
    with changefeed_lock(pg_settings, "default"):  # the advisory lock is per changefeed, across sessions
        with pytest.raises(LockBusy):
            with changefeed_lock(pg_settings, "default"):
                pass
