"""Iceberg-side operations: table metadata through Iceberg's Java API (atomic transactions), data through Spark."""
