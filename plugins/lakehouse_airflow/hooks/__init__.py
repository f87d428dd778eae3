"""Hooks: ``lakehouse.LakehouseHook`` (the deployment's Settings, a table's cut, Kafka lag) and
``spark_submit.LakehouseSparkSubmitHook`` (spark-submit to the configured ``spark.master``)."""
