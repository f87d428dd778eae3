# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Craft's value reader in C: one column group's value chunk -> the row's canonical dict, or None.

It answers exactly as the generated Python readers in ``craft.py`` do (same texts, same None), which stay the
reference and the fallback wherever this module is not built. None means "the checked path decides": it either
normalizes the value or raises the precise DecodeError. ``tests/test_decode_craft.py`` runs the whole decoder on
random, truncated and corrupted batches against ``CraftDecoder(reference=True)``, with this reader in use.

A chunk is ``count`` zigzag-varint lengths (-1 = NULL), then the values. Per value kind (``craft.C_*``):

* 0 text: UTF-8 (strict) -> str
* 1 signed integer / YEAR: one zigzag uvarint filling the value exactly -> decimal text
* 2 unsigned integer, BIT, ENUM, SET: one uvarint filling the value exactly -> decimal text
* 3 DOUBLE, 4 FLOAT: 8 bytes little-endian float64 -> ``repr`` / ``float32_repr``
* 5 binary: standard base64 text
* 6 DECIMAL: ``[-]digits[.digits]`` in ASCII as it is (anything else: None, the checked path normalizes)
* 7 NULL type / GEOMETRY: no value bytes
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_SetItem
from cpython.float cimport PyFloat_FromDouble
from cpython.long cimport PyLong_FromLongLong, PyLong_FromUnsignedLongLong
from cpython.object cimport PyObject_Repr, PyObject_Str
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport uint64_t, int64_t
from libc.string cimport memcpy

import sys
from binascii import b2a_base64

from ticdc_lakehouse.decode.common.go_text import float32_repr

if sys.byteorder != "little":  # DOUBLE/FLOAT values are copied as little-endian float64
    raise ImportError("the compiled Craft reader needs a little-endian host")

cdef enum:
    MAX_COLUMNS = 4096  # TiDB's limit on the columns of a table

cdef enum:  # value kinds: the numbers of craft.py's C_* constants
    K_TEXT = 0
    K_SIGNED = 1
    K_UNSIGNED = 2
    K_DOUBLE = 3
    K_FLOAT = 4
    K_BYTES = 5
    K_DECIMAL = 6
    K_NONE = 7

#: the most columns a ``ValueReader`` takes
COLUMN_LIMIT = MAX_COLUMNS


cdef inline bint _uvarint(const unsigned char* p, Py_ssize_t* at, Py_ssize_t end, uint64_t* out):
    """The uvarint at ``at[0]`` (bounded by ``end``): at most 10 bytes, below 2**64, as Go reads it."""
    cdef uint64_t value = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    cdef Py_ssize_t i = at[0]
    while True:
        if i >= end or shift > 63:
            return False
        byte = p[i]
        i += 1
        if shift == 63 and byte > 1:
            return False  # bits beyond 64
        value |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            break
        shift += 7
    at[0] = i
    out[0] = value
    return True


cdef inline bint _plain_decimal(const unsigned char* p, Py_ssize_t n):
    """``[-]digits[.digits]`` (TiDB's canonical decimal text): ``canonical_text.is_plain_decimal`` on bytes."""
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t dot = -1
    if n > 0 and p[0] == 45:  # '-'
        i = 1
    if i >= n or p[i] == 46 or p[n - 1] == 46:  # empty, or a '.' first or last
        return False
    while i < n:
        if p[i] == 46:
            if dot >= 0:
                return False
            dot = i
        elif p[i] < 48 or p[i] > 57:
            return False
        i += 1
    return True


cdef class ValueReader:
    """The reader of one column layout (names and value kinds), called as ``read(data, pos, end)``."""

    cdef tuple names
    cdef bytes kinds
    cdef Py_ssize_t count

    def __cinit__(self, tuple names, bytes kinds):
        if len(names) != len(kinds) or len(names) > MAX_COLUMNS:
            raise ValueError("names and kinds differ in length, or too many columns")
        self.names = names
        self.kinds = kinds
        self.count = len(names)

    def read(self, bytes data, Py_ssize_t pos, Py_ssize_t end):
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef const unsigned char* kinds = <const unsigned char*>PyBytes_AS_STRING(self.kinds)
        cdef Py_ssize_t count = self.count
        cdef Py_ssize_t size = PyBytes_GET_SIZE(data)
        cdef int64_t lengths[MAX_COLUMNS]
        cdef Py_ssize_t i, at, stop
        cdef uint64_t u
        cdef int64_t length
        cdef double number
        cdef unsigned char kind
        cdef object value
        cdef dict row
        if pos < 0 or end > size or pos > end:
            return None
        at = pos
        for i in range(count):
            if at < end and p[at] < 0x80:  # the usual one-byte length
                u = p[at]
                at += 1
            elif not _uvarint(p, &at, end, &u):
                return None
            length = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
            if length < -1:
                return None
            lengths[i] = length
        row = {}
        for i in range(count):
            length = lengths[i]
            if length == -1:
                PyDict_SetItem(row, <object>PyTuple_GET_ITEM(self.names, i), None)
                continue
            if length > end - at:
                return None
            stop = at + <Py_ssize_t>length
            kind = kinds[i]
            if kind == K_TEXT:
                try:
                    value = PyUnicode_DecodeUTF8(<const char*>p + at, stop - at, NULL)
                except UnicodeDecodeError:
                    return None
            elif kind == K_SIGNED or kind == K_UNSIGNED:
                if stop - at > 10 or not _uvarint(p, &at, stop, &u) or at != stop:
                    return None
                if kind == K_SIGNED:
                    value = PyObject_Str(PyLong_FromLongLong(<int64_t>(u >> 1) ^ -(<int64_t>(u & 1))))
                else:
                    value = PyObject_Str(PyLong_FromUnsignedLongLong(u))
            elif kind == K_DOUBLE or kind == K_FLOAT:
                if length != 8:
                    return None
                memcpy(&number, p + at, 8)  # little-endian hosts only: checked at import
                if kind == K_DOUBLE:
                    value = PyObject_Repr(PyFloat_FromDouble(number))
                else:
                    value = float32_repr(number)
            elif kind == K_BYTES:
                value = b2a_base64(data[at:stop], newline=False).decode("ascii")
            elif kind == K_DECIMAL:
                if not _plain_decimal(p + at, stop - at):
                    return None
                value = PyUnicode_DecodeASCII(<const char*>p + at, stop - at, NULL)
            elif kind == K_NONE:
                if length != 0:
                    return None
                value = None
            else:
                return None
            PyDict_SetItem(row, <object>PyTuple_GET_ITEM(self.names, i), value)
            at = stop
        if at != end:
            return None
        return row
