"""A server the tests run as a real JVM process (the Kafka broker, the schema registry): started from the artifacts
``make setup`` fetched into ``.venv/share/ticdc-lakehouse/jars/test-services/`` (jvm/test-services/pom.xml), on
loopback ports, killed with the test process however it dies.

JVM start time is most of a test server's cost here, so each server's classes go into a class-data archive
(``<name>-<hash>.jsa`` next to the artifacts, keyed by the JDK and the classpath): the first process that stops
cleanly writes it, every later one maps it instead of loading and verifying the classes again. The JVM ignores an
archive that does not match, so a stale one only costs the time it would have saved.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

from ticdc_lakehouse.runtime.spark_session import jvm_jar_dir

#: where scripts/fetch_jvm_deps.sh puts jvm/test-services/pom.xml's artifacts (beside the engine's jars)
TEST_SERVICES = jvm_jar_dir("test-services")
_QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
_PER_PROCESS: dict[str, Any] = {}
T = TypeVar("T")


def per_process(name: str, start: Callable[[], T], stop: Callable[[T], Any]) -> T:
    """One server of a kind per test process, however many modules import its fixture; stopped at exit."""
    if name not in _PER_PROCESS:
        _PER_PROCESS[name] = start()
        atexit.register(stop, _PER_PROCESS[name])
    return _PER_PROCESS[name]


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` on the PATH (the JDK Spark uses)."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("no java on the PATH: run `make setup` (it installs a JDK)")
    return found


def missing(what: str) -> RuntimeError:
    """The one-line error of a test server whose artifacts were never fetched."""
    return RuntimeError(f"{what} not found in {TEST_SERVICES}: run `make setup` (it fetches jvm/test-services/pom.xml)")


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


def die_with_parent() -> None:
    """Runs in the child before exec: Linux sends it SIGTERM when the test process dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort (not Linux)
        pass


class JavaProcess:
    """One JVM: ``java <options> <class archive> <arguments>``, its output appended to ``log_path``.

    ``classpath`` lists the jars the archive is keyed by (a different jar set or JDK gets a new archive).
    """

    def __init__(self, name: str, options: Sequence[str], arguments: Sequence[str], classpath: Sequence[Path],
                 log_path: Path) -> None:
        self.name = name
        self.options = list(options)
        self.arguments = list(arguments)
        self.classpath = list(classpath)
        self.log_path = log_path
        self.process: Optional[subprocess.Popen] = None
        self._archive_tmp: Optional[Path] = None

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _archive(self, java: str) -> Path:
        key = "\n".join([os.path.realpath(java)] + [f"{jar.name}:{jar.stat().st_size}" for jar in self.classpath])
        return TEST_SERVICES / f"{self.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"

    def start(self) -> subprocess.Popen:
        java = java_executable()
        archive = self._archive(java)
        if archive.is_file():
            cds = [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *_QUIET_CDS]
            self._archive_tmp = None
        else:  # this JVM writes the archive when it exits; stop() moves it into place
            self._archive_tmp = archive.with_name(f"{archive.name}.{os.getpid()}-{id(self)}.tmp")
            cds = [f"-XX:ArchiveClassesAtExit={self._archive_tmp}", *_QUIET_CDS]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([java, *self.options, *cds, *self.arguments], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent)
        return self.process

    def stop(self, timeout_s: float = 30.0, kill: bool = False) -> None:
        """SIGTERM (the server's own orderly shutdown) or SIGKILL with ``kill``; SIGKILL if it does not exit."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            self._keep_archive()
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)
        self._keep_archive()

    def _keep_archive(self) -> None:
        tmp, self._archive_tmp = self._archive_tmp, None
        if tmp is None:
            return
        try:
            if tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, tmp.with_name(tmp.name.split(".jsa.")[0] + ".jsa"))
            else:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""
