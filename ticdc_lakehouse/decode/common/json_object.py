"""One JSON document that must be an object (Debezium's key and value, a Simple JSON message), or a
``DecodeError`` that names the protocol and the part: the reason a dead letter carries."""

from __future__ import annotations

from typing import Any

import orjson

from ticdc_lakehouse.core.model import DecodeError


def json_object(data: bytes, protocol: str, what: str) -> dict[str, Any]:
    """``data`` parsed; ``DecodeError("<protocol>: invalid JSON <what>: ...")`` or ``"... <what> is not a JSON
    object"`` otherwise."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"{protocol}: invalid JSON {what}: {exc}") from exc
    if not isinstance(doc, dict):
        raise DecodeError(f"{protocol}: {what} is not a JSON object")
    return doc
