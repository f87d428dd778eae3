"""The pinned stack works together: Spark 3.5 + Iceberg 1.10.2 + the JDBC catalog, shared with pyiceberg."""

from __future__ import annotations

from decimal import Decimal

import pyspark
import pytest

from ticdc_lakehouse.spark_session import iceberg_runtime_jar, pyiceberg_catalog


def test_pyspark_is_3_5():
    assert pyspark.__version__.startswith("3.5"), pyspark.__version__


def test_iceberg_runtime_jar_is_the_complete_one():
    jar = iceberg_runtime_jar()
    assert jar.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"


@pytest.mark.spark
def test_iceberg_table_lifecycle_on_the_jdbc_catalog(spark, settings):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS shop")
    spark.sql(
        "CREATE TABLE shop.items (id int NOT NULL, name string, price decimal(10,2)) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read')"
    )
    spark.sql("ALTER TABLE shop.items SET IDENTIFIER FIELDS id")
    spark.sql("INSERT INTO shop.items VALUES (1, 'a', 1.50), (2, 'b', 2.00), (3, 'c', 3.25)")
    first_snapshot = spark.sql("SELECT snapshot_id FROM shop.items.snapshots").collect()[0][0]

    spark.createDataFrame(
        [(2, "B", Decimal("2.10"), "U"), (3, None, None, "D"), (4, "d", Decimal("4.00"), "I")],
        "id int, name string, price decimal(10,2), op string",
    ).createOrReplaceTempView("changes")
    spark.sql(
        "MERGE INTO shop.items t USING changes s ON t.id = s.id "
        "WHEN MATCHED AND s.op = 'D' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET name = s.name, price = s.price "
        "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT (id, name, price) VALUES (s.id, s.name, s.price)"
    )
    rows = [tuple(r) for r in spark.sql("SELECT * FROM shop.items ORDER BY id").collect()]
    assert rows == [(1, "a", Decimal("1.50")), (2, "B", Decimal("2.10")), (4, "d", Decimal("4.00"))]

    spark.sql("ALTER TABLE shop.items ADD COLUMN qty int")
    spark.sql("ALTER TABLE shop.items RENAME COLUMN name TO title")
    spark.sql("ALTER TABLE shop.items ALTER COLUMN qty TYPE bigint")
    spark.sql("ALTER TABLE shop.items DROP COLUMN price")
    spark.sql("INSERT INTO shop.items VALUES (5, 'e', 9000000000)")
    assert spark.table("shop.items").columns == ["id", "title", "qty"]
    assert dict(spark.table("shop.items").dtypes)["qty"] == "bigint"

    old = spark.sql(f"SELECT * FROM shop.items VERSION AS OF {first_snapshot} ORDER BY id")
    assert old.columns == ["id", "name", "price"]
    assert [r["id"] for r in old.collect()] == [1, 2, 3]

    catalog = pyiceberg_catalog(settings)
    table = catalog.load_table("shop.items")
    assert table.format_version == 2
    assert [f.name for f in table.schema().fields] == ["id", "title", "qty"]
    assert table.schema().identifier_field_names() == {"id"}
    current = table.scan().to_arrow().sort_by("id")
    assert current.column("id").to_pylist() == [1, 2, 4, 5]
    assert current.column("qty").to_pylist() == [None, None, None, 9000000000]
    then = table.scan(snapshot_id=first_snapshot).to_arrow().sort_by("id")
    assert then.column("id").to_pylist() == [1, 2, 3]
