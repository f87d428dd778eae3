#!/usr/bin/env bash
# Idempotent setup on a fresh Debian machine (run as root, or with sudo for the apt part):
#   Java 17 and Maven, the Debian JDBC drivers (SQLite, PostgreSQL), a virtualenv with the pinned stack, the
#   pinned Iceberg jars from Maven Central (jvm/runtime/pom.xml, checked against jvm/runtime/checksums.sha256),
#   then a check.
# Re-running does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
# javac builds jvm/local-fs (scripts/build_local_fs.sh)
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
[ -f /usr/share/java/sqlite-jdbc.jar ] || [ -f /usr/share/java/xerial-sqlite-jdbc.jar ] || need_apt+=(libxerial-sqlite-jdbc-java)
ls /usr/lib/*/jni/libsqlitejdbc.so >/dev/null 2>&1 || need_apt+=(libxerial-sqlite-jdbc-jni)
[ -f /usr/share/java/postgresql.jar ] || need_apt+=(libpostgresql-jdbc-java)
# the PostgreSQL server: the tests run the production catalog on a private instance
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# the stamp covers what the install builds from: the dependencies and the compiled Craft reader (setup.py)
stamp=".venv/.installed-$(cat pyproject.toml setup.py ticdc_lakehouse/decode/_craft_reader.pyx | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing the pinned Python stack into .venv (a few minutes the first time)"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[airflow,test]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# The JVM jars from Maven Central, verified by checksum, one folder per pom: jvm/NAME/ -> .venv/share/ticdc-lakehouse/
# jars/NAME/. Their own stamp covers the pom and the checksum list, so a changed pin refetches (without
# reinstalling Python packages). fetch_jvm_deps.sh says what failed in one line and exits 1.
fetch_jars() {  # POM_DIR
  local dest=".venv/share/ticdc-lakehouse/jars/$(basename "$1")"
  local jar_stamp="$dest/.fetched-$(cat "$1/pom.xml" "$1/checksums.sha256" | sha256sum | cut -c1-16)"
  local missing=0 jar
  for jar in $(awk '{print $2}' "$1/checksums.sha256"); do [ -f "$dest/$jar" ] || missing=1; done
  if [ ! -f "$jar_stamp" ] || [ "$missing" -eq 1 ]; then
    echo "setup: fetching the pinned jars of $1/pom.xml from Maven Central"
    bash scripts/fetch_jvm_deps.sh "$1" "$dest"
    rm -f "$dest"/.fetched-*
    touch "$jar_stamp"
  fi
}
fetch_jars jvm/runtime
# the servers the tests run for real: Apache Kafka (KRaft) and Apicurio Registry (tests/jvm_service.py)
fetch_jars jvm/test-services
# Hadoop's local file system without a chmod fork per created file (jvm/local-fs; runtime/spark_session.py)
bash scripts/build_local_fs.sh ".venv/share/ticdc-lakehouse/jars/local-fs/ticdc-lakehouse-local-fs.jar"
.venv/bin/python -c 'import ticdc_lakehouse.decode._craft_reader' 2>/dev/null \
  || echo "setup: no compiled Craft reader (no C compiler?): Craft decodes with its Python readers, same events, slower"
# Verify the stack: pyspark 4.1.x (a 6.x Spark provider would have replaced it), the Iceberg jars, drivers.
.venv/bin/lakehouse check >/dev/null || { .venv/bin/lakehouse check; exit 1; }
# Janino's jars without pyspark's signature, first on a local driver's class path (ticdc_lakehouse/runtime/unsigned_jars.py)
.venv/bin/python -m ticdc_lakehouse.runtime.unsigned_jars | sed 's/^/setup: /'
# The driver JVM's class archive (ticdc_lakehouse/runtime/jvm_archive.py, trained by scripts/train_class_archive.py): once per JDK and jar set, ~1 minute.
.venv/bin/python scripts/train_class_archive.py 2>/dev/null | sed 's/^/setup: /' \
  || echo "setup: no class archive (each run's JVM starts a few seconds slower; nothing else changes)"
echo "setup: ok ($(.venv/bin/python -c 'import pyspark; print("pyspark", pyspark.__version__)'))"
