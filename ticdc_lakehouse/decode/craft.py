"""TiCDC Craft (binary) decoder.

Follows the Go code (tiflow ``pkg/sink/codec/craft``), which differs from the published doc in several places
(see ``shared/ticdc-vectors/craft/README.md``). A message has no Kafka key; the value is::

    uvarint version (1) | headers | bodies | term dictionary | size tables | reversed-uvarint size-table bytes

* Size tables are found from the end: the last bytes are a uvarint written in *reverse* byte order giving the
  byte length of the tables. Each table is ``uvarint count`` + a delta zigzag-varint chunk. Table 0 =
  [header bytes, term-dictionary bytes], table 1 = body size per event (its length is the event count), table
  2+i = the column-group sizes of row event i.
* Headers are columnar chunks over all events: commit ts (delta uvarint), type (uvarint: 1 row, 2 DDL,
  3 resolved), partition (delta varint, -1 none), schema and table (delta varint *term ids*, -1 = null). The
  partition (physical table id of a partitioned table) has no place in the model and is not kept, as with
  Open Protocol's ``ptn``.
* Term dictionary: uvarint count, then a string chunk (all lengths, then all bytes); absent when empty.
* DDL body: uvarint TiDB action type, uvarint-length query. Resolved body: empty.
* Row body: column groups, 0x01 = new values, 0x02 = old values. new only = insert, new+old = update,
  old only = delete. A group is: type byte, uvarint column count, delta-varint name term ids, uvarint types,
  uvarint flags, nullable bytes chunk (zigzag lengths first, -1 = NULL, then the payloads).
* Values: signed integers and YEAR are zigzag varints; unsigned integers (flag 0x80), ENUM, SET and BIT are
  uvarints; FLOAT and DOUBLE are little-endian float64; DECIMAL, temporal, JSON and strings are raw bytes;
  NULL-type and GEOMETRY columns carry no value.

Every length and offset is checked against the region it must stay in, and every region must be consumed
exactly, so truncated or corrupted messages raise a DecodeError instead of yielding plausible garbage.

Speed: a batch repeats the same column layout (names, types, flags) for every row of a table. The decoder
parses a layout once, recognizes its bytes again with one ``bytes.startswith``, and reads the values with a reader
made for that layout; anything unusual falls back to the generic, fully checked reader. Term dictionaries and
their layouts are cached by the dictionary's bytes.

The value reader is compiled where it can be (``_craft_reader.pyx``, built by ``setup.py``): the values are most
of a Craft message, and read in Python they made Craft only as fast as Open Protocol, whose JSON msgspec parses
in C. Where it is not built, straight-line Python code generated per layout (no per-column dispatch) reads them
with the same results; ``CraftDecoder(compiled=False)`` uses it anyway, and the tests run both against the
reference.

Two shortcuts sit on top of that, each answering only for input it reads exactly as the checked path does and
handing everything else to it (``tests/test_decode_craft.py`` compares them with ``CraftDecoder(reference=True)``,
which has none, on random and corrupted batches):

* ``_row_batch``: a message of row events with known layouts (the bulk of a topic) is read in one pass: size
  tables while the events are read, one-byte header chunks compared in bulk, the last layout tried first.
* the generated Python readers map a chunk of one-byte value lengths through one ``bytes.translate`` and unpack
  it into locals, and decode multi-byte integers with small-int arithmetic on the unpacked bytes.

Measured, not guessed: on this interpreter, generated Python that is bigger (a second, NULL-free copy of the
column code; a per-layout loop over whole rows) or that calls helpers per value ran slower in
``bench/decode.py``, whose timings interleave other decoders; keep the generated code small.
"""

from __future__ import annotations

import base64
import binascii
import struct
from itertools import accumulate
from typing import Any, Callable, Optional

from ticdc_lakehouse.core import model
from ticdc_lakehouse.decode.common import mysql_type_codes as type_codes
from ticdc_lakehouse.decode.common.canonical_text import decimal_text
from ticdc_lakehouse.decode.common.go_text import float32_repr
from ticdc_lakehouse.decode.common.mysql_type_codes import FLAG_HANDLE_KEY, descriptor
from ticdc_lakehouse.decode.common.positions import make_position
from ticdc_lakehouse.decode.common.tidb_ddl_actions import ddl_type_for_action
from ticdc_lakehouse.core.model import (
    DELETE,
    INSERT,
    UPDATE,
    DDLEvent,
    DecodeError,
    Message,
    ResolvedEvent,
    RowChange,
)

try:  # Craft's value reader in C (setup.py builds it); the generated Python readers below give the same rows
    from ticdc_lakehouse.decode._craft_reader import COLUMN_LIMIT as _COMPILED_MAX_COLUMNS
    from ticdc_lakehouse.decode._craft_reader import ValueReader as _CompiledReader
except ImportError:  # not built (no C compiler where this was installed, or a big-endian host)
    _CompiledReader = None
    _COMPILED_MAX_COLUMNS = 0

#: whether ``CraftDecoder`` reads values with the compiled reader (unless told ``compiled=False``)
COMPILED_READER = _CompiledReader is not None

VERSION = 1
EVENT_ROW = 1
EVENT_DDL = 2
EVENT_RESOLVED = 3
GROUP_NEW = 0x01
GROUP_OLD = 0x02
_UINT64 = 1 << 64

_F64 = struct.Struct("<d")

# value kinds (``_craft_reader.pyx`` numbers them alike)
C_TEXT = 0  # UTF-8 text (CHAR/VARCHAR/TEXT without BinaryFlag, temporal, JSON, vector)
C_SVARINT = 1  # zigzag varint (signed integers, YEAR)
C_UVARINT = 2  # uvarint (unsigned integers, BIT, ENUM index, SET bitmask)
C_DOUBLE = 3
C_FLOAT = 4
C_BYTES = 5  # raw bytes -> base64 (BinaryFlag set)
C_DECIMAL = 6
C_NONE = 7  # NULL type, GEOMETRY, unspecified: Go writes no value


class _Layout:
    """The parsed name/type/flag section of a column group, reused for every row that repeats its bytes.

    ``values(data, pos, end)`` is the layout's generated reader of the value chunk: the canonical row, or None
    when the generic reader must take over. ``inserted`` and ``deleted`` are the first bytes of a group of new or
    old values with this layout (group type, one-byte column count, section), which the row-batch path compares
    in one ``bytes.startswith``; None when the column count needs more than one varint byte.
    """

    __slots__ = ("section", "names", "kinds", "types", "keys", "count", "values", "inserted", "deleted",
                 "values_offset")

    def __init__(self, section: bytes, names: list[str], kinds: list[int], types: dict[str, str],
                 keys: tuple[str, ...], generated: bool = True, compiled: bool = True) -> None:
        self.section = section
        self.names = names
        self.kinds = kinds
        self.types = types
        self.keys = keys
        self.count = len(names)
        self.inserted = bytes((GROUP_NEW, self.count)) + section if self.count < 0x80 else None
        self.deleted = bytes((GROUP_OLD, self.count)) + section if self.count < 0x80 else None
        self.values_offset = 2 + len(section)  # from the group's start, when the column count is one byte
        self.values: Callable[[bytes, int, int], Optional[dict]] = _no_values
        # a layout wider than the compiled reader takes (TiDB's limit: a corrupt one) gets the Python readers
        if generated and compiled and _CompiledReader is not None and len(names) <= _COMPILED_MAX_COLUMNS:
            self.values = _CompiledReader(tuple(names), bytes(kinds)).read
        elif generated:
            self.values = _narrow_values_function(names, kinds, _values_function(names, kinds))


def _no_values(data: bytes, pos: int, end: int) -> None:
    """The "generated reader" of a reference decoder: it never answers, so the generic reader reads every row."""


# --- generated value readers --------------------------------------------------------------------------------
#
# A layout's value chunk is read by straight-line code generated for that layout (the technique ``dataclasses``
# uses for ``__init__``): no per-column dispatch, locals only. It handles the common case (lengths that fit two
# varint bytes) and returns None for anything else, and the generic reader then decodes the group or raises a
# precise DecodeError. Column names only enter the source as ``repr`` literals.

#: zigzag decoding of one-byte varints, and the canonical text of small values, by byte value
_ZIGZAG = [(b >> 1) ^ -(b & 1) for b in range(0x80)]
_SIGNED_TEXT = [str(value) for value in _ZIGZAG]
_UNSIGNED_TEXT = [str(value) for value in range(0x80)]

#: for an n-byte varint read as a little-endian integer: which bits are continuation flags, and their values
_CONTINUATION_MASK = [sum(0x80 << (8 * k) for k in range(n)) for n in range(11)]
_CONTINUATION_BITS = [sum(0x80 << (8 * k) for k in range(n - 1)) for n in range(11)]

_LENGTH_SOURCE = """\
b = data[pos]
if b < 0x80:
    pos += 1
    L{i} = zigzag[b]
else:
    c = data[pos + 1]
    if c >= 0x80: return None
    b = (b & 0x7F) | (c << 7)
    pos += 2
    L{i} = (b >> 1) ^ -(b & 1)"""

_MULTI_BYTE_INT_SOURCE = """\
elif L{i} == 2:
    u = data[pos]
    c = data[pos + 1]
    if u < 0x80 or c >= 0x80: return None
    u = (u & 0x7F) | (c << 7)
    v{i} = CONVERT
elif L{i} == 3:
    u = data[pos]
    c = data[pos + 1]
    d = data[pos + 2]
    if u < 0x80 or c < 0x80 or d >= 0x80: return None
    u = (u & 0x7F) | ((c & 0x7F) << 7) | (d << 14)
    v{i} = CONVERT
elif 4 <= L{i} <= 8:  # continuation bits checked on all bytes at once, then the 7-bit groups packed
    u = from_bytes(data[pos:stop], 'little')
    if u & continuation_mask[L{i}] != continuation_bits[L{i}]: return None
    u = (u & 0x7F) | (u >> 1 & 0x3F80) | (u >> 2 & 0x1FC000) | (u >> 3 & 0xFE00000) | (u >> 4 & 0x7F0000000) \\
        | (u >> 5 & 0x3F800000000) | (u >> 6 & 0x1FC0000000000) | (u >> 7 & 0xFE000000000000)
    v{i} = CONVERT
else:
    u = varint_value(data, pos, stop)
    if u is None: return None
    v{i} = CONVERT"""

_VALUE_SOURCE: dict[int, str] = {
    C_TEXT: "v{i} = data[pos:stop].decode()",
    C_SVARINT: """\
if L{i} == 1:
    u = data[pos]
    if u >= 0x80: return None
    v{i} = signed_text[u]
""" + _MULTI_BYTE_INT_SOURCE.replace("CONVERT", "str((u >> 1) ^ -(u & 1))"),
    C_UVARINT: """\
if L{i} == 1:
    u = data[pos]
    if u >= 0x80: return None
    v{i} = unsigned_text[u]
""" + _MULTI_BYTE_INT_SOURCE.replace("CONVERT", "str(u)"),
    C_BYTES: "v{i} = b2a_base64(data[pos:stop], newline=False).decode()",
    C_DOUBLE: "if L{i} != 8: return None\nv{i} = repr(unpack_f64(data, pos)[0])",
    C_FLOAT: "if L{i} != 8: return None\nv{i} = float32_repr(unpack_f64(data, pos)[0])",
    # TiDB's plain decimal text is canonical; anything else goes to the generic path (normalize or reject)
    C_DECIMAL: """\
v{i} = data[pos:stop].decode('ascii')
t = v{i}[1:] if v{i}[:1] == '-' else v{i}
if not t.replace('.', '', 1).isdigit() or t[0] == '.' or t[-1] == '.': return None""",
    C_NONE: "if L{i}: return None\nv{i} = None",
}


def _varint_value(data: bytes, pos: int, stop: int) -> Optional[int]:
    """The uvarint filling exactly data[pos:stop], or None."""
    if not 1 <= stop - pos <= 10:
        return None
    value = 0
    shift = 0
    for byte in data[pos:stop - 1]:
        if byte < 0x80:
            return None
        value |= (byte & 0x7F) << shift
        shift += 7
    byte = data[stop - 1]
    if byte >= 0x80:
        return None
    value |= byte << shift
    return value if value < _UINT64 else None


def _values_function(names: list[str], kinds: list[int]) -> Callable[[bytes, int, int], Optional[dict]]:
    lines = ["def values(data, pos, end, str=str, repr=repr):", "    try:"]
    for i in range(len(names)):
        lines += ["        " + line for line in _LENGTH_SOURCE.format(i=i).split("\n")]
    for i, kind in enumerate(kinds):
        lines += [f"        if L{i} < 0:", f"            if L{i} != -1: return None", f"            v{i} = None",
                  "        else:", f"            stop = pos + L{i}"]  # an overrun leaves pos > end: caught below
        lines += ["            " + line for line in _VALUE_SOURCE[kind].format(i=i).split("\n")]
        lines.append("            pos = stop")
    lines += ["    except (IndexError, UnicodeDecodeError, ValueError, struct.error):", "        return None",
              "    if pos != end: return None",
              "    return {" + ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names)) + "}"]
    namespace = {"varint_value": _varint_value, "b2a_base64": binascii.b2a_base64, "unpack_f64": _F64.unpack_from,
                 "float32_repr": float32_repr, "struct": struct, "zigzag": _ZIGZAG, "signed_text": _SIGNED_TEXT,
                 "unsigned_text": _UNSIGNED_TEXT, "from_bytes": int.from_bytes,
                 "continuation_mask": _CONTINUATION_MASK, "continuation_bits": _CONTINUATION_BITS}
    exec("\n".join(lines), namespace)  # noqa: S102 - built from fixed templates and repr() literals
    return namespace["values"]


# The reader above decodes every length varint on its own. Most rows have only values under 64 bytes, whose
# lengths are one-byte zigzag varints: ``_narrow_values_function`` generates a reader for them that maps the whole
# length chunk through one ``bytes.translate`` table and unpacks it into locals at once; a chunk with any other
# byte (a longer value, an invalid negative length) is handed to the reader above. Its multi-byte integers use
# small-int arithmetic on the unpacked bytes (int.from_bytes and 56-bit masks are bignum operations, slower).

#: one-byte zigzag length -> length (0-63), with NULL (-1) -> 127 and anything else (negative lengths below -1,
#: multi-byte varints) -> 0x80, so that ``bytes.isascii`` of the mapped chunk says whether it is all plain lengths
_NARROW_NULL = 0x7F
_NARROW_LENGTHS = bytes(b >> 1 if b < 0x80 and not b & 1 else _NARROW_NULL if b == 1 else 0x80 for b in range(256))

# VALUE is replaced by the conversion of the integer ``u``; the unpacked bytes are checked for the continuation
# bit being set on all but the last one (Go's binary.Uvarint accepts non-minimal encodings: so does this)
_NARROW_INT_SOURCE = """\
if L{i} == 1:  # a byte with the continuation bit is past the table's end: IndexError
    v{i} = TEXT[data[pos]]
    pos += 1
elif L{i} == 2:
    a, b = data[pos:(pos := pos + 2)]
    if a < 0x80 or b >= 0x80: return None
    u = a + (b << 7) - 0x80
    v{i} = VALUE
elif L{i} == 3:
    a, b, c = data[pos:(pos := pos + 3)]
    if (a & b) < 0x80 or c >= 0x80: return None
    u = a + (b << 7) + (c << 14) - 0x4080
    v{i} = VALUE
elif L{i} == 4:
    a, b, c, d = data[pos:(pos := pos + 4)]
    if (a & b & c) < 0x80 or d >= 0x80: return None
    u = a + (b << 7) + (c << 14) + (d << 21) - 0x204080
    v{i} = VALUE
elif L{i} == 5:
    a, b, c, d, e = data[pos:(pos := pos + 5)]
    if (a & b & c & d) < 0x80 or e >= 0x80: return None
    u = a + (b << 7) + (c << 14) + (d << 21) - 0x10204080 + (e << 28)
    v{i} = VALUE
else:
    u = varint_value(data, pos, pos + L{i})
    if u is None: return None
    v{i} = VALUE
    pos += L{i}"""

_NARROW_VALUE_SOURCE: dict[int, str] = {
    C_TEXT: "v{i} = data[pos:(pos := pos + L{i})].decode()",
    C_SVARINT: _NARROW_INT_SOURCE.replace("TEXT", "signed_text").replace("VALUE", "str((u >> 1) ^ -(u & 1))"),
    C_UVARINT: _NARROW_INT_SOURCE.replace("TEXT", "unsigned_text").replace("VALUE", "str(u)"),
    C_BYTES: "v{i} = b2a_base64(data[pos:(pos := pos + L{i})], newline=False).decode()",
    C_DOUBLE: "if L{i} != 8: return None\nv{i} = repr(unpack_f64(data, pos)[0])\npos += 8",
    C_FLOAT: "if L{i} != 8: return None\nv{i} = float32_repr(unpack_f64(data, pos)[0])\npos += 8",
    # TiDB's plain decimal text is canonical: unsigned ones pass the first check, signed ones the second
    C_DECIMAL: """\
v{i} = data[pos:(pos := pos + L{i})].decode('ascii')
if not v{i}.replace('.', '', 1).isdigit() or v{i}[0] == '.' or v{i}[-1] == '.':
    t = v{i}[1:] if v{i}[:1] == '-' else v{i}
    if not t.replace('.', '', 1).isdigit() or t[0] == '.' or t[-1] == '.': return None""",
    C_NONE: "if L{i}: return None\nv{i} = None",
}


def _narrow_lines(names: list[str], kinds: list[int], wide: list[str], done: str) -> list[str]:
    """Source that reads the value chunk at ``pos`` (ending at ``end``): the one-byte-length columns
    straight-line into ``v0``, ``v1``... then ``done`` with ``VALUES`` replaced by the row's dict display; the
    statements ``wide`` for any other chunk. ``return None`` where the generic reader must decide; it raises
    IndexError, UnicodeDecodeError, ValueError or struct.error on bytes that do not fit, which the caller's
    ``try`` turns into None too."""
    count = len(kinds)
    targets = ", ".join(f"L{i}" for i in range(count)) + ("," if count == 1 else "")
    lines = [f"lengths = data[pos:pos + {count}].translate(narrow_lengths)",
             "if not lengths.isascii():"]
    lines += ["    " + line for line in wide]
    lines += ["else:",
              f"    {targets} = lengths",
              f"    pos += {count}"]
    for i, kind in enumerate(kinds):
        lines += [f"    if L{i} == {_NARROW_NULL}:", f"        v{i} = None", "    else:"]
        lines += ["        " + line for line in _NARROW_VALUE_SOURCE[kind].format(i=i).split("\n")]
    lines += ["    if pos != end: return None",
              "    " + done.replace("VALUES", "{" + ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names)) + "}")]
    return lines


def _narrow_namespace(wide: Callable[[bytes, int, int], Optional[dict]]) -> dict[str, Any]:
    return {"varint_value": _varint_value, "b2a_base64": binascii.b2a_base64, "unpack_f64": _F64.unpack_from,
            "float32_repr": float32_repr, "struct": struct, "signed_text": _SIGNED_TEXT,
            "unsigned_text": _UNSIGNED_TEXT, "narrow_lengths": _NARROW_LENGTHS, "wide": wide}


def _narrow_values_function(names: list[str], kinds: list[int],
                            wide: Callable[[bytes, int, int], Optional[dict]]) -> Callable[[bytes, int, int],
                                                                                          Optional[dict]]:
    """The reader of value chunks whose lengths are all one-byte varints; ``wide`` reads the others."""
    if not names:
        return wide
    lines = ["def values(data, pos, end, str=str, repr=repr, narrow_lengths=narrow_lengths, signed_text=signed_text,"
             " unsigned_text=unsigned_text, unpack_f64=unpack_f64):", "    try:"]
    lines += ["        " + line for line in _narrow_lines(names, kinds, ["return wide(data, pos, end)"],
                                                          "return VALUES")]
    lines += ["    except (IndexError, UnicodeDecodeError, ValueError, struct.error):", "        return None"]
    namespace = _narrow_namespace(wide)
    exec("\n".join(lines), namespace)  # noqa: S102 - built from fixed templates and repr() literals
    return namespace["values"]


#: byte -> 0 for the last byte of a varint, 1 for a byte with the continuation bit
_VARINT_ENDS = bytes(int(b >= 0x80) for b in range(256))
#: n -> the 7-bit groups of an n-byte little-endian varint read as one integer
_GROUP_BITS = [int.from_bytes(b"\x7f" * n, "little") for n in range(11)]


def _lanes(mask: int, width: int) -> int:
    """``mask`` repeated in every ``width``-bit lane of an 80-bit integer."""
    return sum(mask << shift for shift in range(0, 80, width))


#: the halving steps that pack ten 7-bit groups (one per byte) into one integer: (shift, kept bits, moved bits)
_PACK_STEPS = [(1, _lanes(0x7F, 16), _lanes(0x3F80, 16)), (2, _lanes(0x3FFF, 32), _lanes(0xFFFC000, 32)),
               (4, _lanes(0xFFFFFFF, 64), _lanes(0xFFFFFFF << 28, 64)), (8, (1 << 56) - 1, ((1 << 56) - 1) << 56)]


def _long_uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """``_uvarint`` for long varints (a commit ts takes 9 bytes): the end found by ``bytes.find`` and the 7-bit
    groups packed by halving steps, instead of a Python loop over the bytes."""
    length = data[pos:min(pos + 10, end)].translate(_VARINT_ENDS).find(0) + 1
    if length <= 1:  # one byte, or none of the ten ends the varint: the plain reader answers (or raises)
        return _uvarint(data, pos, end)
    u = int.from_bytes(data[pos:pos + length], "little") & _GROUP_BITS[length]
    for shift, kept, moved in _PACK_STEPS:
        u = (u & kept) | ((u >> shift) & moved)
    if u >= _UINT64:
        return _uvarint(data, pos, end)  # raises the overflow error
    return u, pos + length


def _known_layout(layouts: dict[int, list[_Layout]], data: bytes, start: int) -> Optional[_Layout]:
    """The cached layout of the column group at ``start``, if its column count is a one-byte varint (else the
    checked path reads it). There is at most one: a section is exactly 3 x count self-delimiting varints, so no
    section of a count is a prefix of another."""
    count = data[start + 1]
    if count >= 0x80:
        return None
    for layout in layouts.get(count, ()):
        if data.startswith(layout.section, start + 2):
            return layout
    return None


def _batch_names(data: bytes, pos: int, end: int, count: int, terms: list[str]) -> tuple[list[str], int]:
    """The names of a header chunk of delta term ids (schemas or tables) and the position after it; raises
    IndexError for an id outside the dictionary (``_decode_checked`` says which).

    A batch of one table repeats one id: a first one-byte varint, then zero deltas."""
    if data.startswith(_ZERO_DELTAS[count - 1], pos + 1) and data[pos] < 0x80:
        term_id = _ZIGZAG[data[pos]]
        if not -1 <= term_id < len(terms):
            raise IndexError(term_id)
        return [terms[term_id] if term_id >= 0 else ""] * count, pos + count
    ids, pos = _delta_varint_chunk(data, pos, end, count)
    if min(ids) < -1 or max(ids) >= len(terms):
        raise IndexError(ids)
    return [terms[i] if i >= 0 else "" for i in ids], pos


#: count -> that many zero bytes: the deltas of a header chunk that repeats one value
_ZERO_DELTAS = [bytes(count) for count in range(0x80)]


#: count -> the type chunk of a batch of that many row events (one-byte uvarint 1 each)
_ROW_TYPES = [bytes([EVENT_ROW]) * count for count in range(0x80)]


def _kind(code: int, flags: int) -> int:
    if code in type_codes.INTEGER_CODES:
        return C_UVARINT if flags & type_codes.FLAG_UNSIGNED else C_SVARINT
    if code == type_codes.TYPE_YEAR:
        return C_SVARINT
    if code in (type_codes.TYPE_BIT, type_codes.TYPE_ENUM, type_codes.TYPE_SET):
        return C_UVARINT
    if code == type_codes.TYPE_FLOAT:
        return C_FLOAT
    if code == type_codes.TYPE_DOUBLE:
        return C_DOUBLE
    if code == type_codes.TYPE_NEWDECIMAL:
        return C_DECIMAL
    if code in type_codes.STRING_CODES or code in type_codes.BLOB_CODES:
        return C_BYTES if flags & type_codes.FLAG_BINARY else C_TEXT
    if code in (type_codes.TYPE_NULL, type_codes.TYPE_GEOMETRY, type_codes.TYPE_DECIMAL):
        return C_NONE
    return C_TEXT


# --- primitive readers; each takes the end of the region it may read ------------------------------------------


def _uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        raise DecodeError(f"craft: varint at byte {pos} runs past its region (ends at {end})")
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise DecodeError(f"craft: varint at byte {pos} runs past its region (ends at {end})")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:
            raise DecodeError(f"craft: varint ending at byte {pos} is longer than 10 bytes")
    if result >= _UINT64:
        raise DecodeError(f"craft: varint ending at byte {pos} overflows 64 bits")
    return result, pos


def _uvarint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    if count > end - pos:
        raise DecodeError(f"craft: chunk of {count} varints at byte {pos} cannot fit in {end - pos} bytes")
    stop = pos + count
    chunk = data[pos:stop]
    if not chunk or max(chunk) < 0x80:  # every element is one byte
        return list(chunk), stop
    values = []
    append = values.append
    for _ in range(count):
        byte = data[pos] if pos < end else 0x80
        if byte < 0x80:
            append(byte)
            pos += 1
        else:
            value, pos = _uvarint(data, pos, end)
            append(value)
    return values, pos


def _varint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    raw, pos = _uvarint_chunk(data, pos, end, count)
    return [(u >> 1) ^ -(u & 1) for u in raw], pos


def _delta_varint_chunk(data: bytes, pos: int, end: int, count: int) -> tuple[list[int], int]:
    raw, pos = _uvarint_chunk(data, pos, end, count)
    return list(accumulate([(u >> 1) ^ -(u & 1) for u in raw])), pos


def _reversed_uvarint(data: bytes, floor: int) -> tuple[int, int]:
    """(bytes used, value) of the uvarint written backwards at the end of ``data``, not reading below floor."""
    index = len(data) - 1
    result = 0
    shift = 0
    used = 0
    while index >= floor:
        byte = data[index]
        used += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return used, result
        shift += 7
        index -= 1
        if used >= 10:
            break
    raise DecodeError("craft: the trailing size-table length is truncated or longer than 10 bytes")


def _value_uvarint(data: bytes, pos: int, stop: int) -> int:
    value, pos = _uvarint(data, pos, stop)
    if pos != stop:
        raise DecodeError(f"craft: integer value has {stop - pos} extra bytes")
    return value


class CraftDecoder:
    """Decoder for TiCDC Craft messages (registry name ``craft``)."""

    _CACHE_LIMIT = 256

    def __init__(self, options: Any = None, *, reference: bool = False, compiled: bool = True) -> None:
        """``reference=True`` turns off every shortcut (the row-batch path and the fast value readers): the tests
        compare the shortcuts with it. ``compiled=False`` reads values with the generated Python readers even
        where the compiled one is built (the tests check both against the reference)."""
        self.options = options
        self._reference = reference
        self._compiled = compiled
        # term-dictionary bytes -> (its terms, column count -> layouts seen with that dictionary)
        self._dictionaries: dict[bytes, tuple[list[str], dict[int, list[_Layout]]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Decoders are shipped to Spark executors: the caches (with generated code) stay behind."""
        return {"options": self.options, "reference": self._reference, "compiled": self._compiled}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state.get("options"), reference=state.get("reference", False),
                      compiled=state.get("compiled", True))

    def decode(self, message: Message) -> list[model.Event]:
        """The row-batch path when it reads the message, else the checked path (which also learns the layouts)."""
        data = message.value
        if data and not self._reference:
            try:
                events = self._row_batch(data, message)
            except (IndexError, ValueError, DecodeError):  # a read past the end, a short unpack, a long varint:
                events = None  # the checked path says what is wrong
            if events is not None:
                return events
        return self._decode_checked(message)

    def _row_batch(self, data: bytes, message: Message) -> Optional[list[model.Event]]:
        """A message of row events whose layouts are known, read in one pass; None when it is anything else.

        This is ``_decode_checked`` for the bulk of a topic (TiCDC batches up to 16 rows of a table in one
        message), minus what makes that path general: the body sizes, the row-group sizes and the commit ts are
        read by the event loop itself from three cursors (not into lists first; ``bytes.split`` on the varint
        ends says where each run ends), sizes are one- or two-byte varints, one-byte header chunks are compared
        in bulk, the last layout is tried first, updates are read inline. Every check of the checked path is
        kept or made stricter: wherever it would raise or take a generic reader, this returns None (or raises
        IndexError, ValueError or DecodeError, which ``decode`` treats alike), so the events it returns are
        always the checked path's, never a guess.
        """
        end = len(data)
        tables_size = data[-1]
        tables_end = end - 1
        tp = tables_end - tables_size  # the size tables: [header size, dictionary size], body sizes, row groups
        if data[0] != VERSION or tables_size >= 0x80 or tp < 1 or data[tp] != 2:
            return None
        u, tp = _uvarint(data, tp + 1, tables_end)
        header_size = (u >> 1) ^ -(u & 1)
        u, tp = _uvarint(data, tp, tables_end)
        dict_size = header_size + ((u >> 1) ^ -(u & 1))
        count = data[tp]
        if not 0 < count < 0x80 or header_size < 0 or dict_size < 0:
            return None
        # body sizes (zigzag deltas): read by the event loop from cursor sp; the row groups' tables follow them,
        # found by counting varint ends (a bytes.split in C); the sums are checked against the bodies at the end
        sp = tp + 1
        tail = data[sp:tables_end].translate(_VARINT_ENDS).split(b"\x00", count)
        if len(tail) <= count:
            return None
        tp = tables_end - len(tail[-1])
        header_end = 1 + header_size
        bodies_end = tables_end - tables_size - dict_size
        cached = self._dictionaries.get(data[bodies_end:bodies_end + dict_size])
        if cached is None:
            return None
        terms, layouts = cached

        # headers: commit ts (delta uvarints, the first from 0: read by the event loop from cursor tsp; the next
        # chunk starts where the count-th varint ends), types (all rows), partitions (skipped), schema and table
        # term ids
        tsp = 1
        tail = data[1:header_end].translate(_VARINT_ENDS).split(b"\x00", count)
        if len(tail) <= count:
            return None
        pos = header_end - len(tail[-1])
        if data[pos:pos + count] != _ROW_TYPES[count]:
            return None
        pos += count
        if data[pos:pos + count].isascii():
            pos += count
        else:
            pos = _uvarint_chunk(data, pos, header_end, count)[1]
        schemas, pos = _batch_names(data, pos, header_end, count, terms)
        table_names, pos = _batch_names(data, pos, header_end, count, terms)
        if pos != header_end:
            return None

        # the events; a group that overruns its body is caught by the value reader, whose chunk must end exactly
        # at the group's end (and positions only grow)
        events: list[model.Event] = []
        append = events.append
        topic, partition, offset = message.topic, message.partition, message.offset
        layout: Optional[_Layout] = None  # the last layout read: a batch is usually rows of one table
        body_start = header_end
        size = 0
        ts = 0
        for index, schema, table in zip(range(count), schemas, table_names):
            u = data[tsp]  # the commit ts
            tsp += 1
            if u >= 0x80:
                c = data[tsp]
                if c < 0x80:
                    u += (c << 7) - 0x80
                    tsp += 1
                else:
                    u, tsp = _long_uvarint(data, tsp - 1, header_end)
            ts += u
            if ts >= _UINT64:  # Go's uint64 deltas wrap around
                ts %= _UINT64
            u = data[sp]  # the body size: one or two bytes (a negative size fails the group-size checks below)
            sp += 1
            if u >= 0x80:
                c = data[sp]
                if c >= 0x80:
                    return None
                u += (c << 7) - 0x80
                sp += 1
            size += (u >> 1) ^ -(u & 1)
            body_end = body_start + size
            groups = data[tp]
            if groups == 1:  # insert or delete: one group filling the body; its size is zigzag-encoded
                u = data[tp + 1]
                if u < 0x80:
                    tp += 2
                else:
                    c = data[tp + 2]
                    if c >= 0x80:
                        return None
                    u = (u & 0x7F) | (c << 7)
                    tp += 3
                if u != size << 1:
                    return None
                if layout is None or not (data.startswith(layout.inserted, body_start)
                                          or data.startswith(layout.deleted, body_start)):
                    layout = _known_layout(layouts, data, body_start)
                    if layout is None:
                        return None
                values = layout.values(data, body_start + layout.values_offset, body_end)
                if values is None:
                    return None
                group_type = data[body_start]
                if group_type == GROUP_NEW:
                    append(RowChange(schema, table, ts, INSERT, values, None, layout.keys, layout.types,
                                     make_position(topic, partition, offset, index)))
                elif group_type == GROUP_OLD:
                    append(RowChange(schema, table, ts, DELETE, None, values, layout.keys, layout.types,
                                     make_position(topic, partition, offset, index)))
                else:
                    return None
            elif groups == 2:  # update: new and old values, in either order
                first = data[tp + 1]
                if first < 0x80:
                    tp += 2
                else:
                    c = data[tp + 2]
                    if c >= 0x80:
                        return None
                    first = (first & 0x7F) | (c << 7)
                    tp += 3
                second = data[tp]
                if second < 0x80:
                    tp += 1
                else:
                    c = data[tp + 1]
                    if c >= 0x80:
                        return None
                    second = (second & 0x7F) | (c << 7)
                    tp += 2
                first = (first >> 1) ^ -(first & 1)
                second = first + ((second >> 1) ^ -(second & 1))
                if first < 2 or second < 2 or first + second != size:
                    return None
                middle = body_start + first
                # the first group, the last layout tried first (the old values usually share the new ones')
                if layout is None or not (data.startswith(layout.inserted, body_start)
                                          or data.startswith(layout.deleted, body_start)):
                    layout = _known_layout(layouts, data, body_start)
                    if layout is None:
                        return None
                one = layout.values(data, body_start + layout.values_offset, middle)
                if one is None:
                    return None
                one_layout = layout
                if not (data.startswith(layout.inserted, middle) or data.startswith(layout.deleted, middle)):
                    layout = _known_layout(layouts, data, middle)
                    if layout is None:
                        return None
                two = layout.values(data, middle + layout.values_offset, body_end)
                if two is None:
                    return None
                one_type = data[body_start]
                two_type = data[middle]
                if one_type == GROUP_NEW and two_type == GROUP_OLD:
                    after, before, before_layout = one, two, layout
                    layout = one_layout
                elif one_type == GROUP_OLD and two_type == GROUP_NEW:
                    after, before, before_layout = two, one, one_layout
                else:
                    return None
                types = layout.types
                if before_layout is not layout:
                    types = {**types, **before_layout.types}
                append(RowChange(schema, table, ts, UPDATE, after, before, layout.keys, types,
                                 make_position(topic, partition, offset, index)))
            else:
                return None
            body_start = body_end
        if tp != tables_end or body_start != bodies_end:
            return None
        return events

    def _decode_checked(self, message: Message) -> list[model.Event]:
        """Any message, every check with a precise error; the reference for ``_row_batch``."""
        data = message.value
        if not data:
            raise DecodeError("craft message has an empty value (craft puts the whole batch in the value)")
        end = len(data)
        if data[0] != VERSION:
            version, _ = _uvarint(data, 0, end)
            raise DecodeError(f"unsupported craft version {version} (expected {VERSION})")
        pos = 1
        if data[-1] < 0x80 and end > 1:  # the usual one-byte trailing size
            used, tables_size = 1, data[-1]
        else:
            used, tables_size = _reversed_uvarint(data, pos)
        tables_end = end - used
        tables_start = tables_end - tables_size
        if tables_start < pos:
            raise DecodeError(f"craft: size tables claim {tables_size} bytes, only {tables_end - pos} precede them")
        tables = self._size_tables(data, tables_start, tables_end)
        if len(tables) < 2 or len(tables[0]) != 2:
            raise DecodeError("craft: size tables lack the meta table [header size, dictionary size] or body sizes")
        header_size, dict_size = tables[0]
        body_sizes = tables[1]
        if header_size < 0 or dict_size < 0 or (body_sizes and min(body_sizes) < 0):
            raise DecodeError("craft: negative size in the size tables")
        header_end = pos + header_size
        bodies_end = header_end + sum(body_sizes)
        dict_end = bodies_end + dict_size
        if dict_end != tables_start:
            raise DecodeError(
                f"craft: headers, bodies and dictionary end at byte {dict_end} but the size tables start at"
                f" {tables_start}")
        # the dictionary and the layouts parsed with it are cached by the dictionary's bytes: a topic repeats them
        dictionary = data[bodies_end:dict_end]
        cached = self._dictionaries.get(dictionary)
        if cached is None:
            terms = self._terms(data, bodies_end, dict_end) if dict_size else []
            if len(self._dictionaries) >= self._CACHE_LIMIT:
                self._dictionaries.clear()
            cached = self._dictionaries[dictionary] = (terms, {})
        terms, layouts = cached
        count = len(body_sizes)
        if count == 0:
            if header_size:
                raise DecodeError("craft: headers present in a message with no events")
            return []

        if count == 1:  # DDL, resolved and lone rows: five plain varints
            commit_ts, pos = _uvarint(data, pos, header_end)
            kind, pos = _uvarint(data, pos, header_end)
            _partition, pos = _uvarint(data, pos, header_end)
            schema_id, pos = _uvarint(data, pos, header_end)
            table_id, pos = _uvarint(data, pos, header_end)
            if pos != header_end:
                raise DecodeError(f"craft: headers have {header_end - pos} unread bytes")
            schema_id = (schema_id >> 1) ^ -(schema_id & 1)
            table_id = (table_id >> 1) ^ -(table_id & 1)
            if not (-1 <= schema_id < len(terms) and -1 <= table_id < len(terms)):
                raise DecodeError(f"craft: term id {max(schema_id, table_id)} is not in the {len(terms)}-entry"
                                  " dictionary")
            return self._events(data, header_end, body_sizes, tables, terms, layouts, [commit_ts], [kind],
                                [terms[schema_id] if schema_id >= 0 else ""],
                                [terms[table_id] if table_id >= 0 else ""], message)
        ts, pos = _uvarint_chunk(data, pos, header_end, count)
        # deltas are uint64 in Go: a batch whose ts goes down (rows of different tables) wraps around 2**64
        ts = [value % _UINT64 for value in accumulate(ts)]
        kinds, pos = _uvarint_chunk(data, pos, header_end, count)
        _partitions, pos = _uvarint_chunk(data, pos, header_end, count)  # not kept: see module docstring
        schema_ids, pos = _delta_varint_chunk(data, pos, header_end, count)
        table_ids, pos = _delta_varint_chunk(data, pos, header_end, count)
        if pos != header_end:
            raise DecodeError(f"craft: headers have {header_end - pos} unread bytes")
        if min(schema_ids + table_ids) < -1 or max(schema_ids + table_ids) >= len(terms):
            bad = next(i for i in schema_ids + table_ids if not -1 <= i < len(terms))
            raise DecodeError(f"craft: term id {bad} is not in the {len(terms)}-entry dictionary")
        schemas = [terms[i] if i >= 0 else "" for i in schema_ids]
        table_names = [terms[i] if i >= 0 else "" for i in table_ids]
        return self._events(data, header_end, body_sizes, tables, terms, layouts, ts, kinds, schemas, table_names,
                            message)

    def _events(self, data: bytes, body_start: int, body_sizes: list[int], tables: list[list[int]],
                terms: list[str], layouts: dict[int, list[_Layout]], ts: list[int], kinds: list[int],
                schemas: list[str], table_names: list[str], message: Message) -> list[model.Event]:
        count = len(body_sizes)
        events: list[model.Event] = []
        topic, partition, offset = message.topic, message.partition, message.offset
        append = events.append
        for index in range(count):
            body_end = body_start + body_sizes[index]
            position = make_position(topic, partition, offset, index)
            kind = kinds[index]
            if kind == EVENT_ROW:
                if len(tables) <= 2 + index:
                    raise DecodeError(f"craft: row event {index} has no column-group size table")
                group_sizes = tables[2 + index]
                # the bulk of any topic inline: an insert or delete whose single group has a known layout
                if len(group_sizes) == 1 and group_sizes[0] == body_end - body_start and body_end - body_start > 1:
                    values = None
                    column_count = data[body_start + 1]
                    for layout in layouts.get(column_count, ()):
                        start = body_start + 2 + len(layout.section)
                        if start <= body_end and data.startswith(layout.section, body_start + 2):
                            values = layout.values(data, start, body_end)
                            break
                    if values is not None:
                        group_type = data[body_start]
                        if group_type == GROUP_NEW:
                            append(RowChange(schemas[index], table_names[index], ts[index], model.INSERT, values,
                                             None, layout.keys, layout.types, position))
                            body_start = body_end
                            continue
                        if group_type == GROUP_OLD:
                            append(RowChange(schemas[index], table_names[index], ts[index], model.DELETE, None,
                                             values, layout.keys, layout.types, position))
                            body_start = body_end
                            continue
                append(self._row(data, body_start, body_end, group_sizes, terms, layouts,
                                 schemas[index], table_names[index], ts[index], position, index))
            elif kind == EVENT_DDL:
                action, at = _uvarint(data, body_start, body_end)
                length, at = _uvarint(data, at, body_end)
                if at + length != body_end:
                    raise DecodeError(f"craft: DDL event {index} query length {length} does not fill its body")
                query = self._text(data[at:body_end], f"DDL event {index} query")
                append(DDLEvent(schema=schemas[index], table=table_names[index],
                                       commit_ts=ts[index], query=query,
                                       ddl_type=ddl_type_for_action(action, query), position=position))
            elif kind == EVENT_RESOLVED:
                if body_end != body_start:
                    raise DecodeError(f"craft: resolved event {index} has a {body_end - body_start}-byte body")
                append(ResolvedEvent(ts=ts[index], position=position))
            else:
                raise DecodeError(f"craft: event {index} has unknown type {kind}")
            body_start = body_end
        return events

    # --- message parts ----------------------------------------------------------------------------------------

    @staticmethod
    def _size_tables(data: bytes, pos: int, end: int) -> list[list[int]]:
        tables = []
        while pos < end:
            count = data[pos]
            if count < 0x80:
                pos += 1
            else:
                count, pos = _uvarint(data, pos, end)
            if count > end - pos:
                raise DecodeError(f"craft: size table of {count} entries cannot fit in {end - pos} bytes")
            if count == 1 and pos + 1 < end:  # the column-group table of an insert or delete: one size
                byte = data[pos]
                if byte < 0x80:
                    tables.append([(byte >> 1) ^ -(byte & 1)])
                    pos += 1
                    continue
                following = data[pos + 1]
                if following < 0x80:
                    byte = (byte & 0x7F) | (following << 7)
                    tables.append([(byte >> 1) ^ -(byte & 1)])
                    pos += 2
                    continue
            table = []
            total = 0
            for _ in range(count):
                if pos >= end:
                    raise DecodeError("craft: size table runs past the size-table region")
                byte = data[pos]
                if byte < 0x80:
                    pos += 1
                elif pos + 1 < end and data[pos + 1] < 0x80:
                    byte = (byte & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    byte, pos = _uvarint(data, pos, end)
                total += (byte >> 1) ^ -(byte & 1)
                table.append(total)
            tables.append(table)
        return tables

    @staticmethod
    def _text(raw: bytes, what: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"craft: {what} is not valid UTF-8: {exc}") from None

    def _terms(self, data: bytes, pos: int, end: int) -> list[str]:
        count, pos = _uvarint(data, pos, end)
        lengths, pos = _uvarint_chunk(data, pos, end, count)
        terms = []
        for length in lengths:
            stop = pos + length
            if stop > end:
                raise DecodeError("craft: term dictionary string runs past the dictionary")
            terms.append(self._text(data[pos:stop], "term dictionary entry"))
            pos = stop
        if pos != end:
            raise DecodeError(f"craft: term dictionary has {end - pos} unread bytes")
        return terms

    @staticmethod
    def _term(terms: list[str], term_id: int) -> Optional[str]:
        if term_id == -1:
            return None
        if not 0 <= term_id < len(terms):
            raise DecodeError(f"craft: term id {term_id} is not in the {len(terms)}-entry dictionary")
        return terms[term_id]

    def _row(self, data: bytes, pos: int, end: int, group_sizes: list[int], terms: list[str],
             layouts: dict[int, list[_Layout]], schema: str, table: str, ts: int, position: model.Position,
             index: int) -> RowChange:
        after: Optional[dict[str, Optional[str]]] = None
        before: Optional[dict[str, Optional[str]]] = None
        after_layout: Optional[_Layout] = None
        before_layout: Optional[_Layout] = None
        for size in group_sizes:
            group_end = pos + size
            if size <= 1 or group_end > end:
                raise DecodeError(f"craft: row event {index} column group size {size} does not fit its body")
            # the common case inline: a known layout whose generated reader accepts the values
            values = None
            count = data[pos + 1]
            if count < 0x80:
                for known in layouts.get(count, ()):
                    start = pos + 2 + len(known.section)
                    if start <= group_end and data.startswith(known.section, pos + 2):
                        values = known.values(data, start, group_end)
                        layout = known
                        break
            if values is None:
                group_type, values, layout = self._group(data, pos, group_end, terms, layouts)
            else:
                group_type = data[pos]
            if group_type == GROUP_NEW and after is None:
                after, after_layout = values, layout
            elif group_type == GROUP_OLD and before is None:
                before, before_layout = values, layout
            else:
                raise DecodeError(f"craft: row event {index} has an unexpected column group type {group_type}")
            pos = group_end
        if pos != end:
            raise DecodeError(f"craft: row event {index} has {end - pos} bytes outside its column groups")
        if after_layout is not None:
            types = after_layout.types  # shared by the layout's rows: RowChange.column_types is read-only
            if before_layout is not None and before_layout is not after_layout:
                types = {**types, **before_layout.types}
            return RowChange(schema, table, ts, model.INSERT if before is None else model.UPDATE, after, before,
                             after_layout.keys, types, position)
        if before_layout is not None:
            return RowChange(schema, table, ts, model.DELETE, None, before, before_layout.keys,
                             before_layout.types, position)
        raise DecodeError(f"craft: row event {index} has no column group")

    def _layout(self, data: bytes, pos: int, end: int, count: int, terms: list[str]) -> tuple[_Layout, int]:
        start = pos
        ids, pos = _delta_varint_chunk(data, pos, end, count)
        codes, pos = _uvarint_chunk(data, pos, end, count)
        flags, pos = _uvarint_chunk(data, pos, end, count)
        names = []
        for term_id in ids:
            name = self._term(terms, term_id)
            if name is None:
                raise DecodeError("craft: a column name term id is -1 (null)")
            names.append(name)
        types: dict[str, str] = {}
        kinds = []
        keys = []
        for name, code, flag in zip(names, codes, flags):
            if name in types:
                raise DecodeError(f"craft: column {name!r} appears twice in one column group")
            try:
                types[name] = descriptor(code, flag)
            except ValueError as exc:
                raise DecodeError(f"craft: column {name!r}: {exc}") from None
            kinds.append(_kind(code, flag))
            if flag & FLAG_HANDLE_KEY:
                keys.append(name)
        return _Layout(data[start:pos], names, kinds, types, tuple(keys), not self._reference, self._compiled), pos

    def _group(self, data: bytes, pos: int, end: int, terms: list[str],
               layouts: dict[int, list[_Layout]]) -> tuple[int, dict[str, Optional[str]], _Layout]:
        group_type = data[pos]
        count = data[pos + 1] if pos + 1 < end else 0x80
        if count < 0x80:
            pos += 2
        else:
            count, pos = _uvarint(data, pos + 1, end)
        candidates = layouts.get(count)
        layout = None
        if candidates:
            for known in candidates:
                section = known.section
                if data.startswith(section, pos) and pos + len(section) <= end:
                    layout = known
                    pos += len(section)
                    break
        if layout is None:
            layout, pos = self._layout(data, pos, end, count, terms)
            if candidates is None:
                candidates = layouts[count] = []
            if len(candidates) < 64:
                candidates.append(layout)
        fast = layout.values(data, pos, end)
        if fast is not None:
            return group_type, fast, layout
        lengths, pos = _varint_chunk(data, pos, end, count)
        values: dict[str, Optional[str]] = {}
        kinds = layout.kinds
        names = layout.names
        for column in range(count):
            length = lengths[column]
            name = names[column]
            if length < 0:
                if length != -1:
                    raise DecodeError(f"craft: column {name!r} has value length {length}")
                values[name] = None
                continue
            stop = pos + length
            if stop > end:
                raise DecodeError(f"craft: column {name!r} value runs past its column group")
            kind = kinds[column]
            if kind == C_TEXT:
                try:
                    values[name] = data[pos:stop].decode("utf-8")
                except UnicodeDecodeError:
                    raise DecodeError(f"craft: column {name!r} text is not valid UTF-8") from None
            elif kind == C_SVARINT:
                if length == 1 and data[pos] < 0x80:
                    u = data[pos]
                else:
                    u = _value_uvarint(data, pos, stop)
                values[name] = str((u >> 1) ^ -(u & 1))
            elif kind == C_UVARINT:
                if length == 1 and data[pos] < 0x80:
                    values[name] = str(data[pos])
                else:
                    values[name] = str(_value_uvarint(data, pos, stop))
            elif kind == C_BYTES:
                values[name] = base64.b64encode(data[pos:stop]).decode("ascii")
            elif kind == C_DOUBLE or kind == C_FLOAT:
                if length != 8:
                    raise DecodeError(f"craft: float column {name!r} has {length} bytes, expected 8")
                number = _F64.unpack_from(data, pos)[0]
                values[name] = float32_repr(number) if kind == C_FLOAT else repr(number)
            elif kind == C_DECIMAL:
                try:
                    values[name] = decimal_text(data[pos:stop].decode("ascii", "replace"))
                except ValueError as exc:
                    raise DecodeError(f"craft: column {name!r}: {exc}") from None
            else:  # C_NONE
                if length:
                    raise DecodeError(f"craft: column {name!r} of a value-less type has {length} value bytes")
                values[name] = None
            pos = stop
        if pos != end:
            raise DecodeError(f"craft: column group has {end - pos} unread bytes")
        return group_type, values, layout
