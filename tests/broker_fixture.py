"""A real Kafka-protocol broker for tests: the ``noida-db`` binary shipped in the venv, run with only Kafka.

Usage in a test module::

    from tests.broker_fixture import kafka_broker, create_topic, produce  # noqa: F401  (pytest finds the fixture)

``kafka_broker`` (session) yields ``"127.0.0.1:PORT"`` of a broker shared by the whole test session; tests that
stop/restart a broker (reliability) take ``private_broker`` instead, a :class:`Broker` of their own with
``stop()`` / ``start()`` / ``restart()`` on the same port and data directory. Brokers die with the test process.

Known noida-db 0.2.3 differences from Kafka that matter here:

* a fetch response is not bounded by ``fetch.max.bytes``: it carries everything available in the assigned
  partitions, so reading a backlog of more than ~64 MiB needs a larger ``receive.message.max.bytes``
  (:data:`NOIDA_CONSUMER_SETTINGS`);
* an aborted transaction is listed in every later fetch of the partition, so librdkafka (read_committed)
  hides later committed records of the *same* producer id when the fetch starts after the ABORT marker;
* the binary prints a harmless "weak version GLIBC_2.39 not found" warning on Debian 12.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional, Sequence

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

Header = tuple[str, Optional[bytes]]

#: consumer settings (for ``ChangefeedConfig.kafka``) that let librdkafka accept noida's unbounded fetch responses
NOIDA_CONSUMER_SETTINGS = {"receive.message.max.bytes": 1024 * 1024 * 1024}


def broker_binary() -> Path:
    """The noida-db executable inside the installed ``noida_db`` package."""
    import noida_db

    path = Path(noida_db.__file__).resolve().parent / ("noida-db.exe" if os.name == "nt" else "noida-db")
    if not path.is_file():
        raise RuntimeError(f"noida-db binary not found at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def _die_with_parent() -> None:
    """Runs in the child before exec: Linux sends it SIGTERM when the test process dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort (not Linux)
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class Broker:
    """One broker process on a fixed port and data directory, stoppable and restartable by PID."""

    def __init__(self, data_dir: Optional[Path] = None, port: Optional[int] = None) -> None:
        self.owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="noida-kafka-"))
        self.port = port or free_port()
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.process: Optional[subprocess.Popen] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    def start(self, timeout_s: float = 30.0) -> "Broker":
        """Start the broker and wait until it answers a metadata request."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [str(broker_binary()), "start", "--only", "kafka", "--host", "127.0.0.1",
             "--kafka-port", str(self.port), "--data-dir", str(self.data_dir)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}; log:\n{self.log()}")
            if port_open(self.port) and self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"broker did not come up on port {self.port} within {timeout_s}s; log:\n{self.log()}")

    def _answers(self) -> bool:
        try:
            AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
            return True
        except KafkaException:
            return False

    def stop(self, timeout_s: float = 10.0, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL with ``kill``), then SIGKILL if it does not exit; waits until the port is free."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self, kill: bool = False) -> "Broker":
        self.stop(kill=kill)
        return self.start()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def close(self) -> None:
        """Stop and, when it made its own data directory, delete it."""
        self.stop()
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            try:
                self.log_path.unlink()
            except OSError:
                pass


_SHARED: Optional[Broker] = None


def shared_broker() -> Broker:
    """One broker per test process, however many modules import the fixture; stopped at exit."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Broker().start()
        atexit.register(_SHARED.close)
    elif _SHARED.process is None or _SHARED.process.poll() is not None:
        _SHARED.start()
    return _SHARED


def stop_broker(kill: bool = False) -> None:
    """Stop the shared broker (SIGTERM; ``kill``: SIGKILL, losing what it had not saved). Data dir is kept."""
    shared_broker().stop(kill=kill)


def start_broker() -> str:
    """Start the shared broker again on the same port and data dir; returns its bootstrap address."""
    return shared_broker().start().bootstrap


def restart_broker(kill: bool = False) -> str:
    """Stop and start the shared broker (tests sharing it see the outage: prefer ``private_broker``)."""
    return shared_broker().restart(kill=kill).bootstrap


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[str]:
    """``"127.0.0.1:PORT"`` of the session's shared broker."""
    yield shared_broker().bootstrap


@pytest.fixture()
def private_broker() -> Iterator[Broker]:
    """A broker of the test's own (fresh data dir), to stop, kill and restart at will."""
    broker = Broker().start()
    try:
        yield broker
    finally:
        broker.close()


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: Optional[Mapping[str, str]] = None,
                 timeout_s: float = 15.0) -> str:
    """Create a topic (10 MiB max message size unless ``config`` says otherwise) and wait until it is visible."""
    settings = {"max.message.bytes": str(10 * 1024 * 1024)}
    settings.update(config or {})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                                config=settings)]).values():
        future.result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return name
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} not visible after creation")


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[Optional[bytes], Optional[bytes]]] | Iterable[tuple],
    partition: Optional[int] = None,
    compression: str = "none",
    headers: Optional[Sequence[Header]] = None,
    **producer_config: object,
) -> list[tuple[int, int]]:
    """Produce ``(key, value[, headers[, partition]])`` records and wait for every delivery.

    ``producer_config`` keys may use ``_`` for ``.`` (``linger_ms=50``). Returns ``(partition, offset)`` per
    record in order; raises on any delivery error.
    """
    config = {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5,
              "message.max.bytes": 10 * 1024 * 1024, "enable.idempotence": False}
    config.update({key.replace("_", "."): value for key, value in producer_config.items()})
    producer = Producer(config)
    results: list[Optional[tuple[int, int]]] = []
    errors: list[str] = []

    def make_callback(index: int):  # noqa: ANN202
        def callback(err, msg) -> None:  # noqa: ANN001
            if err is not None:
                errors.append(str(err))
            else:
                results[index] = (msg.partition(), msg.offset())
        return callback

    for index, record in enumerate(records):
        key, value = record[0], record[1]
        record_headers = record[2] if len(record) > 2 else headers
        record_partition = record[3] if len(record) > 3 else partition
        results.append(None)
        kwargs = {"key": key, "value": value, "on_delivery": make_callback(index)}
        if record_headers:
            kwargs["headers"] = list(record_headers)
        if record_partition is not None:
            kwargs["partition"] = record_partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"produce to {topic} failed: {remaining} undelivered, errors {errors[:3]}")
    return [r for r in results if r is not None]
