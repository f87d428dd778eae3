#!/usr/bin/env bash
# scripts/fetch_jvm_deps.sh POM_DIR DEST_DIR
#   Copy the artifacts POM_DIR/pom.xml lists, with their runtime dependencies, from Maven Central (mvn) into DEST_DIR
#   and check every file against POM_DIR/checksums.sha256 ("<sha256>  <file name>" lines, `sha256sum` format):
#   a file missing from the list, a list entry not downloaded or a different checksum fails, and DEST_DIR is left
#   as it was. Re-running with the same pom and checksums does nothing.
#   Refresh the checksums after changing the pom: FETCH_JVM_DEPS_WRITE_CHECKSUMS=1 scripts/fetch_jvm_deps.sh ...
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 POM_DIR DEST_DIR" >&2; exit 2; }
pom_dir=$(cd "$1" && pwd)
mkdir -p "$(dirname "$2")"
dest="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"  # absolute: mvn resolves paths against the pom's folder
sums="$pom_dir/checksums.sha256"
stamp_name=".fetched-$({ cat "$pom_dir/pom.xml"; cat "$sums" 2>/dev/null || true; } | sha256sum | cut -c1-16)"
[ -f "$dest/$stamp_name" ] && exit 0
command -v mvn >/dev/null || { echo "fetch_jvm_deps: mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
tmp=$(mktemp -d "${dest%/}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mvn -q -B -f "$pom_dir/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
  >"$tmp.mvn.log" 2>&1 || { tail -20 "$tmp.mvn.log" >&2; rm -f "$tmp.mvn.log"
                             echo "fetch_jvm_deps: mvn could not fetch $pom_dir/pom.xml (log above)" >&2; exit 1; }
rm -f "$tmp.mvn.log"
if [ "${FETCH_JVM_DEPS_WRITE_CHECKSUMS:-}" = 1 ]; then
  (cd "$tmp" && sha256sum -- * | LC_ALL=C sort -k2) > "$sums"
  echo "fetch_jvm_deps: wrote $sums" >&2
  stamp_name=".fetched-$(cat "$pom_dir/pom.xml" "$sums" | sha256sum | cut -c1-16)"
fi
[ -f "$sums" ] || { echo "fetch_jvm_deps: $sums missing: write it with FETCH_JVM_DEPS_WRITE_CHECKSUMS=1" >&2; exit 1; }
got=$(cd "$tmp" && ls -1 | LC_ALL=C sort)
want=$(awk '{print $2}' "$sums" | LC_ALL=C sort)
[ "$got" = "$want" ] || { echo "fetch_jvm_deps: the files mvn fetched differ from $sums:" >&2
                          diff <(echo "$want") <(echo "$got") >&2 || true; exit 1; }
(cd "$tmp" && sha256sum --check --strict --quiet "$sums") >&2 \
  || { echo "fetch_jvm_deps: checksum mismatch against $sums (above): not installing" >&2; exit 1; }
# replace DEST_DIR whole: what was derived from the old files (unpacked archives, class archives) goes with them
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
touch "$dest/$stamp_name"
echo "fetch_jvm_deps: $(wc -l < "$sums") files from $pom_dir/pom.xml in $dest"
