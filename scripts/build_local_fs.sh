#!/usr/bin/env bash
# Compile jvm/local-fs (Hadoop's local file system without a chmod fork per file) into one jar.
#   scripts/build_local_fs.sh DEST_JAR
# Compiled against the Hadoop client API jar pyspark ships, for Java 17. Idempotent: a jar built from the same
# source is kept. On failure, one line on stderr says what failed and what to do, and the exit code is 1.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "build_local_fs: $*" >&2; exit 1; }
[ $# -eq 1 ] || fail "usage: $0 DEST_JAR"
dest=$1
src=jvm/local-fs
stamp="$dest.$(find "$src" -name '*.java' | sort | xargs cat | sha256sum | cut -c1-16)"
[ -f "$dest" ] && [ -f "$stamp" ] && exit 0
command -v javac >/dev/null 2>&1 || fail "javac not found: apt-get install openjdk-17-jdk-headless, then rerun"
hadoop=$(.venv/bin/python -c 'import glob, os, pyspark; print(" ".join(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))))')
[ -n "$hadoop" ] || fail "no hadoop-client-api jar in pyspark's jars: reinstall pyspark (make setup)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
javac -nowarn --release 17 -cp "$hadoop" -d "$work/classes" $(find "$src" -name '*.java') 2>"$work/log" \
  || fail "javac failed on $src ($(head -c 200 "$work/log" | tr '\n' ' '))"
mkdir -p "$(dirname "$dest")"
(cd "$work/classes" && jar cf "$work/out.jar" .) || fail "jar failed: check the JDK install"
mv "$work/out.jar" "$dest"
rm -f "$dest".*
touch "$stamp"
