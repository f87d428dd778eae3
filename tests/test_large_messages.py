"""TiCDC large-message handling: per-message compression and claim-check storage (decode/large_messages.py).

The decoders' use of it is tested in each decoder's test file; the end-to-end merge in test_merge_engine.py.
"""

from __future__ import annotations

import base64
import json
import pickle

import pytest

from tests.schema_registry_fixture import closed_port
from ticdc_lakehouse.decode.large_messages import (
    ClaimCheckStore,
    LargeMessageOptions,
    LargeMessages,
    claim_check_file_name,
    compress,
    decompress,
    masked_uri,
    parse_claim_check,
)
from ticdc_lakehouse.core.model import DecodeError, SourceUnavailable

PAYLOAD = json.dumps({"u": {"id": {"t": 8, "h": True, "v": 1}, "note": {"t": 15, "v": "x" * 5000}}}).encode()


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_payloads_round_trip_through_ticdcs_codecs(codec):
    packed = compress(codec, PAYLOAD)
    assert len(packed) < len(PAYLOAD) / 10
    assert decompress(codec, packed, "row") == PAYLOAD


def test_lz4_is_the_frame_format_and_none_is_the_identity():
    assert compress("lz4", PAYLOAD)[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, as pierrec/lz4's Writer writes
    assert decompress("none", b"anything", "row") == b"anything"


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_bytes_that_do_not_decompress_are_a_decode_error_naming_the_setting(codec):
    with pytest.raises(DecodeError, match=f"event 3: row value: does not decompress as {codec}"
                                          ".*large_message_compression"):
        decompress(codec, PAYLOAD, "event 3: row value")
    with pytest.raises(DecodeError):
        decompress(codec, compress(codec, PAYLOAD)[:-7], "truncated")


def test_an_unknown_compression_is_refused_when_configured():
    with pytest.raises(ValueError, match="large_message_compression must be one of none, snappy, lz4"):
        LargeMessageOptions(compression="zstd")


def test_claim_check_files_are_found_by_base_name():
    # TiCDC joins the storage URI and the file name with filepath.Join, which turns s3:// into s3:/
    assert claim_check_file_name("s3:/bucket/prefix/0001.json") == "0001.json"
    assert claim_check_file_name("file:/data/claim/0002.json") == "0002.json"
    with pytest.raises(DecodeError, match="names no file"):
        claim_check_file_name("/")


def test_claim_check_files_are_gos_json_of_two_byte_slices():
    key, value = b"\x00\x01key", b"\x00value\xff"
    stored = json.dumps({"Key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()})
    assert parse_claim_check(stored.encode()) == (key, value)  # Go matches field names in any case
    assert parse_claim_check(b"raw bytes", raw_value=True) == (None, b"raw bytes")
    for bad, reason in [(b"not json", "not JSON"), (b"[]", "not a JSON object"), (b'{"key": ""}', "no 'value'"),
                        (b'{"value": "!!"}', "not valid base64"), (b'{"value": 5}', "not a base64 string")]:
        with pytest.raises(DecodeError, match=reason):
            parse_claim_check(bad)


def test_a_claim_check_store_reads_local_storage_and_says_what_is_missing(tmp_path):
    (tmp_path / "0001.json").write_bytes(b"stored")
    for uri in (f"file://{tmp_path}", str(tmp_path)):
        store = ClaimCheckStore(uri)
        assert store.read("s3:/anything/0001.json") == b"stored"
        with pytest.raises(DecodeError, match="0002.json.*does not exist"):
            store.read("s3:/anything/0002.json")
    clone = pickle.loads(pickle.dumps(ClaimCheckStore(f"file://{tmp_path}")))  # shipped to Spark executors
    assert clone.read("x/0001.json") == b"stored"
    with pytest.raises(DecodeError, match="no claim_check_storage_uri"):
        ClaimCheckStore("").read("x/0001.json")


def test_unreachable_claim_check_storage_fails_the_run_and_hides_credentials():
    uri = (f"s3://bucket/claims?endpoint=http://127.0.0.1:{closed_port()}&region=us-east-1"
           "&access-key=AKIAEXAMPLE&secret-access-key=hunter2")
    with pytest.raises(SourceUnavailable) as raised:
        LargeMessages(LargeMessageOptions(claim_check_storage_uri=uri)).claim_check("s3:/bucket/claims/1.json", "row")
    text = str(raised.value)
    assert "could not be read" in text and "1.json" in text
    assert "hunter2" not in text and "AKIAEXAMPLE" not in text and "secret-access-key=***" in text


def test_masked_uri_keeps_what_is_not_secret():
    assert masked_uri("s3://b/p?endpoint=http://minio:9000&session-token=t") == \
        "s3://b/p?endpoint=http://minio:9000&session-token=***"
    assert masked_uri("file:///data/claims") == "file:///data/claims"
