"""The warehouse on object storage: what an ``s3://`` warehouse adds to the Iceberg catalog, for Spark and pyiceberg.

Iceberg writes and reads the table files itself through its ``S3FileIO`` (the AWS SDK v2 in
``iceberg-aws-bundle``), so no Hadoop S3A connector is involved and the same settings serve AWS S3, MinIO and any
other S3 API (the ``moto`` server the tests run). The ``[s3]`` section says where the API is; credentials come
from the AWS SDK's usual chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, profiles, instance roles), never
from the config file, so they are never printed with it.

``checksums = "when_required"``: the AWS SDK (2.30 and later) adds CRC checksums to every upload and checks them on
downloads, which S3 APIs other than AWS's (older MinIO, some gateways) refuse or do not send; this asks the SDK to
do so only where the operation requires it. It is a JVM system property, so it applies to the Spark driver and
executors from their start.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

#: warehouse URI schemes S3FileIO serves (``s3a://`` as Hadoop users write it)
S3_SCHEMES = ("s3://", "s3a://", "s3n://")
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
CHECKSUM_MODES = ("when_supported", "when_required")


def is_object_storage(uri: str) -> bool:
    """Whether a warehouse location is on the S3 API rather than a local or Hadoop path."""
    return uri.startswith(S3_SCHEMES)


def _section(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    return raw.get("s3") or {}


def check_checksums(raw: Mapping[str, Any]) -> str:
    """The ``s3.checksums`` setting, refused in one line when it is not one the AWS SDK knows."""
    mode = str(_section(raw).get("checksums") or "when_supported")
    if mode not in CHECKSUM_MODES:
        raise ValueError(f"s3.checksums = {mode!r}: use one of {', '.join(CHECKSUM_MODES)}")
    return mode


def iceberg_s3_properties(warehouse: str, raw: Mapping[str, Any]) -> dict[str, str]:
    """Iceberg catalog properties (``spark.sql.catalog.<name>.<key>``) of an S3 warehouse; empty for another one."""
    if not is_object_storage(warehouse):
        return {}
    s3 = _section(raw)
    properties = {"io-impl": S3_FILE_IO}
    if s3.get("endpoint"):
        properties["s3.endpoint"] = str(s3["endpoint"])
    if s3.get("path_style_access"):
        properties["s3.path-style-access"] = "true"
    if s3.get("region"):
        properties["client.region"] = str(s3["region"])
    return properties


def aws_java_options(warehouse: str, raw: Mapping[str, Any]) -> str:
    """JVM system properties for the AWS SDK (driver and executors) of an S3 warehouse."""
    if not is_object_storage(warehouse) or check_checksums(raw) == "when_supported":
        return ""
    return "-Daws.requestChecksumCalculation=when_required -Daws.responseChecksumValidation=when_required"


def pyiceberg_s3_properties(warehouse: str, raw: Mapping[str, Any],
                            env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The same S3 settings as pyiceberg (pyarrow's S3 filesystem) names them; credentials from the environment."""
    if not is_object_storage(warehouse):
        return {}
    s3 = _section(raw)
    properties: dict[str, str] = {}
    if s3.get("endpoint"):
        properties["s3.endpoint"] = str(s3["endpoint"])
    if s3.get("path_style_access"):
        properties["s3.force-virtual-addressing"] = "false"
    region = s3.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        properties["s3.region"] = str(region)
    for key, name in (("s3.access-key-id", "AWS_ACCESS_KEY_ID"), ("s3.secret-access-key", "AWS_SECRET_ACCESS_KEY"),
                      ("s3.session-token", "AWS_SESSION_TOKEN")):
        if env.get(name):
            properties[key] = env[name]
    return properties
