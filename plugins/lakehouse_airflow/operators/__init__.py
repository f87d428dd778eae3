"""Operators, one per file: ``land`` (Kafka -> landing zone), ``land_archive`` (archived segments -> landing zone),
``merge`` (landing zone -> Iceberg, in-process or spark-submit), ``publish`` (the cut: metrics and asset events),
``maintain`` (table maintenance); ``base`` holds what they share."""
