"""Secrets out of everything printed or logged: config values by key name, passwords inside URIs.

A module of its own, importing nothing of the package, so every layer can mask what it prints (the config, the
decoders' claim-check errors, the landing's broker errors, status) without importing the configuration.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

SECRET_WORDS = ("password", "secret", "sasl", "token", "credential", "user.info", "basic.auth")

_URI_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+(@)")
_SECRET_PARAMETER = re.compile(
    r"((?:^|[?&;])[\w.-]*(?:password|secret|token|access[-_]key|credential)[\w.-]*=)[^&;\s]+", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def mask_secrets(value: Any, key: str = "") -> Any:
    """Replace every secret-looking value (by key name, or a password inside a URI) with ``***``."""
    if isinstance(value, Mapping):
        return {k: mask_secrets(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_secrets(v, key) for v in value]
    if key and is_secret_key(key) and value not in ("", None):
        return "***"
    if isinstance(value, str):
        return mask_uri_password(value)
    return value


def mask_uri_password(text: str) -> str:
    """``postgresql://u:pw@h/db`` -> ``postgresql://u:***@h/db``; also query parameters whose name says secret
    (``password=``, ``secret-access-key=``, ``access-key=``, ``session-token=`` ...: TiCDC's S3 URIs carry them)."""
    return _SECRET_PARAMETER.sub(r"\1***", _URI_PASSWORD.sub(r"\1***\2", text))
