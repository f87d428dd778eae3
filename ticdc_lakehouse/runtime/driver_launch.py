"""The driver JVM started from the command Spark's launcher gave for the same arguments, not through spark-submit.

Why: pyspark starts the driver through ``bin/spark-submit``: three bash scripts and a first JVM, Spark's launcher
(``org.apache.spark.launcher.Main``), whose only output is the command line of the second JVM, the driver; and it
looks for the driver's connection file every 0.1 s. On 2 cores that is about 0.2 s of every run on the way to its
first Spark job, which waits for the driver. The command depends only on the submit arguments, Spark's
installation and conf dir, the Java found and the environment the scripts and the launcher read: it is kept beside
the installation (the virtualenv's ``share/ticdc-lakehouse/driver-commands``, the last ``KEPT_COMMANDS`` of them)
under a digest of them, the driver is started from it directly (the scripts' environment given), and pyspark
connects to it as it connects to any driver it did not start itself (``PYSPARK_GATEWAY_PORT``).

Not used, and pyspark starts the driver as before, with ``spark.kept_driver_command = false``, where the scripts
would do more than ask the launcher (a ``spark-env.sh`` in Spark's conf dir sets variables for the driver), on
Windows, under ``SPARK_TESTING``, and when pyspark is told to use a running gateway already. A kept command that
does not start a driver is deleted, and pyspark then starts it and reports what fails as it always did.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from ticdc_lakehouse.runtime.jar_dirs import installation_dir

if TYPE_CHECKING:  # pragma: no cover
    from py4j.java_gateway import JavaGateway

log = logging.getLogger(__name__)

LAUNCHER_CLASS = "org.apache.spark.launcher.Main"
SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
#: what ``load-spark-env.sh`` exports for Spark 4 (the Iceberg runtime jar is built for the same)
SCALA_VERSION = "2.13"
#: the variables the scripts, the launcher and the driver read: each one whose name starts so is in the digest
ENV_PREFIXES = ("SPARK_", "PYSPARK_", "HADOOP_", "YARN_", "JAVA_", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
                "LD_LIBRARY_PATH")
#: the marker the launcher prints before the command (``spark-class`` reads the lines before it as messages)
_COMMAND_START = b"\0\n"
#: how often the connection file the driver writes once it listens is looked for
_POLL_SECONDS = 0.01
#: commands kept (the newest; a deployment's arguments name its home, so each home has its own)
KEPT_COMMANDS = 64
_GATEWAY_ENV = threading.Lock()
#: the connection folders of drivers starting right now, with their process once started (see
#: ``remove_starting_connections``)
_STARTING: dict[Path, Optional[subprocess.Popen]] = {}
#: set when the process ends with drivers still starting: a driver stopped then says nothing of its kept command
_ENDING = threading.Event()
#: a connection folder lives while its driver starts (seconds): one older than this was left by a killed process
ABANDONED_AFTER_SECONDS = 3600
_FOLDER_PREFIX = "lakehouse-driver-"


@dataclass(frozen=True)
class SparkInstall:
    """What the scripts would find: Spark's home (pyspark's package), its conf dir, and the ``java`` to run."""

    home: Path
    conf_dir: Path
    java: str


def spark_install() -> Optional[SparkInstall]:
    """Spark's installation as ``bin/spark-class`` finds it, or None when the scripts would do more than ask the
    launcher for the driver's command (a ``spark-env.sh``), or no ``java`` is found."""
    from pyspark.find_spark_home import _find_spark_home

    home = Path(_find_spark_home())
    conf_dir = Path(os.environ.get("SPARK_CONF_DIR") or home / "conf")
    if (conf_dir / "spark-env.sh").is_file():
        return None
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not (home / "jars").is_dir():
        return None
    return SparkInstall(home, conf_dir, java)


def submit_arguments(conf: Mapping[str, str]) -> list[str]:
    """The arguments pyspark gives ``spark-submit`` for a session of ``conf`` (``pyspark.java_gateway``)."""
    args = [part for key, value in conf.items() for part in ("--conf", f"{key}={value}")]
    return args + shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))


def script_environment(install: SparkInstall) -> dict[str, str]:
    """The environment ``bin/spark-class`` gives the launcher and the driver (``load-spark-env.sh`` without a
    ``spark-env.sh``)."""
    env = dict(os.environ)
    env.update(SPARK_HOME=str(install.home), SPARK_CONF_DIR=str(install.conf_dir), SPARK_ENV_LOADED="1",
               SPARK_SCALA_VERSION=SCALA_VERSION)
    return env


def launch_digest(args: Sequence[str], install: SparkInstall, env: Mapping[str, str]) -> str:
    """A digest of everything the launcher's command depends on: the arguments, the installation, pyspark's
    version, the variables it reads and Spark's defaults file."""
    import pyspark

    defaults = install.conf_dir / "spark-defaults.conf"
    parts = {
        "args": list(args), "home": str(install.home), "pyspark": pyspark.__version__,
        "java": [install.java, os.path.realpath(install.java)],  # another default JDK behind the same ``java``
        "env": sorted((key, value) for key, value in env.items() if key.startswith(ENV_PREFIXES)),
        "defaults": defaults.read_text(errors="replace") if defaults.is_file() else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def parse_launcher_output(output: bytes) -> list[str]:
    """The driver's command out of the launcher's output: after a NUL line, each argument followed by a NUL.
    Raises ValueError when it holds none."""
    _, found, command = output.partition(_COMMAND_START)
    parts = [part.decode() for part in command.split(b"\0") if part]
    if not found or not parts:
        raise ValueError("the launcher printed no command")
    return parts


def commands_dir() -> Path:
    """Where the driver commands are kept: beside the installation they are valid for."""
    return installation_dir() / "driver-commands"


def driver_command(args: Sequence[str], install: SparkInstall, env: Mapping[str, str], kept: Path) -> list[str]:
    """The driver's command for ``args``: the one kept at ``kept``, else the launcher's (then kept when the
    directory is writable, written whole or not at all). Raises OSError or ``subprocess.CalledProcessError`` when
    the launcher fails."""
    try:
        return parse_launcher_output(kept.read_bytes())
    except (OSError, ValueError):
        pass
    launcher = [install.java, "-Xmx128m", *shlex.split(env.get("SPARK_LAUNCHER_OPTS", "")), "-cp",
                str(install.home / "jars" / "*"), LAUNCHER_CLASS, SUBMIT_CLASS, *args]
    output = subprocess.run(launcher, env=dict(env), capture_output=True, check=True).stdout
    command = parse_launcher_output(output)
    try:
        _keep(kept, command)
    except OSError as exc:  # a read-only installation: every run asks the launcher, as spark-submit does
        log.debug("driver command not kept at %s: %s", kept, exc)
    return command


def _keep(kept: Path, command: Sequence[str]) -> None:
    kept.parent.mkdir(parents=True, exist_ok=True)
    staged = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
    with open(os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(_COMMAND_START + b"".join(part.encode() + b"\0" for part in command))
    os.replace(staged, kept)
    older = sorted(kept.parent.glob("driver-*.cmd"), key=lambda path: path.stat().st_mtime, reverse=True)
    for path in older[KEPT_COMMANDS:]:
        path.unlink(missing_ok=True)


def start_driver(conf: Mapping[str, str], kept_in: Optional[Path] = None) -> Optional["JavaGateway"]:
    """Start the driver JVM of a session of ``conf`` from its kept command and connect to it (see the module
    doc; ``kept_in``: where the commands are kept, ``commands_dir()`` by default); None when this does not apply or
    the driver did not start (pyspark then starts it itself)."""
    if os.name != "posix" or "PYSPARK_GATEWAY_PORT" in os.environ or os.environ.get("SPARK_TESTING"):
        return None
    install = spark_install()
    if install is None:
        return None
    env = script_environment(install)
    args = submit_arguments(conf)
    kept = (kept_in or commands_dir()) / f"driver-{launch_digest(args, install, env)}.cmd"
    try:
        command = driver_command(args, install, env, kept)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        log.debug("the launcher gave no driver command (%s): spark-submit starts the driver", exc)
        return None
    remove_abandoned_connections(Path(tempfile.gettempdir()))
    connection_dir = Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX))
    _STARTING[connection_dir] = None
    try:
        connection = connection_dir / "connection"
        env.update(SPARK_CONNECT_MODE="0", _PYSPARK_DRIVER_CONN_INFO_PATH=str(connection))
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env, preexec_fn=_ignore_sigint)
        _STARTING[connection_dir] = proc
        while proc.poll() is None and not connection.is_file():
            time.sleep(_POLL_SECONDS)
        if not connection.is_file():
            if _ENDING.is_set():  # stopped by ``remove_starting_connections``: the command is not at fault
                return None
            log.debug("the kept driver command exited with %s: spark-submit starts the driver", proc.returncode)
            kept.unlink(missing_ok=True)
            return None
        port, secret = _read_connection(connection)
    finally:
        shutil.rmtree(connection_dir, ignore_errors=True)
        _STARTING.pop(connection_dir, None)
    gateway = _connect(port, secret)
    gateway.proc = proc  # as pyspark keeps the driver it starts: its stdin is the pipe whose end stops it
    return gateway


def remove_starting_connections() -> None:
    """Stop the drivers still starting and remove their connection folders, for a process that ends now.

    Why: the driver starts on a daemon thread (``spark_session.SparkStart``) while the command does its own work; a
    command that ends before the driver is up (a failed check, an archive it cannot read) ends that thread where
    it stands, and its ``finally`` never removed the folder (in the system's temporary directory, one a run). The
    driver is stopped first: it would otherwise print a Java stack trace when it finds its folder gone (a driver
    that is up stops by itself when the process's pipe to it closes)."""
    _ENDING.set()
    for folder, proc in list(_STARTING.items()):
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
        _STARTING.pop(folder, None)


def remove_abandoned_connections(temporary: Path, now: Optional[float] = None) -> None:
    """Remove this user's connection folders in ``temporary`` older than ``ABANDONED_AFTER_SECONDS``: those of
    processes killed while their driver started (a SIGKILL runs no cleanup; ``remove_starting_connections``
    covers every other end)."""
    now = time.time() if now is None else now
    try:
        folders = list(temporary.glob(f"{_FOLDER_PREFIX}*"))
    except OSError:
        return
    for folder in folders:
        try:
            info = folder.lstat()
        except OSError:
            continue
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                and now - info.st_mtime > ABANDONED_AFTER_SECONDS):
            shutil.rmtree(folder, ignore_errors=True)


def _ignore_sigint() -> None:
    """Ctrl-C goes to the command, which cancels the Spark jobs; the driver must not die of it (as in pyspark)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read_connection(path: Path) -> tuple[int, str]:
    from pyspark.serializers import UTF8Deserializer, read_int

    with open(path, "rb") as info:
        return read_int(info), UTF8Deserializer().loads(info)


def _connect(port: int, secret: str) -> "JavaGateway":
    """pyspark's own gateway to a running driver (its imports of the JVM's packages included): its
    ``launch_gateway`` connects to the one ``PYSPARK_GATEWAY_PORT`` names, set for that call only."""
    from pyspark.java_gateway import launch_gateway

    with _GATEWAY_ENV:
        os.environ["PYSPARK_GATEWAY_PORT"] = str(port)
        os.environ["PYSPARK_GATEWAY_SECRET"] = secret
        try:
            return launch_gateway()
        finally:
            os.environ.pop("PYSPARK_GATEWAY_PORT", None)
            os.environ.pop("PYSPARK_GATEWAY_SECRET", None)
