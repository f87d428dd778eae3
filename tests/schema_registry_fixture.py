"""A real Confluent-compatible Schema Registry for tests: Apicurio Registry 2.6 (in-memory storage) run from the JVM,
whose ``/apis/ccompat/v7`` API is the Confluent Schema Registry REST API that confluent-kafka's
``SchemaRegistryClient`` and TiCDC's encoder speak.

``schema_registry`` (session) yields the Confluent API's base URL of one registry shared by the test session; tests
register under their own subjects. Apicurio's runnable archive comes from Maven Central with the Kafka jars
(jvm/test-services/pom.xml, ``make setup``) and is unpacked next to them the first time a registry starts.
:class:`FailingFront` puts a reverse proxy in front of it that can answer with an HTTP error, like a load balancer
whose registry behind it is failing.

Use it from a test module with ``from tests.schema_registry_fixture import schema_registry  # noqa: F401``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import urlsplit

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.jvm_service import TEST_SERVICES, JavaProcess, free_port, missing, per_process
from ticdc_lakehouse.decode.confluent_avro import confluent_frame

#: the Confluent-compatible API under Apicurio's root
CCOMPAT = "/apis/ccompat/v7"
#: the registry JVM: small heap; Quarkus's in-memory (H2) storage; loopback only; no console, no auth
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               "-Dquarkus.http.host=127.0.0.1", "-Dquarkus.log.level=WARN",
               "-Dquarkus.log.category.\"io.quarkus\".level=INFO", "-Dregistry.auth.enabled=false")


def apicurio_home() -> Path:
    """The unpacked Apicurio archive (``*-runner.jar`` and ``lib/``), unpacked once, atomically."""
    archives = sorted(TEST_SERVICES.glob("apicurio-registry-app-*-all.tar.gz"))
    if not archives:
        raise missing("the Apicurio Registry archive (apicurio-registry-app-*-all.tar.gz)")
    home = TEST_SERVICES / archives[-1].name.removesuffix("-all.tar.gz")
    if not home.is_dir():
        staging = Path(tempfile.mkdtemp(prefix=f"{home.name}.", dir=TEST_SERVICES))
        with tarfile.open(archives[-1]) as archive:
            archive.extractall(staging, filter="data")
        try:
            os.rename(staging, home)
        except OSError:  # unpacked meanwhile by another process
            shutil.rmtree(staging, ignore_errors=True)
    return home


class ApicurioRegistry:
    """One Apicurio Registry JVM on a free loopback port; ``url`` is its Confluent-compatible API."""

    def __init__(self) -> None:
        self.port = free_port()
        self.log_path = Path(tempfile.mkdtemp(prefix="schema-registry-")) / "registry.log"
        self.jvm: Optional[JavaProcess] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CCOMPAT}"

    def start(self, timeout_s: float = 240.0) -> "ApicurioRegistry":
        """Start the registry and wait until its Confluent API answers."""
        home = apicurio_home()
        [runner] = home.glob("*-runner.jar")
        self.jvm = JavaProcess("apicurio", [*JVM_OPTIONS, f"-Dquarkus.http.port={self.port}"],
                               ["-jar", str(runner)], [runner, *sorted((home / "lib").glob("*.jar"))],
                               self.log_path)
        process = self.jvm.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"schema registry exited with {process.returncode}; log:\n{self.jvm.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"schema registry did not answer on port {self.port} within {timeout_s}s; log:\n"
                           f"{self.jvm.log()}")

    def stop(self) -> None:
        if self.jvm is not None:
            self.jvm.stop()
        shutil.rmtree(self.log_path.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """The Confluent-compatible URL of the session's real schema registry (Apicurio)."""
    yield per_process("apicurio", lambda: ApicurioRegistry().start(), ApicurioRegistry.stop).url


class _FrontHandler(BaseHTTPRequestHandler):
    front: "FailingFront"  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        return

    def _forward(self) -> None:
        status = self.front.failing_status
        if status is not None:
            body = json.dumps({"error_code": status * 100 + 3, "message": "Error while forwarding the request"})
            return self._reply(status, "application/vnd.schemaregistry.v1+json", body.encode())
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept", "authorization")}
        request = urllib.request.Request(self.front.upstream + self.path, data=data, headers=headers,
                                         method=self.command)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                self._reply(response.status, response.headers.get("Content-Type", ""), response.read())
        except urllib.error.HTTPError as error:
            self._reply(error.code, error.headers.get("Content-Type", ""), error.read())

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _forward  # noqa: N815 - http.server naming


class FailingFront:
    """A reverse proxy to a registry (``upstream``, the ccompat URL) on its own loopback port; while
    ``failing_status`` is set, every request gets that HTTP status instead of reaching the registry."""

    def __init__(self, upstream: str) -> None:
        self.failing_status: Optional[int] = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_FrontHandler,), {"front": self}))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="registry-front", daemon=True)
        parts = urlsplit(upstream)
        self.upstream, self.path = f"{parts.scheme}://{parts.netloc}", parts.path

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    def start(self) -> "FailingFront":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class Producer:
    """The test-side TiCDC Avro encoder: registers schemas under <topic>-key/-value and frames Avro bodies."""

    def __init__(self, url: str, topic: str) -> None:
        self.client = SchemaRegistryClient({"url": url})
        self.topic = topic

    def register(self, schema: dict, suffix: str) -> int:
        return self.client.register_schema(f"{self.topic}-{suffix}", Schema(json.dumps(schema), "AVRO"))

    @staticmethod
    def body(schema: dict, record: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
        return out.getvalue()

    def encode(self, schema: dict, record: dict, suffix: str = "value") -> bytes:
        return confluent_frame(self.register(schema, suffix), self.body(schema, record))


def items_schemas() -> tuple[dict, dict]:
    """The key and value schemas TiCDC's Avro encoder (with the TiDB extension) writes for a table
    ``shop.items (id INT PRIMARY KEY, label TEXT)``."""

    def typed(avro_type: str, tidb_type: str) -> dict:
        return {"type": avro_type, "connect.parameters": {"tidb_type": tidb_type}}

    key_schema = {"type": "record", "name": "items", "namespace": "default.shop",
                  "fields": [{"name": "id", "type": typed("int", "INT")}]}
    value_schema = {**key_schema, "fields": [
        {"name": "id", "type": typed("int", "INT")}, {"name": "label", "type": typed("string", "TEXT")},
        {"name": "_tidb_op", "type": "string"}, {"name": "_tidb_commit_ts", "type": "long"},
        {"name": "_tidb_commit_physical_time", "type": "long"}]}
    return key_schema, value_schema


def closed_port() -> int:
    """A loopback port nothing listens on: the address of a registry that is down."""
    return free_port()  # bound and released: nothing listens there
