"""Kafka record-batch compression for codecs kafka-python cannot handle here.

kafka-python delegates snappy and lz4 to optional packages (python-snappy, lz4) that this deployment does not
install; pyarrow, which we ship anyway, has both codecs. These helpers speak Kafka's framing:

* snappy: the xerial block stream the Java client writes (``\\x82SNAPPY\\0`` header, then big-endian
  length-prefixed raw snappy blocks), or a single raw snappy block (what librdkafka writes);
* lz4: a standard LZ4 frame (Kafka >= 0.10, record format v2).

gzip and zstd always go through kafka-python itself.
"""

from __future__ import annotations

import struct

import kafka.codec as kcodec
import pyarrow as pa

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_IDS = {"none": CODEC_NONE, "gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}
CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024


def codec_id(name: str) -> int:
    try:
        return CODEC_IDS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown compression codec {name!r}; use one of {sorted(CODEC_IDS)}") from None


def kafka_python_has(codec: int) -> bool:
    """Whether kafka-python can (de)compress ``codec`` itself in this environment."""
    return {
        CODEC_NONE: True,
        CODEC_GZIP: kcodec.has_gzip(),
        CODEC_SNAPPY: kcodec.has_snappy(),
        CODEC_LZ4: kcodec.has_lz4(),
        CODEC_ZSTD: kcodec.has_zstd(),
    }[codec]


def _varint(data: bytes | memoryview, pos: int = 0) -> tuple[int, int]:
    """An unsigned little-endian base-128 varint (snappy's length preamble) and the position after it."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated snappy length preamble")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise ValueError("snappy length preamble too long")


def snappy_raw_decompress(block: bytes | memoryview) -> bytes:
    size, _ = _varint(block)
    return pa.decompress(bytes(block), decompressed_size=size, codec="snappy", asbytes=True)


def snappy_decompress(data: bytes | memoryview) -> bytes:
    """Decode a xerial block stream or a single raw snappy block."""
    data = bytes(data)
    if len(data) > 16 and data[:8] == XERIAL_HEADER[:8]:
        out = []
        pos = 16
        while pos < len(data):
            if pos + 4 > len(data):
                raise ValueError("truncated xerial snappy block length")
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if size < 0 or pos + size > len(data):
                raise ValueError("truncated xerial snappy block")
            out.append(snappy_raw_decompress(memoryview(data)[pos : pos + size]))
            pos += size
        return b"".join(out)
    return snappy_raw_decompress(data)


def snappy_compress(data: bytes) -> bytes:
    """A xerial block stream, as the Java client writes it."""
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for i in range(0, len(data), XERIAL_BLOCK):
        block = pa.compress(view[i : i + XERIAL_BLOCK].tobytes(), codec="snappy", asbytes=True)
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def lz4_decompress(data: bytes | memoryview) -> bytes:
    stream = pa.CompressedInputStream(pa.BufferReader(bytes(data)), "lz4")
    return stream.read()


def lz4_compress(data: bytes) -> bytes:
    return pa.compress(data, codec="lz4", asbytes=True)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a batch's records section."""
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        return kcodec.gzip_decode(bytes(data))
    if codec == CODEC_SNAPPY:
        return kcodec.snappy_decode(bytes(data)) if kcodec.has_snappy() else snappy_decompress(data)
    if codec == CODEC_LZ4:
        return kcodec.lz4_decode(bytes(data)) if kcodec.has_lz4() else lz4_decompress(data)
    if codec == CODEC_ZSTD:
        return kcodec.zstd_decode(bytes(data))
    raise ValueError(f"unknown compression codec id {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Compress a batch's records section the way Kafka clients do."""
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_GZIP:
        return kcodec.gzip_encode(data)
    if codec == CODEC_SNAPPY:
        return kcodec.snappy_encode(data) if kcodec.has_snappy() else snappy_compress(data)
    if codec == CODEC_LZ4:
        return kcodec.lz4_encode(data) if kcodec.has_lz4() else lz4_compress(data)
    if codec == CODEC_ZSTD:
        return kcodec.zstd_encode(data)
    raise ValueError(f"unknown compression codec id {codec}")
