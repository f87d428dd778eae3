"""TiCDC's large-message handling, undone: per-message compression and claim-check storage.

A changefeed with ``large-message-handle-compression`` (``snappy``: the block format; ``lz4``: the frame format)
compresses each Open Protocol row/DDL value item, and the whole value of a Simple or Canal-JSON message. With
``large-message-handle-option=claim-check``, a row too large for Kafka is written to external storage and the Kafka
message only says where (``ccl`` in an Open Protocol key, ``claimCheckLocation`` in Simple and Canal-JSON). The
stored file is Go's JSON of ``{"key": <bytes>, "value": <bytes>}`` (base64), the message TiCDC would have sent,
or for Canal-JSON with ``claim-check-raw-value`` the value bytes alone. Like TiCDC's own consumer, the file is
looked up by the location's base name in the configured storage (TiCDC joins the storage URI and the name with
``filepath.Join``, which mangles ``s3://`` into ``s3:/``, so the location itself is not a usable URI).

Why this matters: the data *is* there. Without this, every large row of such a changefeed went to the dead-letter
table, and the lake silently lacked it.

Failure classes follow the rest of the decoders: bytes that do not decompress, a claim-check file that does not
exist or does not parse are the message's fault (``DecodeError``: dead letter, with topic/partition/offset and
the reason); storage that cannot be reached is not (``SourceUnavailable``: the run fails before committing and
the retry decodes the message again).
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import threading
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

import orjson

from ticdc_lakehouse.core.model import DecodeError, SourceUnavailable
from ticdc_lakehouse.core.redaction import mask_uri_password

#: TiCDC's ``large-message-handle-compression`` values
COMPRESSIONS = ("none", "snappy", "lz4")


@dataclass(frozen=True)
class LargeMessageOptions:
    """How the changefeed's TiCDC sink handles large messages (plain data: it pickles to Spark executors)."""

    compression: str = "none"
    claim_check_storage_uri: str = ""
    #: Canal-JSON's ``claim-check-raw-value``: the stored file is the value itself, not ``{"key", "value"}``
    claim_check_raw_value: bool = False

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"large_message_compression must be one of {', '.join(COMPRESSIONS)}, "
                             f"not {self.compression!r}")

    @property
    def compressed(self) -> bool:
        return self.compression != "none"


def decompress(compression: str, data: bytes, what: str) -> bytes:
    """``data`` as TiCDC compressed it with ``compression`` (``none`` returns it as it is).

    ``what`` names the payload in the error (e.g. "Open Protocol event 3: row value")."""
    if compression == "none":
        return data
    import cramjam

    try:
        if compression == "snappy":
            return bytes(cramjam.snappy.decompress_raw(data))
        if compression == "lz4":
            return bytes(cramjam.lz4.decompress(data))
    except cramjam.DecompressionError as exc:
        raise DecodeError(f"{what}: does not decompress as {compression} (large_message_compression): {exc}") \
            from None
    raise ValueError(f"unknown large-message compression {compression!r}")


def compress(compression: str, data: bytes) -> bytes:
    """What TiCDC's encoder does to a payload (tests and the test-only encoders use it)."""
    import cramjam

    if compression == "none":
        return data
    if compression == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    if compression == "lz4":
        return bytes(cramjam.lz4.compress(data))
    raise ValueError(f"unknown large-message compression {compression!r}")


def claim_check_file_name(location: str) -> str:
    """The object name to read for a claim-check location: its base name, as TiCDC's consumer does."""
    name = posixpath.basename(location.rstrip("/"))
    if not name or name in (".", ".."):
        raise DecodeError(f"claim-check location {location!r} names no file")
    return name


def parse_claim_check(data: bytes, raw_value: bool = False) -> tuple[Optional[bytes], bytes]:
    """``(key, value)`` of a stored claim-check file (Go's JSON of two byte slices; field names match in any
    case, as Go's ``json.Unmarshal`` does), or ``(None, data)`` for a raw-value file."""
    if raw_value:
        return None, data
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"claim-check file is not JSON: {exc}") from None
    if type(document) is not dict:
        raise DecodeError("claim-check file is not a JSON object")
    fields = {str(name).lower(): value for name, value in document.items()}
    decoded: dict[str, Optional[bytes]] = {}
    for name in ("key", "value"):
        text = fields.get(name)
        if text is None:
            decoded[name] = None
            continue
        if type(text) is not str:
            raise DecodeError(f"claim-check file: {name!r} is not a base64 string")
        try:
            decoded[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise DecodeError(f"claim-check file: {name!r} is not valid base64: {exc}") from None
    if decoded["value"] is None:
        raise DecodeError("claim-check file has no 'value'")
    return decoded["key"], decoded["value"]


def _filesystem(uri: str) -> tuple[Any, str]:
    """A pyarrow filesystem and base path for a storage URI as TiCDC writes it.

    ``file:///dir`` and plain absolute paths are local; ``s3://bucket/prefix`` takes TiCDC's query parameters
    (``endpoint``, ``region``, ``access-key``, ``secret-access-key``, ``force-path-style``) or the usual AWS
    environment; ``gs://``, ``hdfs://`` and other schemes pyarrow knows are handed to it as they are.
    """
    from pyarrow import fs

    parts = urlsplit(uri)
    if parts.scheme in ("", "file", "local"):
        return fs.LocalFileSystem(), parts.path if parts.scheme else uri
    if parts.scheme == "s3":
        query = {name.lower(): values[-1] for name, values in parse_qs(parts.query).items()}
        options: dict[str, Any] = {}
        if query.get("endpoint"):
            endpoint = urlsplit(query["endpoint"])
            options["endpoint_override"] = endpoint.netloc or query["endpoint"]
            options["scheme"] = endpoint.scheme or "https"
        if query.get("region"):
            options["region"] = query["region"]
        if query.get("access-key") and query.get("secret-access-key"):
            options["access_key"] = query["access-key"]
            options["secret_key"] = query["secret-access-key"]
        if query.get("force-path-style", "").lower() in ("true", "1"):
            options["force_virtual_addressing"] = False
        return fs.S3FileSystem(**options), f"{parts.netloc}{parts.path}".rstrip("/")
    return fs.FileSystem.from_uri(uri)


def masked_uri(uri: str) -> str:
    """``uri`` fit for an error message: secret-looking query parameters (``access-key``, ``secret-access-key``,
    ``session-token``...) show as ``***``."""
    return mask_uri_password(uri)


class ClaimCheckStore:
    """Reads claim-check files from the changefeed's claim-check storage (opened on first use, per process)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.shown = masked_uri(uri)
        self._lock = threading.Lock()
        self._opened: Optional[tuple[Any, str]] = None

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri}  # the filesystem handle stays behind; executors open their own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["uri"])

    def _open(self) -> tuple[Any, str]:
        with self._lock:
            if self._opened is None:
                try:
                    self._opened = _filesystem(self.uri)
                except (OSError, ValueError) as exc:
                    raise SourceUnavailable(f"claim-check storage {self.shown!r} cannot be opened: {exc}") from None
            return self._opened

    def read(self, location: str) -> bytes:
        """The bytes of the claim-check file for ``location``.

        A file that is not there is the message's problem (the storage lost it): DecodeError. Storage that does
        not answer is not: SourceUnavailable."""
        if not self.uri:
            raise DecodeError(f"the row is in claim-check storage at {location!r} (large-message-handle-option="
                              "claim-check), but the changefeed has no claim_check_storage_uri to read it from")
        filesystem, base = self._open()
        path = f"{base.rstrip('/')}/{claim_check_file_name(location)}" if base else claim_check_file_name(location)
        try:
            with filesystem.open_input_stream(path) as stream:
                return stream.read()
        except FileNotFoundError:
            raise DecodeError(f"claim-check file {path!r} (location {location!r}) does not exist in "
                              f"{self.shown!r}") from None
        except OSError as exc:
            if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
                raise DecodeError(f"claim-check file {path!r} (location {location!r}) does not exist in "
                                  f"{self.shown!r}") from None
            raise SourceUnavailable(f"claim-check storage {self.shown!r} could not be read for {path!r}: {exc}") \
                from None


class LargeMessages:
    """What a decoder uses: the configured compression and the claim-check reader."""

    def __init__(self, options: Optional[LargeMessageOptions] = None) -> None:
        self.options = options or LargeMessageOptions()
        self.compression = self.options.compression
        self.compressed = self.options.compressed
        self.store = ClaimCheckStore(self.options.claim_check_storage_uri)

    def decompress(self, data: bytes, what: str) -> bytes:
        return decompress(self.compression, data, what) if self.compressed else data

    def claim_check(self, location: str, what: str) -> tuple[Optional[bytes], bytes]:
        """``(key, value)`` of the message stored for ``location``, as TiCDC stored them (still compressed: where
        the compression sits differs by protocol)."""
        try:
            return parse_claim_check(self.store.read(location), self.options.claim_check_raw_value)
        except DecodeError as exc:
            raise DecodeError(f"{what}: {exc}") from None
