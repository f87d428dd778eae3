"""The one Spark session factory every job uses.

Why one factory: the Iceberg runtime jar, the JDBC catalog ``lake`` and its driver must be configured the same
way by the CLI, the Airflow tasks, ``spark-submit`` jobs and the tests, or they would read different catalogs.

Jars: Apache Iceberg's own Spark runtime and AWS bundle, fetched from Maven Central by ``make setup``
(``jvm/runtime/pom.xml``, pinned, checked against ``jvm/runtime/checksums.sha256``) into the virtualenv's
``share/ticdc-lakehouse/jars/runtime/``; the JDBC drivers from Debian's packages.
"""

from __future__ import annotations

import glob
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional

from ticdc_lakehouse import PROJECT_ROOT
from ticdc_lakehouse.runtime.config import Settings
from ticdc_lakehouse.runtime.jar_dirs import jvm_jar_dir
from ticdc_lakehouse.runtime.jvm_archive import driver_java_options
from ticdc_lakehouse.runtime.jvm_names import remember_jvm_names
from ticdc_lakehouse.runtime.unsigned_jars import unsigned_copies
from ticdc_lakehouse.runtime.object_storage import (
    aws_java_options,
    iceberg_s3_properties,
    is_object_storage,
    pyiceberg_s3_properties,
)
from ticdc_lakehouse.runtime.permissions import HADOOP_UMASK_KEY, apply_umask, effective_umask
from ticdc_lakehouse.core.redaction import is_secret_key, mask_uri_password

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

ICEBERG_VERSION = "1.11.0"
SPARK_LINE = "4.1"
#: the jars jvm/runtime/pom.xml lists (Iceberg 1.11.0 is built against Spark 4.1.1, Scala 2.13, Java 17)
ICEBERG_JAR_NAME = f"iceberg-spark-runtime-{SPARK_LINE}_2.13-{ICEBERG_VERSION}.jar"
ICEBERG_AWS_JAR_NAME = f"iceberg-aws-bundle-{ICEBERG_VERSION}.jar"
DEBIAN_JAR_DIR = Path("/usr/share/java")
DEBIAN_JNI_DIR = Path("/usr/lib/x86_64-linux-gnu/jni")
SQLITE_JARS = ("sqlite-jdbc.jar", "xerial-sqlite-jdbc.jar")
PROJECT_LOG4J = PROJECT_ROOT / "conf" / "log4j2.properties"
POSTGRES_JARS = ("postgresql.jar",)


class StackError(RuntimeError):
    """The installed stack is not the pinned one; the message says what to fix."""


def _fetched_jar(file_name: str) -> Path:
    jar = jvm_jar_dir() / file_name
    if not jar.is_file():
        raise StackError(
            f"{file_name} missing from {jar.parent}: run `make setup` (it fetches jvm/runtime/pom.xml's jars "
            "from Maven Central and checks them against jvm/runtime/checksums.sha256)"
        )
    return jar


def iceberg_runtime_jar() -> Path:
    """Apache Iceberg's Spark 4.1 / Scala 2.13 runtime jar, as fetched and verified by ``make setup``."""
    return _fetched_jar(ICEBERG_JAR_NAME)


def iceberg_aws_jar() -> Path:
    """Iceberg's AWS bundle (S3FileIO and its AWS SDK v2, shaded), as fetched and verified by ``make setup``."""
    return _fetched_jar(ICEBERG_AWS_JAR_NAME)


#: Hadoop's local file system without a ``chmod`` fork per created file (jvm/local-fs, built by ``make setup``)
LOCAL_FS_JAR_NAME = "ticdc-lakehouse-local-fs.jar"
LOCAL_FS_CLASS = "io.ticdc.lakehouse.NoForkLocalFileSystem"


def local_fs_jar() -> Optional[Path]:
    """The jar of ``LOCAL_FS_CLASS``, or None where it was not built (the Docker image, whose warehouse is on
    object storage): Hadoop's own local file system then forks ``chmod`` for each file, slower, same files.
    Used by local sessions only (``spark_plan``)."""
    jar = jvm_jar_dir("local-fs") / LOCAL_FS_JAR_NAME
    return jar if jar.is_file() else None


def check_pyspark_version() -> str:
    import pyspark

    if not pyspark.__version__.startswith(SPARK_LINE + "."):
        raise StackError(
            f"pyspark {pyspark.__version__} is installed, {SPARK_LINE}.x is required (Iceberg {ICEBERG_VERSION}'s "
            f"runtime is built for Spark {SPARK_LINE}). A 6.x apache-spark Airflow provider pulls pyspark-client "
            "which overwrites pyspark: pin apache-airflow-providers-apache-spark==5.6.0 and run `make setup`."
        )
    return pyspark.__version__


def _first_existing(names: tuple[str, ...]) -> Optional[Path]:
    for name in names:
        path = DEBIAN_JAR_DIR / name
        if path.is_file():
            return path
    return None


def jdbc_driver_jar(catalog_uri: str) -> Path:
    """The JDBC driver jar for the catalog URI (SQLite or PostgreSQL) from Debian's packages."""
    if catalog_uri.startswith("jdbc:sqlite:"):
        jar = _first_existing(SQLITE_JARS)
        package = "libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni"
    elif catalog_uri.startswith("jdbc:postgresql:"):
        jar = _first_existing(POSTGRES_JARS)
        package = "libpostgresql-jdbc-java"
    else:
        raise StackError(f"unsupported catalog URI {catalog_uri!r}: use jdbc:sqlite:PATH or jdbc:postgresql://...")
    if jar is None:
        raise StackError(f"JDBC driver for {catalog_uri.split(':')[1]} missing: apt-get install {package}")
    return jar


@dataclass(frozen=True)
class SparkPlan:
    """Everything needed to build (or spark-submit) a session, as plain data."""

    master: str
    app_name: str
    conf: dict[str, str]
    jars: tuple[str, ...]
    #: settings that carry a secret (the catalog password, a password inside its URI, secret-looking
    #: ``spark.conf`` keys): never in ``conf``, because pyspark and spark-submit turn ``conf`` into ``--conf`` JVM
    #: arguments that every user of the machine reads with ``ps``. They are set on the running session
    #: (:func:`apply_secrets`) before the catalog is first used, so they travel over the Py4J socket only.
    secrets: dict[str, str] = field(default_factory=dict)


#: ``spark.python.daemon.module``: see ``runtime.python_daemon``
PYTHON_DAEMON_MODULE = "ticdc_lakehouse.runtime.python_daemon"


def spark_plan(settings: Settings, app_name: Optional[str] = None) -> SparkPlan:
    """The session settings for this deployment; pure, so spark-submit and tests share it."""
    catalog = settings.catalog_name
    uri = settings.catalog_uri
    required = jdbc_driver_jar(uri)
    # every installed catalog driver, so one session can also open a second deployment's catalog
    others = [p for p in (_first_existing(SQLITE_JARS), _first_existing(POSTGRES_JARS)) if p and p != required]
    local = settings.spark.master.startswith("local")  # driver and executors in this one JVM
    # a local session only: there the jar is on the driver JVM's class path, where Hadoop looks up file system
    # classes; a cluster's warehouse is on object storage or HDFS
    local_fs = local_fs_jar() if local else None
    jars = (str(iceberg_runtime_jar()), str(iceberg_aws_jar()), str(required), *map(str, others),
            *([str(local_fs)] if local_fs is not None else []))
    if local:
        # first on the driver's class path: Janino's classes from copies without pyspark's jar signature, which
        # the JVM would verify class by class and the class archive cannot keep (``unsigned_jars``)
        jars = (*unsigned_copies(), *jars)
    spark = settings.spark
    prefix = f"spark.sql.catalog.{catalog}"
    log_config = PROJECT_LOG4J if PROJECT_LOG4J.is_file() else None
    java_opts = (
        f"-Djava.library.path={DEBIAN_JNI_DIR} -Dorg.sqlite.lib.path={DEBIAN_JNI_DIR} "
        "-Dorg.sqlite.lib.name=libsqlitejdbc.so"
    )
    if log_config is not None:
        java_opts += f" -Dlog4j2.configurationFile={log_config.as_uri()}"
    class_archive = driver_java_options(jars, spark.class_archive)
    # A run is a fresh JVM of half a minute or so. Its optimizing compiler (C2) spent a fifth to a third of the
    # run's CPU compiling Spark, Arrow, Parquet and Iceberg code (perf, by thread: 7.8 of 37 CPU-s in a 55k-event
    # run, even with ten times higher Tier4 thresholds), on the cores the work needs, and the run ended before
    # that code paid back. C1 alone: about a third less CPU and a fifth less wall time for runs of 55k events,
    # the same for a 1M-event merge (bench/merge.py, interleaved runs). Only the driver's JVM: a cluster's
    # executors live long. The parallel collector, not the JVM's default G1: a run is a batch job, whose
    # throughput counts and whose pauses do not, and G1's concurrent work and write barriers cost a 275k-event
    # backfill 2% of its CPU and a 1.1M-event one 6% (bench/side_by_side.py, pairs started together).
    tuning = spark.driver_java_options
    conf: dict[str, str] = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": uri,
        f"{prefix}.warehouse": settings.warehouse,
        f"{prefix}.jdbc.schema-version": "V1",
        # Schema changes are also committed from pyiceberg and other processes: never serve stale metadata.
        f"{prefix}.cache-enabled": "false",
        "spark.sql.defaultCatalog": catalog,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.driver.memory": spark.driver_memory,
        "spark.executor.memory": spark.executor_memory,
        "spark.driver.extraJavaOptions": " ".join(o for o in (java_opts, tuning, class_archive) if o),
        "spark.executor.extraJavaOptions": java_opts,
        "spark.driver.extraLibraryPath": str(DEBIAN_JNI_DIR),
        "spark.executor.extraLibraryPath": str(DEBIAN_JNI_DIR),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        ADAPTIVE: "true",
        # The decoded events are cached once per run and scanned by every MERGE: compressing the cache cost a
        # quarter of the decode stage's time, and the cache spills to disk when memory is short anyway.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.warehouse.dir": str(settings.home / "spark-warehouse"),
        # Every change set finds its table's events by lower-cased names (TiDB names are case-insensitive). Spark
        # 4 lower-cases through ICU by default, a tenth of a many-table run's executor time; the JVM's own
        # mapping (the same Unicode default case mapping, with an ASCII fast path) is several times cheaper.
        "spark.sql.icu.caseMappings.enabled": "false",
        # pyspark's worker daemon on a search path a task does not re-read (about 0.13 s a Python task saved)
        "spark.python.daemon.module": PYTHON_DAEMON_MODULE,
        # what Spark adds to the environment of SQL's Python tasks, given to every Python task: Spark keys its
        # worker daemons by that environment, so the workers a job of the RDD API starts before the session exists
        # serve the decode's tasks (``decode_stage.warm_decode_workers``) instead of a second daemon's
        "spark.executorEnv.SPARK_SIMPLIFIED_TRACEBACK": "1",
        # pyspark 4 records the Python call site of every Column and DataFrame call in the JVM (for the "query
        # context" of an error): 8-20 gateway calls and a walk of the Python stack for each, where the call
        # itself is one or two. The merge builds its change sets from thousands of such calls; its errors name
        # what failed on their own (``value_checks``)
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
    if local:
        # A local session talks to itself only: stay on loopback whatever the host name resolves to.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        # A local session's tasks run in the driver's JVM: short-lived and, by default, C1-only (above). Compiling
        # each stage's generated Java with Janino cost more than the compiled stage saved. Measured, interleaved:
        # a 275k-event backfill of four tables 17.5 s vs 18.7 s (the write job's plans: 2.0 s vs 2.9 s of driver
        # time before the job), a 1M-event merge the same (25.4-26.8 s either way). Expressions are still compiled.
        conf["spark.sql.codegen.wholeStage"] = "false"
    if uri.startswith("jdbc:sqlite:"):
        # Several connections of one JVM (and pyiceberg, and `lakehouse status` in another process) share the
        # file: wait for a lock instead of failing, and let readers run beside the writer.
        conf[f"{prefix}.jdbc.busy_timeout"] = "60000"
        conf[f"{prefix}.jdbc.journal_mode"] = "WAL"
        # (Iceberg 1.10.2's catalog probe left a ResultSet open on an existing file, pinning a connection at an old
        # snapshot: we skipped it with jdbc.init-catalog-tables=false. 1.11.0 closes it; the setting is gone.)
    for key, value in iceberg_s3_properties(settings.warehouse, settings.raw).items():
        conf[f"{prefix}.{key}"] = value
    aws_options = aws_java_options(settings.warehouse, settings.raw)
    if aws_options:
        conf["spark.driver.extraJavaOptions"] += " " + aws_options
        conf["spark.executor.extraJavaOptions"] += " " + aws_options
    if settings.catalog_user:
        conf[f"{prefix}.jdbc.user"] = settings.catalog_user
    if settings.catalog_password:
        conf[f"{prefix}.jdbc.password"] = settings.catalog_password
    # Hadoop's local file system gives each file it creates 666 minus this, whatever the process umask
    conf[HADOOP_UMASK_KEY] = f"{effective_umask(settings):03o}"
    if local_fs is not None:
        conf["spark.hadoop.fs.file.impl"] = LOCAL_FS_CLASS
    conf.update({str(k): str(v) for k, v in spark.conf.items()})
    # ANSI mode (Spark 4's default), stated and kept whatever spark.conf says: without it a cast that cannot hold
    # a value gives NULL and arithmetic overflows wrap, i.e. the engine would change values silently. Every cast
    # in the merge is written for it (try_cast where a failure is expected and handled).
    conf["spark.sql.ansi.enabled"] = "true"
    secrets = {key: value for key, value in conf.items() if _is_secret_setting(key, value)}
    public = {key: value for key, value in conf.items() if key not in secrets}
    return SparkPlan(master=spark.master, app_name=app_name or spark.app_name, conf=public, jars=jars,
                     secrets=secrets)


def _is_secret_setting(key: str, value: str) -> bool:
    """A setting whose name says secret (``...jdbc.password``, ``...secret.key``) or whose value hides a password
    (``jdbc:postgresql://h/db?password=...``, ``user:pw@host``). The catalog's user name goes with them: it is
    half of the credential and costs nothing to keep off the command line."""
    return (is_secret_key(key) or mask_uri_password(value) != value
            or key.endswith((".jdbc.user", ".jdbc.username")))


def apply_secrets(spark, plan: SparkPlan) -> None:
    """Set ``plan.secrets`` on a running session (before its catalog is first used: Spark reads a catalog's
    settings when it first loads it). ``spark.hadoop.X`` secrets also go into the Hadoop configuration as ``X``,
    where file systems look for them."""
    for key, value in plan.secrets.items():
        spark.conf.set(key, value)
        if key.startswith("spark.hadoop."):
            name = key[len("spark.hadoop."):]
            spark.conf.set(name, value)
            spark.sparkContext._jsc.hadoopConfiguration().set(name, value)


def session_plan(settings: Settings, app_name: Optional[str] = None) -> SparkPlan:
    """:func:`spark_plan` for a session about to open the catalog now."""
    return spark_plan(settings, app_name)


def jar_settings(plan: SparkPlan) -> dict[str, str]:
    """How the session gets ``plan.jars``. A local session puts them on the driver JVM's class path: its classes
    then load from the application class loader, which the class archive (``jvm_archive``) can share, and no task
    copies the 110 MB of jars into the executor's scratch directory first, as ``spark.jars`` makes every local
    run do. A cluster's executors need ``spark.jars`` to fetch them."""
    if not plan.master.startswith("local"):
        return {"spark.jars": ",".join(plan.jars)}
    own = plan.conf.get("spark.driver.extraClassPath")
    return {"spark.driver.extraClassPath": os.pathsep.join([*plan.jars, *([own] if own else [])])}


def get_spark(settings: Settings, app_name: Optional[str] = None,
              on_context: Optional[Callable[["SparkContext"], None]] = None) -> "SparkSession":
    """Build (or reuse) the session: paid once per run, shared by every table the run touches.

    ``on_context``: called with a new session's ``SparkContext`` as soon as it exists, before the session is
    created on it (a second or so: jobs of the RDD API can run meanwhile); not called for a session that exists."""
    check_pyspark_version()
    plan = session_plan(settings, app_name)
    prepare_local_state(settings)
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON") or _python())
    if plan.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        # One JVM per process: a second deployment (another catalog name, e.g. in tests) is added at runtime.
        use_catalog(active, settings, plan)
        remember_jvm_names(active.sparkContext)
        return active
    conf = {"spark.master": plan.master, "spark.app.name": plan.app_name, **plan.conf, **jar_settings(plan)}
    if settings.spark.kept_driver_command:
        _start_driver(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    if on_context is not None:  # the builder's own first step, taken here to hand the context over
        from pyspark import SparkConf, SparkContext

        on_context(SparkContext.getOrCreate(SparkConf().setAll([(key, str(value)) for key, value in conf.items()])))
    spark = builder.getOrCreate()
    remember_jvm_names(spark.sparkContext)
    apply_secrets(spark, plan)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _start_driver(conf: Mapping[str, str]) -> None:
    """Start this process's driver JVM from its kept command (``driver_launch``) unless one runs already; when
    that does not apply, the session's builder starts it through spark-submit."""
    from pyspark import SparkContext

    from ticdc_lakehouse.runtime.driver_launch import start_driver

    if SparkContext._gateway is None:
        gateway = start_driver(conf)
        if gateway is not None:
            _warm_scala_reflection(gateway)
            SparkContext._ensure_initialized(gateway=gateway)


def _warm_scala_reflection(gateway) -> None:
    """Build Scala's runtime reflection universe on a JVM thread of its own while this one creates the context.

    Why: a session's creation loads the session extensions on the classpath, among them MLlib's function
    registration, whose user-defined functions need Scala's reflection universe: about 0.4 s of one core to build
    (JFR: ``JavaUniverse.init`` under ``SparkSession.<init>``), on the path of every run, while the other core
    waits. Built beside the context's creation, the session finds it ready: about 0.15 s less to a session
    (medians of four fresh drivers). The universe is a lazy value Scala builds once under its own lock, whoever
    asks first; best effort, a failure only logs."""
    import threading

    def build() -> None:
        try:
            getattr(gateway.jvm.scala.reflect.runtime, "package").universe()
        except Exception as exc:  # noqa: BLE001 - a warm-up: the session builds it itself if this failed
            logging.getLogger(__name__).debug("Scala's reflection universe not built ahead: %s", exc)

    threading.Thread(target=build, name="lakehouse-warm-scala-reflection", daemon=True).start()


#: how long a ``SparkStart`` holds its caller back while its thread imports pyspark (see ``SparkStart.__init__``)
LAUNCH_WAIT_SECONDS = 2.0


class SparkStart:
    """The driver JVM starting on a thread of its own, from the moment a command knows it will need it.

    Why: a session takes seconds to start (the JVM, Spark, the catalog), and the command has Python work of its own
    before the first Spark job: importing the pipeline (about a second: pyspark, pyarrow, sqlglot, pyiceberg) and
    landing the records. Started after them, the JVM's start added to them; started first, it runs beside them.

    The thread is a daemon: a command that fails before it needs the session (a changefeed lock held elsewhere, a
    missing archive) exits at once, and the JVM, which exits when its parent's pipe closes, goes with it.
    ``session()`` waits for the session (raising what its start raised) and gives it the SIGINT handler pyspark
    installs only from the main thread (Ctrl-C cancels the running Spark jobs), and makes it the calling thread's
    active session in the JVM: Spark reads a session's settings (the catalog ``lake`` among them) through the
    thread's active session, which only the thread that built it had."""

    def __init__(self, settings: Settings, app_name: Optional[str] = None,
                 then: Optional[Callable[["SparkSession"], None]] = None,
                 on_context: Optional[Callable[["SparkContext"], None]] = None) -> None:
        """``then``: work for the new session on the same thread once it is handed over (``session()`` does not
        wait for it), e.g. warming Spark's parser. ``on_context``: work for a new session's ``SparkContext``, on a
        thread of its own ("spark-start-context") while the session is created on it (``get_spark``), e.g. starting
        the Python workers. Both best effort: what they raise is logged, not raised."""
        import importlib
        import threading

        self._outcome: list = []
        self._done = threading.Event()
        self._launching = threading.Event()

        def beside(context) -> None:
            def run() -> None:
                try:
                    on_context(context)
                except Exception as exc:  # noqa: BLE001 - a warm-up, as ``then``
                    logging.getLogger(__name__).debug("beside the session's creation: %s", exc)

            threading.Thread(target=run, name="spark-start-context", daemon=True).start()

        def start() -> None:
            try:
                try:
                    importlib.import_module("pyspark.sql")  # what the caller waits for: see the end of __init__
                finally:
                    self._launching.set()
                self._outcome.append((get_spark(settings, app_name, on_context=beside if on_context else None),
                                      None))
            except BaseException as exc:  # noqa: BLE001 - raised again by session(), in the caller's thread
                self._outcome.append((None, exc))
            finally:
                self._done.set()
            spark = self._outcome[0][0]
            if then is not None and spark is not None:
                try:
                    then(spark)
                except Exception as exc:  # noqa: BLE001 - a warm-up: the work it prepares reports for itself
                    logging.getLogger(__name__).debug("after the session's start: %s", exc)

        threading.Thread(target=start, name="spark-start", daemon=True).start()
        # Returns once the thread has imported pyspark and goes on to launch the JVM (at most LAUNCH_WAIT_SECONDS).
        # Why: the caller's next step is its own Python work (importing the pipeline: pyarrow, pandas, sqlglot,
        # pyiceberg; landing an archive), and two threads share one interpreter lock: the launch waited for both
        # (spark-submit 0.4-0.85 s after the process started, 0.25 s with the wait), while the JVM's start, not
        # the work beside it, is what the first Spark job waits for.
        self._launching.wait(LAUNCH_WAIT_SECONDS)

    def session(self) -> "SparkSession":
        import signal
        import threading

        self._done.wait()
        spark, error = self._outcome[0]
        if error is not None:
            raise error
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        if threading.current_thread() is threading.main_thread():
            context = spark.sparkContext

            def cancel_jobs(signum, frame):  # pyspark's own handler (SparkContext.__init__), for the main thread
                context.cancelAllJobs()
                raise KeyboardInterrupt()

            signal.signal(signal.SIGINT, cancel_jobs)
        return spark


def session_of(spark, settings: Settings, app_name: Optional[str] = None) -> "SparkSession":
    """The session a pipeline step runs on: the one given, the one a ``SparkStart`` is starting, or a new one."""
    if isinstance(spark, SparkStart):
        return spark.session()
    return spark if spark is not None else get_spark(settings, app_name)


#: Spark's adaptive query execution: on for the session, off for steps that measured better without it
ADAPTIVE = "spark.sql.adaptive.enabled"


@contextmanager
def session_conf(spark, values: Mapping[str, str]) -> Iterator[None]:
    """The session's SQL settings ``values`` while the block runs, the previous ones after it. They are the
    session's, seen by every thread: for steps that run alone, or whose side-by-side jobs all want them."""
    previous = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def prepare_local_state(settings: Settings) -> None:
    """Create ``LAKEHOUSE_HOME`` and the SQLite catalog's directory (the JDBC driver will not), under the
    deployment's umask (which the JVM started next inherits)."""
    apply_umask(settings)
    settings.home.mkdir(parents=True, exist_ok=True)
    if settings.catalog_uri.startswith("jdbc:sqlite:"):
        Path(settings.catalog_uri[len("jdbc:sqlite:"):]).parent.mkdir(parents=True, exist_ok=True)


def use_catalog(spark, settings: Settings, plan: Optional[SparkPlan] = None) -> None:
    """Register ``settings``' catalog in a running session and make it the current catalog."""
    plan = plan or session_plan(settings)
    prepare_local_state(settings)
    prefix = f"spark.sql.catalog.{settings.catalog_name}"
    for key, value in plan.conf.items():
        if key.startswith(prefix):
            spark.conf.set(key, value)
    apply_secrets(spark, plan)
    spark.conf.set("spark.sql.defaultCatalog", settings.catalog_name)


def _python() -> str:
    import sys

    return sys.executable


def pyiceberg_catalog(settings: Settings):
    """The same JDBC catalog, opened from pyiceberg's ``SqlCatalog`` under the same name.

    pyiceberg speaks SQLAlchemy URLs; the JDBC URI is translated (``jdbc:sqlite:/p`` -> ``sqlite:////p``,
    ``jdbc:postgresql://h/db`` -> ``postgresql+psycopg2://user:pw@h/db``).
    """
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = settings.warehouse
    if is_object_storage(warehouse):
        return SqlCatalog(settings.catalog_name, uri=sqlalchemy_uri(settings), warehouse=warehouse,
                          **pyiceberg_s3_properties(warehouse, settings.raw))
    return SqlCatalog(settings.catalog_name, uri=sqlalchemy_uri(settings), warehouse=Path(warehouse).as_uri())


def sqlalchemy_uri(settings: Settings) -> str:
    uri = settings.catalog_uri
    if uri.startswith("jdbc:sqlite:"):
        return "sqlite:///" + str(Path(uri[len("jdbc:sqlite:"):]).resolve())
    if uri.startswith("jdbc:postgresql://"):
        from urllib.parse import quote

        rest = uri[len("jdbc:postgresql://"):]
        auth = ""
        if settings.catalog_user:
            auth = quote(settings.catalog_user, safe="")
            if settings.catalog_password:
                auth += ":" + quote(settings.catalog_password, safe="")
            auth += "@"
        return f"postgresql+psycopg2://{auth}{rest}"
    raise StackError(f"unsupported catalog URI {uri!r}")


def list_jars() -> list[str]:
    return sorted(glob.glob(str(DEBIAN_JAR_DIR / "*.jar")))
