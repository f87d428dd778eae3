#!/usr/bin/env bash
# Fetch the jars a pom lists from Maven Central into a folder, with Maven's ordinary client, and verify each one.
#   scripts/fetch_jvm_deps.sh POM_DIR DEST_DIR
# POM_DIR holds pom.xml (pinned versions) and checksums.sha256 ("<sha256>  <jar file name>" per line, as sha256sum
# writes it). Only the listed dependencies are copied, not their transitive ones: list every jar you need.
# Idempotent: when DEST_DIR already holds exactly the verified jars, nothing is downloaded. On any failure, one line
# on stderr says what failed and what to do, and the exit code is 1.
set -euo pipefail

fail() { echo "fetch_jvm_deps: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: $0 POM_DIR DEST_DIR"
pom_dir=$(cd "$1" 2>/dev/null && pwd) || fail "no such folder $1"
dest=$2
sums="$pom_dir/checksums.sha256"
[ -f "$pom_dir/pom.xml" ] || fail "$pom_dir/pom.xml missing"
[ -f "$sums" ] || fail "$sums missing: write it with (cd DEST_DIR && sha256sum *.jar) after checking the jars"

verified() { [ -d "$dest" ] && (cd "$dest" && sha256sum --check --status --strict "$sums") 2>/dev/null; }

if ! verified; then
  command -v mvn >/dev/null 2>&1 || fail "mvn not found: apt-get install maven"
  mkdir -p "$dest"
  # a partial or corrupt jar from an earlier run would be kept by Maven's copy (same name): drop what fails
  (cd "$dest" && sha256sum --check --strict "$sums" 2>/dev/null | sed -n 's/: FAILED.*$//p' | xargs -r rm -f --) || true
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  if ! mvn -q -B -f "$pom_dir/pom.xml" dependency:copy-dependencies -DexcludeTransitive=true \
      -DoutputDirectory="$(cd "$dest" && pwd)" >"$log" 2>&1; then
    fail "mvn could not fetch the jars of $pom_dir/pom.xml from Maven Central ($(grep -m1 -E 'ERROR' "$log" | cut -c1-200)); check network access to repo.maven.apache.org and rerun"
  fi
  if ! verified; then
    bad=$(cd "$dest" && sha256sum --check --strict "$sums" 2>/dev/null | grep -v ': OK$' | head -1 || true)
    fail "checksum mismatch in $dest ($bad): a jar differs from $sums; delete $dest and rerun, or fix the pin"
  fi
fi
# jars the checksums no longer list (an older pin) would also land on the classpath: remove them
for jar in "$dest"/*.jar; do
  [ -e "$jar" ] || continue
  grep -qF "  $(basename "$jar")" "$sums" || rm -f "$jar"
done
