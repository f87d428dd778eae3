"""Unsigned copies of the signed jars in pyspark's distribution, first on a local session's driver class path.

Why: pyspark ships Janino, the compiler of every class Spark generates for an expression, and its
commons-compiler, signed (a dummy signature). The JVM digests every class file it loads from a signed jar
(SHA-256, against the signature's manifest), and class-data sharing (``jvm_archive``) never archives classes of
a signed jar: each fresh driver loaded, parsed, verified and digested Janino's classes again, on the way of its
first generated projections (JFR: the digests inside the task threads' class loading, under
``CodeGenerator.doCompile``). A copy holds the same entries without the signature files and the manifest's
per-entry digests; earlier on the class path, its classes are the ones loaded, and the archive keeps them.

``make setup`` writes the copies (``python -m ticdc_lakehouse.runtime.unsigned_jars``) before it trains the class
archive. A session uses a copy only while pyspark still ships the jar of that name (an upgraded pyspark with
another Janino finds none until setup runs again, and runs as before); a cluster's executors keep pyspark's own.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Optional

from ticdc_lakehouse.runtime.jar_dirs import jvm_jar_dir, spark_jars_dir

#: the signed jars of pyspark's distribution whose classes every run loads
SIGNED_SPARK_JARS = ("janino-*.jar", "commons-compiler-*.jar")
#: a jar entry that makes it signed: the signature file and its signature block (``jar`` tool's rules)
_SIGNATURE_ENTRY = re.compile(r"^META-INF/(?:[^/]+\.(?:SF|DSA|RSA|EC)|SIG-[^/]*)$", re.IGNORECASE)
_MANIFEST = "META-INF/MANIFEST.MF"


def copies_dir() -> Path:
    """Where setup keeps the copies: beside the fetched jars."""
    return jvm_jar_dir("unsigned")


def signed_sources(spark_jars: Path) -> list[Path]:
    """The jars of ``SIGNED_SPARK_JARS`` in ``spark_jars``, by name."""
    return sorted(path for pattern in SIGNED_SPARK_JARS for path in spark_jars.glob(pattern))


def unsigned_copies(spark_jars: Optional[Path] = None, into: Optional[Path] = None) -> tuple[str, ...]:
    """The copies a session puts first on its driver class path: one for each signed jar pyspark ships that has
    a copy of its name in ``into``. Reads nothing but file names (a session's plan is built on every run)."""
    spark_jars = spark_jars or spark_jars_dir()
    if spark_jars is None:
        return ()
    into = into or copies_dir()
    return tuple(str(into / source.name) for source in signed_sources(spark_jars) if (into / source.name).is_file())


def manifest_without_digests(manifest: bytes) -> bytes:
    """The manifest's main section only: the per-entry sections of a signed jar hold nothing but digests."""
    text = manifest.replace(b"\r\n", b"\n")
    main = text.split(b"\n\n", 1)[0].rstrip(b"\n")
    return main + b"\n\n"


def write_unsigned_copy(source: Path, target: Path) -> None:
    """``source`` without its signature, as ``target``: every other entry byte for byte (same names, order,
    times and compression). Written beside the target and renamed into place, so a reader never sees half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(source) as jar, zipfile.ZipFile(staged, "w") as out:
            for entry in jar.infolist():
                if _SIGNATURE_ENTRY.match(entry.filename):
                    continue
                data = jar.read(entry)
                if entry.filename.upper() == _MANIFEST:
                    data = manifest_without_digests(data)
                out.writestr(entry, data, compress_type=entry.compress_type)
        os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)


def is_signed(jar: Path) -> bool:
    with zipfile.ZipFile(jar) as archive:
        return any(_SIGNATURE_ENTRY.match(name) for name in archive.namelist())


def write_copies(spark_jars: Optional[Path] = None, into: Optional[Path] = None) -> list[Path]:
    """Write the missing copies of this pyspark's signed jars into ``into`` and remove copies of jars it no longer
    ships; returns the copies in place. Idempotent: an existing copy is kept."""
    spark_jars = spark_jars or spark_jars_dir()
    if spark_jars is None:
        return []
    into = into or copies_dir()
    sources = signed_sources(spark_jars)
    names = {source.name for source in sources}
    if into.is_dir():
        for stale in into.glob("*.jar"):
            if stale.name not in names:
                stale.unlink(missing_ok=True)
    written = []
    for source in sources:
        target = into / source.name
        if not target.is_file():
            write_unsigned_copy(source, target)
        written.append(target)
    return written


def main() -> int:
    """``make setup``'s step: the copies, or one line saying why there are none (runs go on without them)."""
    try:
        copies = write_copies()
    except (OSError, zipfile.BadZipFile) as exc:
        print(f"no unsigned copies of pyspark's signed jars ({exc}): each run's JVM verifies Janino's classes")
        return 0
    print(f"unsigned copies of {', '.join(path.name for path in copies) or 'no jars'} in {copies_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
