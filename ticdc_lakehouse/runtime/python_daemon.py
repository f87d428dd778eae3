"""The Python worker daemon of our Spark sessions (``spark.python.daemon.module``): pyspark's own daemon, started
on a module search path without the archives a task would re-read for nothing.

Why: Spark puts ``pyspark.zip``, py4j's zip and the ``spark-core`` jar on every Python worker's path, and each
task begins with ``importlib.invalidate_caches()`` (``pyspark.worker_util.setup_spark_files``). On Python 3.11
that makes every ``zipimporter`` read its archive's whole directory again: the jar's 5,362 entries and, once per
pyspark subpackage imported from the zip, its 1,328. Measured: about 0.13 s per task, whatever the task does (a
``mapInArrow`` task of no rows took 0.14 s), so a job's Python tasks cost more than their work.

The jar holds no Python. ``pyspark.zip`` is a copy of the pyspark package installed beside it (pip's pyspark
ships both): where that package sits on the path, pyspark is imported from its files, which a new task does not
re-read. Anything else stays as Spark set it; on a Spark distribution (pyspark only as the zip) nothing changes.

The daemon also imports what our tasks import before it forks its workers (``preload_worker_modules``).
"""

from __future__ import annotations

import sys
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Sequence


def worker_search_path(path: Sequence[str]) -> list[str]:
    """``path`` without its ``.jar`` entries, and without the ``pyspark.zip`` of a pyspark package installed in
    another entry of it (``<dir>/pyspark/python/lib/pyspark.zip`` beside ``<dir>/pyspark/__init__.py``). Unchanged
    when pyspark could not be imported from what would remain."""
    kept = [entry for entry in path if not entry.endswith(".jar")]
    for entry in list(kept):
        zip_path = Path(entry)
        if zip_path.name != "pyspark.zip" or len(zip_path.parents) < 4:
            continue
        package = zip_path.parents[2]  # <dir>/pyspark
        if (package / "__init__.py").is_file() and str(package.parent) in kept:
            kept.remove(entry)
    if PathFinder.find_spec("pyspark", kept) is None:
        return list(path)
    return kept


def use_worker_search_path() -> None:
    """Set ``sys.path`` to ``worker_search_path`` of it, and forget the importers of the entries it drops:
    ``invalidate_caches`` visits every importer Python has cached, on the path or not, and finding this module
    already created one for each entry."""
    kept = worker_search_path(sys.path)
    dropped = [entry for entry in sys.path if entry not in kept]
    sys.path[:] = kept
    for cached in list(sys.path_importer_cache):
        if any(cached == entry or cached.startswith(entry + "/") for entry in dropped):
            del sys.path_importer_cache[cached]


#: what our Python tasks import: the decode stage and its file writer, the task-side writers, pyarrow, and pandas,
#: which pyarrow imports at the first array it builds from Python values (``pa.array``); with them every protocol's
#: decoder
PRELOADED = ("pyarrow", "pandas", "ticdc_lakehouse.merge.decode_stage", "ticdc_lakehouse.merge.decoded_files",
             "ticdc_lakehouse.merge.batch_write")


def preload_worker_modules() -> list[str]:
    """Import ``PRELOADED`` and every registered protocol's decoder, in the daemon, before it forks a worker; best
    effort: a module that cannot be imported here is imported by the task that needs it, which reports what fails.
    Returns the names not imported.

    Why: each worker imported them itself, at its first task of ours (pandas 0.47 s, the decode stage 0.1 s, the
    decoders 0.08 s), and a 2-core session forks two. Imported once in the daemon, a forked worker finds them
    loaded: a 20k-transaction backfill's Python workers spent 0.5 CPU-s less (``bench/side_by_side.py``)."""
    import importlib

    failed = []
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - best effort, see the docstring
            failed.append(name)
    try:
        from ticdc_lakehouse.decode.protocols import SPECS
    except Exception:  # noqa: BLE001 - best effort
        return [*failed, "ticdc_lakehouse.decode.protocols"]
    for spec in SPECS:
        try:
            spec.decoder_class()
        except Exception:  # noqa: BLE001 - a decoder's own library missing here: its task reports it
            failed.append(spec.name)
    return failed


if __name__ == "__main__":
    use_worker_search_path()
    preload_worker_modules()
    from pyspark import daemon  # after the change: pyspark from its installed files, not the zip

    daemon.manager()
