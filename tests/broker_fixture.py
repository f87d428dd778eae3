"""A real Apache Kafka broker for tests: Kafka 4.1 in KRaft mode (one JVM, broker and controller), from the
``org.apache.kafka:kafka_2.13`` jars that ``make setup`` fetched from Maven Central (jvm/test-services/pom.xml) into
``.venv/share/ticdc-lakehouse/jars/test-services/``.

Usage in a test module::

    from tests.broker_fixture import kafka_broker, create_topic, produce  # noqa: F401  (pytest finds the fixture)

``kafka_broker`` (session) yields ``"127.0.0.1:PORT"`` of a broker shared by the whole test session; tests that
stop/restart a broker (reliability) take ``private_broker`` instead, a :class:`Broker` of their own with
``stop()`` / ``start()`` / ``restart()`` on the same port and data directory. Brokers die with the test process.

Each broker formats its own storage (``kafka-storage format``: a fresh cluster id) in its data directory the first
time it starts, then runs ``kafka.Kafka server.properties`` on two free loopback ports (clients, controller), with
a small heap and the class-data archive of tests/jvm_service.py.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional, Sequence

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.jvm_service import (
    TEST_SERVICES,
    JavaProcess,
    free_port,
    java_executable,
    missing,
    per_process,
    port_open,
)

__all__ = ["Broker", "create_topic", "free_port", "kafka_broker", "port_open", "private_broker", "produce",
           "restart_broker", "shared_broker", "start_broker", "stop_broker", "unique_topic"]

Header = tuple[str, Optional[bytes]]

#: the broker JVM: a small heap, one GC thread; its log (warnings, and the "started" line) goes to the log file
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info")
#: broker settings for one node: internal topics with one replica and one partition (fast group and transaction
#: coordinators), topics only when asked for, a log cleaner and retention that act within a second or two (the
#: compaction and retention tests)
SERVER_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "message.max.bytes": str(10 * 1024 * 1024 + 1024),  # TiCDC's max-message-bytes default, and a batch header
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "log.cleaner.threads": "1",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
    "log.initial.task.delay.ms": "0",  # retention checks from the start, not after 30 s
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "500",
    "file.delete.delay.ms": "500",
}


def kafka_jars() -> list[Path]:
    """The broker's classpath (kafka_2.13 and its runtime dependencies)."""
    jars = sorted(TEST_SERVICES.glob("*.jar"))
    if not any(jar.name.startswith("kafka_2.13-") for jar in jars):
        raise missing("the Apache Kafka jars (kafka_2.13)")
    return jars


def _cluster_id() -> str:
    """A new KRaft cluster id as Kafka's ``Uuid.randomUuid`` makes it: URL-safe base64 that never starts with ``-``.

    One id in 64 would otherwise start with ``-``, and ``kafka-storage format --cluster-id -abc`` then reads the id as
    an option and fails ("expected one argument"); Kafka's own generator draws again in that case, and so do we.
    """
    while True:
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster.startswith("-"):
            return cluster


class Broker:
    """One Kafka broker process on fixed ports and a fixed data directory, stoppable and restartable by PID.

    ``data_dir`` holds ``server.properties`` and ``logs/`` (the partitions and the KRaft metadata log); it is
    formatted on the first start only, so a restart keeps every topic, offset and committed group offset.
    ``settings`` add to or override :data:`SERVER_SETTINGS`.
    """

    def __init__(self, data_dir: Optional[Path] = None, port: Optional[int] = None,
                 settings: Optional[Mapping[str, str]] = None) -> None:
        self.owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafka-broker-"))
        self.port = port or free_port()
        self.controller_port = free_port()
        self.settings = dict(SERVER_SETTINGS, **(settings or {}))
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.jvm: Optional[JavaProcess] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        return self.jvm.pid if self.jvm is not None else None

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    def _write_properties(self) -> None:
        settings = dict(self.settings)
        settings.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.data_dir / "logs"),
        })
        self.properties_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))

    def _format(self, classpath: str) -> None:
        """``kafka-storage format`` once per data directory: a new cluster id, the metadata log's bootstrap."""
        if (self.data_dir / "logs" / "meta.properties").is_file():
            return
        cluster = _cluster_id()
        result = subprocess.run(
            [java_executable(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath, "kafka.tools.StorageTool",
             "format", "--cluster-id", cluster, "--config", str(self.properties_path)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=180,
        )
        if result.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({result.returncode}): "
                               f"{result.stdout.decode(errors='replace')[-2000:]}")

    def start(self, timeout_s: float = 180.0) -> "Broker":
        """Start the broker (formatting its storage the first time) and wait until it answers a metadata request."""
        if self.jvm is not None and self.jvm.running():
            return self
        jars = kafka_jars()
        classpath = os.pathsep.join(str(jar) for jar in jars)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_properties()
        self._format(classpath)
        self.jvm = JavaProcess("kafka", JVM_OPTIONS, ["-cp", classpath, "kafka.Kafka", str(self.properties_path)],
                               jars, self.log_path)
        process = self.jvm.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"broker exited with {process.returncode}; log:\n{self.log()}")
            if port_open(self.port) and self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"broker did not come up on port {self.port} within {timeout_s}s; log:\n{self.log()}")

    def _answers(self) -> bool:
        try:
            return bool(AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2).brokers)
        except KafkaException:
            return False

    def stop(self, timeout_s: float = 30.0, kill: bool = False) -> None:
        """SIGTERM (Kafka's controlled shutdown) or SIGKILL with ``kill`` (losing what the broker had not written
        to its log files), then SIGKILL if it does not exit; waits until the port is free."""
        if self.jvm is None:
            return
        self.jvm.stop(timeout_s, kill=kill)
        deadline = time.monotonic() + timeout_s
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self, kill: bool = False) -> "Broker":
        self.stop(kill=kill)
        return self.start()

    def log(self) -> str:
        """The end of the broker's log file (for failure messages)."""
        return self.jvm.log() if self.jvm is not None else ""

    def close(self) -> None:
        """Stop and, when it made its own data directory, delete it."""
        self.stop()
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            try:
                self.log_path.unlink()
            except OSError:
                pass


def shared_broker() -> Broker:
    """One broker per test process, however many modules import the fixture; stopped at exit."""
    return per_process("kafka", lambda: Broker().start(), Broker.close).start()  # start: a no-op while it runs


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
    timestamp_ms: Optional[int] = None,
    **producer_config: object,
) -> list[tuple[int, int]]:
    """Produce ``(key, value[, headers[, partition]])`` records and wait for every delivery.

    ``timestamp_ms``: the records' CreateTime (default: now). ``producer_config`` keys may use ``_`` for ``.``
    (``linger_ms=50``). Returns ``(partition, offset)`` per record in order; raises on any delivery error.
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
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
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


def changefeed_config(root: Path, bootstrap: str, topic: str, changefeed: str, extra: str = "") -> Path:
    """``root/lakehouse.toml``: ``topic`` on the broker ``bootstrap`` as the Open Protocol ``changefeed``, then
    ``extra`` (more TOML) as given."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "lakehouse.toml"
    config.write_text(f'[changefeeds.{changefeed}]\nprotocol = "open"\ntopics = ["{topic}"]\n'
                      f'bootstrap_servers = "{bootstrap}"\n{extra}')
    return config


def changefeed_env(root: Path, bootstrap: str, topic: str, changefeed: str, catalog: str) -> dict[str, str]:
    """The environment of a ``lakehouse`` process (or ``load_settings``) merging ``topic`` as an Open Protocol
    ``changefeed`` into a deployment under ``root`` with catalog ``catalog``: this process's variables without its
    ``LAKEHOUSE*`` ones, and a config file written under ``root`` (``changefeed_config``)."""
    config = changefeed_config(root, bootstrap, topic, changefeed)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE")}
    env.update(LAKEHOUSE_HOME=str(root / "home"), LAKEHOUSE_CONFIG=str(config), LAKEHOUSE__CATALOG__NAME=catalog,
               LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS="2")
    return env
