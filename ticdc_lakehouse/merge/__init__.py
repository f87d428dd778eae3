"""The merge engine: landed Kafka records -> decoded events -> Iceberg tables, up to the global resolved ts."""
