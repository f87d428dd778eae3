"""Where landed segments live: a local (or shared) filesystem, or an S3 API; one small interface for both.

The layout code (:mod:`.segments`, :mod:`.quarantine`, the data-loss record) computes locations with ``/`` and does
its I/O through :func:`storage_of`, so the choice of filesystem is made here only:

* a local path (:class:`pathlib.Path`): :class:`LocalStorage`. A file is written beside its final name as
  ``.{name}.tmp``, fsynced and renamed with ``os.replace`` (then the directory fsynced): readers see the old or the
  new content, never a torn one, and a crash leaves only a temp file the next landing run deletes.
* ``s3://bucket/prefix`` (:class:`ObjectPath`): :class:`S3Storage`, pyarrow's S3 filesystem with the ``[s3]``
  endpoint, region and path-style settings and the AWS SDK's own credential chain (``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY``, profiles, instance roles; never the config file). An object appears whole or not at
  all when its upload completes (one PUT, or a multipart upload's completion), so no temp name or rename is
  needed: a segment is streamed into a local spool file (bounded memory, the same Parquet writer) and uploaded as
  one object under its final name when committed. A crash leaves at most a spool file in the temp directory,
  never a partial object. S3 has no directories: a "directory" is a key prefix that has objects under it.

Locks stay local: S3 has no lock primitive, so the landing lock of an ``s3://`` landing zone is the same ``flock``
on a file under ``LAKEHOUSE_HOME/locks/landing/`` (:meth:`S3Storage.lock_dir`), with the kernel's release on a
crash that a lock object in a bucket would lack. It keeps landing runs of one changefeed apart on one host, so a
changefeed's landing must be scheduled on one host (as with a local landing zone). The catalog lock would hold
across hosts, but it is the merge's: landing would wait for every merge and maintenance run of the changefeed,
and a merge for a landing run.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, Union

from ticdc_lakehouse.runtime.faults import fault_point

TMP_SUFFIX = ".tmp"
S3_SCHEMES = ("s3://", "s3a://", "s3n://")


@dataclass(frozen=True)
class S3Options:
    """The S3 API of a landing zone (from ``[s3]``) and where this deployment keeps its local locks."""

    endpoint: str = ""
    region: str = ""
    path_style: bool = False
    local_home: str = ".lakehouse"


@dataclass(frozen=True, order=True)
class ObjectPath:
    """``s3://bucket/key`` with just the path arithmetic the landing layout uses (picklable: executors get it)."""

    key: str  # "bucket/prefix/name", no scheme, no trailing slash
    options: S3Options = S3Options()

    def __truediv__(self, name: Any) -> "ObjectPath":
        return replace(self, key=f"{self.key}/{name}")

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> "ObjectPath":
        return replace(self, key=self.key.rsplit("/", 1)[0])

    def with_name(self, name: str) -> "ObjectPath":
        return self.parent / name

    def __str__(self) -> str:
        return f"s3://{self.key}"


Location = Union[Path, ObjectPath]


def is_object_storage(uri: Any) -> bool:
    return isinstance(uri, ObjectPath) or str(uri).startswith(S3_SCHEMES)


def landing_location(uri: "Location | str", raw: Optional[Mapping[str, Any]] = None,
                     home: "Path | str" = ".lakehouse") -> Location:
    """The landing root for a configured ``landing.path``: an :class:`ObjectPath` for ``s3://`` (with the ``[s3]``
    settings of ``raw``), else a local path."""
    if isinstance(uri, (Path, ObjectPath)):
        return uri
    if not is_object_storage(uri):
        return Path(uri)
    s3 = (raw or {}).get("s3") or {}
    options = S3Options(str(s3.get("endpoint") or ""), str(s3.get("region") or ""),
                        bool(s3.get("path_style_access")), str(Path(home).absolute()))
    return ObjectPath(uri.split("://", 1)[1].strip("/"), options)


class LandingStorage(Protocol):
    """What the landing layout needs of a filesystem."""

    def list(self, directory: Location) -> list[tuple[str, bool]]: ...  # (name, is a directory), any order
    def exists(self, path: Location) -> bool: ...
    def read(self, path: Location) -> bytes: ...
    def write_whole(self, path: Location, data: bytes) -> None: ...  # readers see old or new, never torn
    def delete(self, path: Location) -> None: ...  # missing is fine
    def size(self, path: Location) -> int: ...
    def mtime(self, path: Location) -> float: ...
    def open_input(self, path: Location) -> Any: ...  # for pyarrow readers
    def move(self, source: Location, target: Location) -> None: ...
    def spool(self, final_dir: Location, name: str) -> Path: ...  # the local file a segment is written into
    def publish(self, spool: Path, final: Location) -> None: ...  # spool -> final, atomically, durably
    def temp_files(self, root: Location) -> list[Location]: ...  # crash debris under root
    def lock_dir(self, directory: Location) -> Path: ...  # local directory for the lock of ``directory``


def fsync_dir(directory: Path) -> None:
    """Make a rename inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStorage:
    """A local or shared POSIX filesystem: temp file + fsync + ``os.replace``."""

    def list(self, directory: Path) -> list[tuple[str, bool]]:
        if not directory.is_dir():
            return []
        return [(entry.name, entry.is_dir()) for entry in directory.iterdir()]

    def exists(self, path: Path) -> bool:
        return path.is_file()

    def read(self, path: Path) -> bytes:
        return path.read_bytes()

    def write_whole(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}{TMP_SUFFIX}")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)

    def delete(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def size(self, path: Path) -> int:
        return path.stat().st_size if path.exists() else 0

    def mtime(self, path: Path) -> float:
        return path.stat().st_mtime

    def open_input(self, path: Path) -> Any:
        return path

    def move(self, source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        fsync_dir(target.parent)
        fsync_dir(source.parent)

    def spool(self, final_dir: Path, name: str) -> Path:
        final_dir.mkdir(parents=True, exist_ok=True)
        return final_dir / f".{name}{TMP_SUFFIX}"

    def publish(self, spool: Path, final: Path) -> None:
        with open(spool, "rb+") as handle:
            os.fsync(handle.fileno())
        fault_point("land.before_rename")
        os.replace(spool, final)
        fsync_dir(final.parent)
        fault_point("land.after_rename")

    def temp_files(self, root: Path) -> list[Location]:
        if not root.is_dir():
            return []
        return [path for path in root.rglob(f".*{TMP_SUFFIX}") if path.is_file()]

    def lock_dir(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        return directory


class S3Storage:
    """An S3 API through pyarrow's S3 filesystem (the AWS SDK's credential chain): whole objects, no renames."""

    def __init__(self, options: S3Options) -> None:
        from pyarrow import fs

        settings: dict[str, Any] = {}
        if options.endpoint:
            scheme, _, rest = options.endpoint.rpartition("://")
            settings["endpoint_override"] = rest
            settings["scheme"] = scheme or "https"
        if options.region:
            settings["region"] = options.region
        # as Iceberg's S3FileIO: bucket.host unless path-style (pyarrow's default is path-style with an endpoint)
        settings["force_virtual_addressing"] = bool(options.endpoint) and not options.path_style
        self.options = options
        self.fs = fs.S3FileSystem(**settings)

    def _info(self, path: ObjectPath) -> Any:
        return self.fs.get_file_info(path.key)

    def list(self, directory: ObjectPath) -> list[tuple[str, bool]]:
        from pyarrow import fs

        infos = self.fs.get_file_info(fs.FileSelector(directory.key, allow_not_found=True))
        return [(info.base_name, info.type == fs.FileType.Directory) for info in infos]

    def exists(self, path: ObjectPath) -> bool:
        from pyarrow import fs

        return self._info(path).type == fs.FileType.File

    def read(self, path: ObjectPath) -> bytes:
        with self.fs.open_input_stream(path.key) as stream:
            return stream.read()

    def write_whole(self, path: ObjectPath, data: bytes) -> None:
        with self.fs.open_output_stream(path.key) as out:  # one PUT: the object is replaced whole
            out.write(data)

    def delete(self, path: ObjectPath) -> None:
        if self.exists(path):
            self.fs.delete_file(path.key)

    def size(self, path: ObjectPath) -> int:
        return int(self._info(path).size or 0)

    def mtime(self, path: ObjectPath) -> float:
        return self._info(path).mtime.timestamp()

    def open_input(self, path: ObjectPath) -> Any:
        return self.fs.open_input_file(path.key)

    def move(self, source: ObjectPath, target: ObjectPath) -> None:
        self.fs.copy_file(source.key, target.key)  # a crash in between leaves both: the check moves it again
        self.fs.delete_file(source.key)

    def spool(self, final_dir: ObjectPath, name: str) -> Path:
        handle, path = tempfile.mkstemp(prefix=f".{name}.", suffix=TMP_SUFFIX)
        os.close(handle)
        return Path(path)

    def publish(self, spool: Path, final: ObjectPath) -> None:
        from pyarrow import fs

        fault_point("land.before_rename")
        try:  # one upload: the object becomes visible whole when it completes
            fs.copy_files(str(spool), final.key, source_filesystem=fs.LocalFileSystem(), destination_filesystem=self.fs)
        finally:
            spool.unlink(missing_ok=True)
        fault_point("land.after_rename")

    def temp_files(self, root: ObjectPath) -> list[Location]:
        return []  # nothing is ever written under a temp name

    def lock_dir(self, directory: ObjectPath) -> Path:
        digest = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
        path = Path(self.options.local_home) / "locks" / "landing" / f"{directory.name}-{digest}"
        path.mkdir(parents=True, exist_ok=True)
        return path


def bucket_problem(root: ObjectPath) -> Optional[str]:
    """Why the bucket of an ``s3://`` landing zone cannot be used (missing, unreachable, refused), None when it can."""
    from pyarrow import fs

    bucket = root.key.split("/", 1)[0]
    try:
        if _s3(root.options).fs.get_file_info(bucket).type == fs.FileType.NotFound:
            return f"bucket {bucket!r} does not exist"
    except OSError as exc:
        return str(exc).splitlines()[0][:200]
    return None


_LOCAL = LocalStorage()


@lru_cache(maxsize=8)
def _s3(options: S3Options) -> S3Storage:
    return S3Storage(options)


def storage_of(path: Location) -> LandingStorage:
    """The storage a location lives on."""
    return _s3(path.options) if isinstance(path, ObjectPath) else _LOCAL
