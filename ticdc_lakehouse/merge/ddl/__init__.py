"""DDL: parsing TiDB's statements (``parse``) and applying them to Iceberg tables (``apply``)."""
