"""A tiny Confluent Schema Registry (REST subset) for tests, and the ``schema_registry`` pytest fixture.

It serves what confluent-kafka's ``SchemaRegistryClient`` and TiCDC's encoder use: register a schema under a
subject (same text -> same global id, like the real registry), fetch a schema by id, list subjects and versions,
and look up a schema in a subject. It runs on 127.0.0.1 on a free port in a daemon thread (stdlib only), so tests
talk HTTP to a real server instead of mocking the client.

Use it from a test module with ``from tests.schema_registry_fixture import schema_registry  # noqa: F401``.
"""

from __future__ import annotations

import io
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Optional
from urllib.parse import unquote, urlsplit

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from ticdc_lakehouse.decode.confluent_avro import confluent_frame

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryState:
    """Schemas by global id, and per subject the ids of its versions (version n = index n-1)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: dict[int, dict[str, Any]] = {}
        self.ids_by_text: dict[tuple[str, str], int] = {}
        self.subjects: dict[str, list[int]] = {}
        #: when set, every GET answers this HTTP status (a registry that is up but failing, e.g. 503)
        self.failing_status: Optional[int] = None

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> tuple[int, int]:
        """Register (idempotently) and return (id, version)."""
        with self.lock:
            key = (schema_type, schema)
            schema_id = self.ids_by_text.get(key)
            if schema_id is None:
                schema_id = len(self.schemas) + 1
                self.ids_by_text[key] = schema_id
                self.schemas[schema_id] = {"schema": schema, "schemaType": schema_type}
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id, versions.index(schema_id) + 1


class _Handler(BaseHTTPRequestHandler):
    state: RegistryState  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        return

    # --- plumbing --------------------------------------------------------------------------------------------
    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: int, message: str) -> None:
        self._send(status, {"error_code": code, "message": message})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _path(self) -> list[str]:
        return [unquote(part) for part in urlsplit(self.path).path.strip("/").split("/") if part]

    def _version_body(self, subject: str, version: int) -> Optional[dict[str, Any]]:
        versions = self.state.subjects.get(subject)
        if not versions:
            return None
        if version == -1:
            version = len(versions)
        if not 1 <= version <= len(versions):
            return None
        schema_id = versions[version - 1]
        entry = self.state.schemas[schema_id]
        body = {"subject": subject, "version": version, "id": schema_id, "schema": entry["schema"]}
        if entry["schemaType"] != "AVRO":
            body["schemaType"] = entry["schemaType"]
        return body

    # --- routes ----------------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.state.failing_status is not None:
            return self._error(self.state.failing_status, 50003, "Error while forwarding the request")
        parts = self._path()
        if parts == ["subjects"]:
            return self._send(200, sorted(self.state.subjects))
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
            entry = self.state.schemas.get(int(parts[2]))
            if entry is None:
                return self._error(404, 40403, "Schema not found")
            body = {"schema": entry["schema"]}
            if entry["schemaType"] != "AVRO":
                body["schemaType"] = entry["schemaType"]
            return self._send(200, body)
        if len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
            versions = self.state.subjects.get(parts[1])
            if versions is None:
                return self._error(404, 40401, "Subject not found")
            return self._send(200, list(range(1, len(versions) + 1)))
        if len(parts) == 4 and parts[0] == "subjects" and parts[2] == "versions":
            raw = parts[3]
            version = -1 if raw == "latest" else int(raw) if re.fullmatch(r"-?\d+", raw) else 0
            body = self._version_body(parts[1], version)
            if body is None:
                return self._error(404, 40402, "Version not found")
            return self._send(200, body)
        if parts == ["config"]:
            return self._send(200, {"compatibilityLevel": "BACKWARD"})
        return self._error(404, 404, f"unsupported path {self.path}")

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        parts = self._path()
        try:
            body = self._body()
        except json.JSONDecodeError:
            return self._error(422, 42201, "Invalid JSON")
        schema = body.get("schema")
        if not isinstance(schema, str):
            return self._error(422, 42201, "Invalid schema")
        schema_type = body.get("schemaType") or "AVRO"
        if len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
            try:
                json.loads(schema)
            except json.JSONDecodeError:
                return self._error(422, 42201, "Invalid schema")
            schema_id, _ = self.state.register(parts[1], schema, schema_type)
            return self._send(200, {"id": schema_id})
        if len(parts) == 2 and parts[0] == "subjects":  # look up a schema under a subject
            schema_id = self.state.ids_by_text.get((schema_type, schema))
            versions = self.state.subjects.get(parts[1], [])
            if schema_id is None or schema_id not in versions:
                return self._error(404, 40403, "Schema not found")
            return self._send(200, self._version_body(parts[1], versions.index(schema_id) + 1))
        return self._error(404, 404, f"unsupported path {self.path}")


class SchemaRegistryServer:
    """The server and its state; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self.state = RegistryState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="schema-registry", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "SchemaRegistryServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture(scope="module")
def schema_registry() -> Iterator[str]:
    """The URL of a fresh in-process Schema Registry, for one test module."""
    server = SchemaRegistryServer().start()
    try:
        yield server.url
    finally:
        server.stop()


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
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
