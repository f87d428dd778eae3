"""A real S3 API for tests: ``moto``'s server mode (PyPI ``moto[server]``) on a free loopback port, started once per
test session, with a bucket per test and the settings a deployment uses to put its warehouse there.

Use it with ``from tests.s3_fixture import s3_api  # noqa: F401``; ``s3_api`` yields an :class:`S3Api`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

from tests.jvm_service import die_with_parent, free_port, per_process

#: moto accepts any credentials; these are what the SDKs read from the environment
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "lakehouse-test", "AWS_SECRET_ACCESS_KEY": "lakehouse-test-secret",
               "AWS_REGION": "us-east-1"}


@dataclass
class S3Api:
    endpoint: str

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=CREDENTIALS["AWS_REGION"],
                            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])

    def new_bucket(self, prefix: str = "lake") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    @staticmethod
    def sign_in(spark) -> None:
        """Give a running Spark JVM the credentials: the AWS SDK reads ``aws.*`` system properties first, and the
        environment only as the JVM saw it at its start (the test session's JVM started before this fixture)."""
        system = spark._jvm.java.lang.System
        system.setProperty("aws.accessKeyId", CREDENTIALS["AWS_ACCESS_KEY_ID"])
        system.setProperty("aws.secretAccessKey", CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        system.setProperty("aws.region", CREDENTIALS["AWS_REGION"])

    def environment(self, warehouse: str) -> dict[str, str]:
        """The environment of a deployment whose warehouse is ``warehouse`` on this API (path-style requests)."""
        return {**CREDENTIALS, "LAKEHOUSE_WAREHOUSE": warehouse, "LAKEHOUSE__S3__ENDPOINT": self.endpoint,
                "LAKEHOUSE__S3__PATH_STYLE_ACCESS": "true", "LAKEHOUSE__S3__REGION": CREDENTIALS["AWS_REGION"],
                "LAKEHOUSE__S3__CHECKSUMS": "when_required"}


class MotoServer:
    """``python -m moto.server`` on 127.0.0.1; dies with the test process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.log_path = Path(tempfile.mkdtemp(prefix="moto-s3-")) / "moto.log"
        self.process: Optional[subprocess.Popen] = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> "MotoServer":
        with open(self.log_path, "ab") as log:  # a request log line per call: a file, never a pipe that fills
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.process.returncode}: "
                                   f"{self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"moto server did not answer on port {self.port} within {timeout_s}s")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(self.log_path.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_api() -> Iterator[S3Api]:
    """The session's S3 API (moto server mode)."""
    yield S3Api(per_process("moto", lambda: MotoServer().start(), MotoServer.stop).endpoint)
