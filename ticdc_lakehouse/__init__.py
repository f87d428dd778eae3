"""ticdc-lakehouse: TiCDC changefeeds landed from Kafka and merged into Apache Iceberg tables."""

from pathlib import Path

#: the tree the package runs from (a checkout): ``conf/``, ``jvm/`` and ``spark_jobs/`` are found from here, by
#: every module wherever it sits in the package
PROJECT_ROOT = Path(__file__).resolve().parent.parent
