#!/usr/bin/env bash
# Idempotent setup on a fresh Debian machine (run as root, or with sudo for the apt part):
#   Java 17, the Debian JDBC drivers (SQLite, PostgreSQL), Maven, a virtualenv with the pinned stack, the JVM
#   servers the tests run (jvm/test-services), then a check.
# Re-running does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || [ -f /usr/share/java/xerial-sqlite-jdbc.jar ] || need_apt+=(libxerial-sqlite-jdbc-java)
ls /usr/lib/*/jni/libsqlitejdbc.so >/dev/null 2>&1 || need_apt+=(libxerial-sqlite-jdbc-jni)
[ -f /usr/share/java/postgresql.jar ] || need_apt+=(libpostgresql-jdbc-java)
# the PostgreSQL server: the tests run the production catalog on a private instance
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
# Maven: fetches the JVM artifacts (scripts/fetch_jvm_deps.sh), e.g. the Kafka broker and registry the tests run
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
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
# the servers the tests run for real: Apache Kafka (KRaft) and Apicurio Registry, from Maven Central, checksummed
bash scripts/fetch_jvm_deps.sh jvm/test-services .venv/share/ticdc-lakehouse/test-services | sed 's/^/setup: /'
.venv/bin/python -c 'import ticdc_lakehouse.decode._craft_reader' 2>/dev/null \
  || echo "setup: no compiled Craft reader (no C compiler?): Craft decodes with its Python readers, same events, slower"
# Verify the stack: pyspark 3.5.x (a 6.x Spark provider would have replaced it), the complete Iceberg jar, drivers.
.venv/bin/lakehouse check >/dev/null || { .venv/bin/lakehouse check; exit 1; }
# The driver JVM's class archive (ticdc_lakehouse/jvm_archive.py): trained once per JDK and jar set, ~1 minute.
.venv/bin/python -m ticdc_lakehouse.jvm_archive 2>/dev/null | sed 's/^/setup: /' \
  || echo "setup: no class archive (each run's JVM starts a few seconds slower; nothing else changes)"
echo "setup: ok ($(.venv/bin/python -c 'import pyspark; print("pyspark", pyspark.__version__)'))"
