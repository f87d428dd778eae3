"""Checks that run before any work starts, so an expected mistake costs a second and one line, not a landing, a
JVM start and a page of Java frames.

Each check raises ``PreflightError`` whose message says what failed, where, and what to do. What is checked: the
protocol name (otherwise only a Spark executor finds it, after landing), the local places the run writes (the
SQLite catalog, the warehouse, the landing zone: otherwise a ``FileNotFoundError`` that never says "catalog", or a
``Py4JJavaError``), and that at least one Kafka bootstrap server accepts a TCP connection (otherwise the consumer
retries for a minute and then logs pages). The broker check is a plain socket connect with a short timeout: it
proves the address is reachable, not that the cluster is healthy; the real client still reports what follows.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Iterable, Optional
from urllib.parse import urlparse

from ticdc_lakehouse.runtime.config import Settings

#: seconds a bootstrap server gets to accept a TCP connection
BROKER_TIMEOUT_SECONDS = 3.0


class PreflightError(Exception):
    """An expected mistake found before any work started; its message is the one line the user sees."""


def check_protocol(protocol: str, where: str) -> None:
    from ticdc_lakehouse.decode.protocols import PROTOCOLS

    if protocol not in PROTOCOLS:
        raise PreflightError(f"unknown protocol {protocol!r} ({where}); use one of {', '.join(sorted(PROTOCOLS))}")


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _can_create_in(directory: Path) -> bool:
    """A file can be created in ``directory``: permissions, and (for root too) a read-only file system."""
    if not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def check_writable(path: Path, what: str, setting: str) -> None:
    """``path`` (a directory, or a file inside one) can be created or written by this user."""
    existing = _first_existing(path.absolute())
    if existing.exists() and not existing.is_dir() and existing != path.absolute():
        raise PreflightError(f"{what}: {existing} is a file, so {path} cannot be created; set {setting} "
                             f"to a directory you can write")
    target = existing if existing.is_dir() else existing.parent
    if not _can_create_in(target) or (path.exists() and not os.access(path, os.W_OK)):
        blocked = path if path.exists() else target
        raise PreflightError(f"{what}: cannot write {path} ({blocked} is not writable by this user); set "
                             f"{setting} to a place you can write, or fix its permissions")


def local_path(uri: str) -> Optional[Path]:
    """The local path of a warehouse/landing location (plain path or ``file:``); None for object stores."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else uri)
    return None


def check_storage(settings: Settings) -> None:
    """The SQLite catalog file, the warehouse and the landing zone (the local ones) can be written."""
    uri = settings.catalog_uri
    if uri.startswith("jdbc:sqlite:"):
        check_writable(Path(uri[len("jdbc:sqlite:"):]), "catalog", "catalog.uri (LAKEHOUSE_CATALOG_URI)")
    warehouse = local_path(settings.warehouse)
    if warehouse is not None:
        check_writable(warehouse, "warehouse", "catalog.warehouse (LAKEHOUSE_WAREHOUSE)")
    landing = settings.landing_path
    if isinstance(landing, Path):
        check_writable(landing, "landing zone", "landing.path (LAKEHOUSE_LANDING)")
    else:
        from ticdc_lakehouse.landing.storage import bucket_problem

        problem = bucket_problem(landing)
        if problem:
            raise PreflightError(f"landing zone: cannot use {landing} ({problem}); fix landing.path "
                                 f"(LAKEHOUSE_LANDING), the [s3] settings or the AWS credentials")


def bootstrap_addresses(servers: str) -> list[tuple[str, int]]:
    """``host:port,host2:port`` (a ``PLAINTEXT://`` prefix allowed; IPv6 as ``[::1]:9092``) as (host, port)."""
    addresses = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise PreflightError(f"bootstrap server {item!r} is not host:port; fix changefeeds.<name>."
                                 f"bootstrap_servers")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def reachable(addresses: Iterable[tuple[str, int]], timeout: float) -> bool:
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return True
        except OSError:
            continue
    return False


def check_brokers(servers: str, changefeed: str, timeout: float = BROKER_TIMEOUT_SECONDS) -> None:
    addresses = bootstrap_addresses(servers)
    if not addresses:
        raise PreflightError(f"changefeed {changefeed} has no bootstrap_servers; set changefeeds.{changefeed}."
                             f"bootstrap_servers")
    if not reachable(addresses, timeout):
        raise PreflightError(f"Kafka: no bootstrap server of changefeed {changefeed} accepts connections "
                             f"({servers}, {timeout:.0f} s timeout); start the broker or fix "
                             f"changefeeds.{changefeed}.bootstrap_servers")


def preflight(settings: Settings, changefeed: Optional[str] = None, protocol: Optional[str] = None,
              kafka: bool = False, archive: Optional[Path] = None, protocol_given_as: str = "--protocol") -> None:
    """Every check a command needs before it starts work (see the module doc); ``protocol_given_as`` names where
    ``protocol`` came from in the message."""
    cf = settings.changefeed(changefeed)
    if protocol:
        check_protocol(protocol, protocol_given_as)
    check_protocol(cf.protocol, f"changefeeds.{cf.name}.protocol")
    if archive is not None and not Path(archive).is_dir():
        raise PreflightError(f"archive directory {archive} does not exist; give --archive the directory that "
                             f"holds <topic>-<partition>/<offset>.log files")
    check_storage(settings)
    if kafka:
        check_brokers(cf.bootstrap_servers, cf.name)
