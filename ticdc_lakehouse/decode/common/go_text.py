"""Go's text conventions that TiCDC's wire formats inherit, in both directions.

* ``strconv.Quote`` / ``strconv.Unquote``: Open Protocol writes BINARY/VARBINARY values (BinaryFlag set) as the
  body of a Go quoted string, e.g. ``\\x89PNG\\r\\n\\x1a\\n``; reading them back needs Go's escape grammar, not
  Python's (``\\x`` is a *byte* there, ``\\u`` a rune written as UTF-8, three-digit octal is a byte).
* float formatting: Go prints the shortest decimal that round-trips at the value's own width, so a FLOAT
  (float32) 1.23 is ``1.23`` on the wire, and JSON uses exponent form only below 1e-6 and from 1e21 on.
* JSON string escaping: ``encoding/json`` (tiflow) escapes ``<``, ``>``, ``&`` and U+2028/U+2029; jsoniter as
  configured by the new pingcap/ticdc does not, and writes ``\\b``/``\\f`` as ``\\u0008``/``\\u000c``.

The decoders use :func:`go_unquote` and :func:`float32_repr`; the encoders use the rest.
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal

_F32 = struct.Struct("<f")

# --- strconv.Unquote ----------------------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[abfnrtv\\\"])")
_SIMPLE = {"a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v", "\\": b"\\", '"': b'"'}


def go_unquote(body: str) -> bytes:
    """Bytes of a Go double-quoted string literal given without its quotes (``strconv.Unquote``).

    Raises ValueError for text Go would reject: an unknown escape, a bare ``"`` or newline, an invalid rune.
    """
    if "\\" not in body:
        if '"' in body or "\n" in body:
            raise ValueError("bare quote or newline in a Go quoted string")
        return body.encode("utf-8")
    out = bytearray()
    pos = 0
    for match in _ESCAPE.finditer(body):
        literal = body[pos:match.start()]
        if "\\" in literal or '"' in literal or "\n" in literal:
            raise ValueError(f"invalid escape in Go quoted string near offset {pos}")
        out += literal.encode("utf-8")
        esc = match.group(1)
        head = esc[0]
        if head == "x":
            out.append(int(esc[1:], 16))
        elif head in "01234567":
            value = int(esc, 8)
            if value > 255:
                raise ValueError(f"octal escape \\{esc} out of range")
            out.append(value)
        elif head in "uU":
            rune = int(esc[1:], 16)
            if rune > 0x10FFFF or 0xD800 <= rune <= 0xDFFF:
                raise ValueError(f"escape \\{esc} is not a valid rune")
            out += chr(rune).encode("utf-8")
        else:
            out += _SIMPLE[head]
        pos = match.end()
    literal = body[pos:]
    if "\\" in literal or '"' in literal or "\n" in literal:
        raise ValueError(f"invalid escape in Go quoted string near offset {pos}")
    out += literal.encode("utf-8")
    return bytes(out)


# --- strconv.Quote ------------------------------------------------------------------------------------------

_QUOTE_SAFE = re.compile(r"[\x20-\x21\x23-\x5b\x5d-\x7e]*\Z")
_QUOTE_NAMED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
                "\\": "\\\\", '"': '\\"'}


def go_quote(raw: bytes) -> str:
    """``strconv.Quote(string(raw))`` without the outer quotes: what Open Protocol puts in a binary column."""
    text = raw.decode("utf-8", "surrogateescape")
    if _QUOTE_SAFE.match(text):
        return text
    parts = []
    for ch in text:
        code = ord(ch)
        named = _QUOTE_NAMED.get(ch)
        if named is not None:
            parts.append(named)
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that is not valid UTF-8
            parts.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():  # Unicode L, M, N, P, S and ASCII space: the same classes as Go's unicode.IsPrint
            parts.append(ch)
        elif code < 0x20 or code == 0x7F:
            parts.append(f"\\x{code:02x}")
        elif code < 0x10000:
            parts.append(f"\\u{code:04x}")
        else:
            parts.append(f"\\U{code:08x}")
    return "".join(parts)


# --- floats -------------------------------------------------------------------------------------------------


def to_float32(value: float) -> float:
    """Round a double to the nearest float32 (OverflowError when out of float32 range)."""
    return _F32.unpack(_F32.pack(value))[0]


def float32_repr(value: float) -> str:
    """Canonical text of a FLOAT column value: the shortest decimal that reads back as the same float32.

    TiCDC sends FLOAT either widened to float64 (Craft, Open Protocol before 2023: ``1.2300000190734863``) or
    as the shortest float32 text (``1.23``). Both are the same float32, so both decode to ``"1.23"``. Values
    outside float32 range (never produced by TiDB) keep their double repr.
    """
    if not math.isfinite(value):
        return repr(value)
    try:
        single = to_float32(value)
    except OverflowError:
        return repr(value)
    for digits in range(1, 10):
        text = "%.*g" % (digits, single)
        try:
            if to_float32(float(text)) == single:
                return repr(float(text))
        except OverflowError:  # a short candidate near FLT_MAX rounds past it
            continue
    return repr(single)  # pragma: no cover - 9 significant digits always round-trip a float32


def go_float_json(value: float, bits: int) -> str:
    """Go ``encoding/json`` text of a float32 (``bits=32``) or float64 value (finite values only)."""
    if not math.isfinite(value):
        raise ValueError(f"JSON cannot carry {value!r}")
    shortest = float32_repr(value) if bits == 32 else repr(value)
    sign, digit_tuple, exponent = Decimal(shortest).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    prefix = "-" if sign else ""
    if digits == "0":
        return prefix + "0"
    abs_value = abs(float(shortest))
    if abs_value < 1e-6 or abs_value >= 1e21:
        sci_exp = exponent + len(digits) - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exp_text = f"{abs(sci_exp):02d}"
        if sci_exp < 0 and exp_text.startswith("0"):
            exp_text = exp_text[1:]  # Go cleans e-07 to e-7, not e+07
        return f"{prefix}{mantissa}e{'-' if sci_exp < 0 else '+'}{exp_text}"
    if exponent >= 0:
        return prefix + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return prefix + digits[:point] + "." + digits[point:]
    return prefix + "0." + "0" * (-point) + digits


# --- JSON strings -------------------------------------------------------------------------------------------

_JSON_SPECIAL_STD = re.compile("[\x00-\x1f\"\\\\<>&\u2028\u2029]")
_JSON_SPECIAL_ITER = re.compile("[\x00-\x1f\"\\\\]")
_JSON_NAMED_STD = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_JSON_NAMED_ITER = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_std(match: re.Match) -> str:
    ch = match.group()
    return _JSON_NAMED_STD.get(ch) or f"\\u{ord(ch):04x}"


def _escape_iter(match: re.Match) -> str:
    ch = match.group()
    return _JSON_NAMED_ITER.get(ch) or f"\\u{ord(ch):04x}"


def go_json_string(text: str, html_escape: bool = True) -> str:
    """A JSON string literal as Go writes it: ``encoding/json`` when ``html_escape`` (tiflow), else jsoniter
    with EscapeHTML off (pingcap/ticdc)."""
    if html_escape:
        return '"' + _JSON_SPECIAL_STD.sub(_escape_std, text) + '"'
    return '"' + _JSON_SPECIAL_ITER.sub(_escape_iter, text) + '"'
