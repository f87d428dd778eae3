"""MySQL/TiDB column types: parse a type descriptor, map it to Iceberg, decide what a type change means.

Every decoder describes a column with a *type descriptor* (``model`` docstring): lower-case MySQL type text such as
``"int"``, ``"bigint unsigned"``, ``"decimal(10,2)"``, bare ``"decimal"`` when the protocol does not carry the
precision, ``"enum('a','b')"`` or bare ``"enum"``. DDL statements carry full MySQL column type SQL
(``"INT(11) UNSIGNED ZEROFILL"``, ``"NUMERIC(10,5)"``, ``"CHAR(10) CHARACTER SET binary"``). Both are read by
:func:`parse_type` into one :class:`MySQLType`, whose :meth:`MySQLType.descriptor` is the *normalized* text:

* integer display widths and ZEROFILL are dropped (ZEROFILL implies UNSIGNED); ``bool`` is ``tinyint``;
* aliases are resolved the MySQL way: ``integer``/``int4`` -> ``int``, ``int8`` -> ``bigint``, ``real`` ->
  ``double``, ``numeric``/``dec``/``fixed`` -> ``decimal``, ``float(p)`` with p > 24 -> ``double``,
  ``long``/``long varchar`` -> ``mediumtext``, ``serial`` -> ``bigint unsigned``, ``var_string`` -> ``varchar``;
* a text type with ``CHARACTER SET binary`` becomes the binary type MySQL makes of it (``char`` -> ``binary``,
  ``varchar`` -> ``varbinary``, ``text`` -> ``blob``); other charsets and collations are dropped;
* ``decimal(p)`` is ``decimal(p,0)``; fsp 0 is written bare (``datetime(0)`` -> ``datetime``), as TiDB shows it;
* UNSIGNED on BIT and YEAR is dropped (TiDB sets that flag on both, and it means nothing for their values), and
  on FLOAT/DOUBLE (deprecated in MySQL; the stored type is the same, and sqlglot cannot keep it for FLOAT).

A bare descriptor (``"decimal"``, ``"bit"``, ``"varchar"``, ``"enum"``) means *unknown parameters* -- that is how
Canal-JSON and Open Protocol describe columns. SQL gives bare types defaults instead (``DECIMAL`` is
``decimal(10,0)``, ``BIT`` is ``bit(1)``, ``CHAR`` is ``char(1)``); the DDL parser asks for those with
``sql_defaults=True`` so a parsed CREATE TABLE never yields an "unknown" descriptor.

:func:`iceberg_type` is the one place that maps MySQL to Iceberg (as Spark SQL type text);
:func:`pyiceberg_type` is derived from it, so the two can never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional, Sequence

from pyiceberg import types as ice

# ---------------------------------------------------------------------------------------------------------------
# Type families (canonical base names)
# ---------------------------------------------------------------------------------------------------------------

INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
FLOAT_TYPES = frozenset({"float", "double"})
TEMPORAL_FSP_TYPES = frozenset({"datetime", "timestamp", "time"})
CHAR_TYPES = frozenset({"char", "varchar"})
BINARY_CHAR_TYPES = frozenset({"binary", "varbinary"})
TEXT_TYPES = frozenset({"tinytext", "text", "mediumtext", "longtext"})
BLOB_TYPES = frozenset({"tinyblob", "blob", "mediumblob", "longblob"})
ENUM_SET_TYPES = frozenset({"enum", "set"})

#: Every canonical base name a MySQLType may carry.
BASE_TYPES = (
    INTEGER_TYPES
    | FLOAT_TYPES
    | TEMPORAL_FSP_TYPES
    | CHAR_TYPES
    | BINARY_CHAR_TYPES
    | TEXT_TYPES
    | BLOB_TYPES
    | ENUM_SET_TYPES
    | {"decimal", "date", "year", "json", "bit", "vector"}
)

#: Types whose values travel as base64 bytes (values.py) and land in an Iceberg ``binary`` column.
BINARY_TYPES = BINARY_CHAR_TYPES | BLOB_TYPES

#: What a bare ``decimal`` descriptor (precision unknown: Canal-JSON, Open Protocol, Craft) maps to. 28 integer
#: and 10 fractional digits hold the decimals seen in practice; a value that does not fit fails loudly in the
#: typing step instead of being rounded silently. Tables created from a parsed CREATE TABLE never see this.
BARE_DECIMAL_ICEBERG = "decimal(38,10)"

#: BIT(n) of every width, and bare ``bit`` (Open Protocol, Craft: the width is not on the wire): one type that
#: holds BIT(64)'s 2^64-1, so a type maps to one Iceberg type whichever protocol described it, and a later
#: ``MODIFY b BIT(8)`` (any width) changes only the column doc, never halts the table.
BIT_ICEBERG = "decimal(20,0)"

#: Iceberg's largest decimal precision.
MAX_ICEBERG_PRECISION = 38

#: Prefix of the Iceberg column doc that records the MySQL type (see :func:`column_doc`).
DOC_PREFIX = "mysql:"

# Aliases, longest first when several words could match. Values are (base, forced unsigned).
_ALIASES: dict[str, tuple[str, bool]] = {
    "integer": ("int", False),
    "int1": ("tinyint", False),
    "int2": ("smallint", False),
    "int3": ("mediumint", False),
    "middleint": ("mediumint", False),
    "int4": ("int", False),
    "int8": ("bigint", False),
    "bool": ("tinyint", False),
    "boolean": ("tinyint", False),
    "serial": ("bigint", True),
    "numeric": ("decimal", False),
    "dec": ("decimal", False),
    "fixed": ("decimal", False),
    "newdecimal": ("decimal", False),
    "real": ("double", False),
    "double precision": ("double", False),
    "float4": ("float", False),
    "float8": ("double", False),
    "character": ("char", False),
    "nchar": ("char", False),
    "national char": ("char", False),
    "national character": ("char", False),
    "character varying": ("varchar", False),
    "char varying": ("varchar", False),
    "nvarchar": ("varchar", False),
    "nchar varchar": ("varchar", False),
    "nchar varying": ("varchar", False),
    "national varchar": ("varchar", False),
    "national char varying": ("varchar", False),
    "national character varying": ("varchar", False),
    "var_string": ("varchar", False),  # TiDB's TypeVarString name, as some encoders print it
    "long": ("mediumtext", False),
    "long varchar": ("mediumtext", False),
    "long varbinary": ("mediumblob", False),
    "tidbvectorfloat32": ("vector", False),  # Avro ``tidb_type``
}
_MAX_NAME_WORDS = 3

_TO_BINARY = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}


# ---------------------------------------------------------------------------------------------------------------
# The type
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MySQLType:
    """A normalized MySQL column type.

    ``length`` is the precision for ``decimal``, the width for ``bit``, the dimension for ``vector`` and the
    declared length for ``char``/``varchar``/``binary``/``varbinary``; None when unknown or meaningless.
    ``scale`` is the decimal scale (None when the precision is unknown). ``fsp`` is the fractional-seconds
    precision of ``datetime``/``timestamp``/``time`` (None for 0 or unknown). ``elements`` are the ENUM/SET
    members; empty for a bare ``enum``/``set``, whose values are the index / bitmask.
    """

    base: str
    unsigned: bool = False
    length: Optional[int] = None
    scale: Optional[int] = None
    fsp: Optional[int] = None
    elements: tuple[str, ...] = ()

    @property
    def precision(self) -> Optional[int]:
        return self.length if self.base == "decimal" else None

    @property
    def is_binary(self) -> bool:
        """True when values are bytes (base64 canonical strings) and the Iceberg column is ``binary``."""
        return self.base in BINARY_TYPES

    @property
    def is_bare(self) -> bool:
        """True when the descriptor left out parameters the Iceberg mapping needs (decimal, bit) or the members."""
        if self.base == "decimal":
            return self.length is None
        if self.base == "bit":
            return self.length is None
        if self.base in ENUM_SET_TYPES:
            return not self.elements
        return False

    @property
    def members_unknown(self) -> bool:
        """True for an ENUM/SET typed without its members (from row events): its values are index/bitmask."""
        return self.base in ENUM_SET_TYPES and not self.elements

    def descriptor(self) -> str:
        """The normalized descriptor text; ``parse_type(t.descriptor()) == t`` for every normalized type."""
        base = self.base
        if base in ENUM_SET_TYPES:
            text = f"{base}({','.join(quote_string(e) for e in self.elements)})" if self.elements else base
        elif base == "decimal":
            text = base if self.length is None else f"decimal({self.length},{self.scale or 0})"
        elif base in TEMPORAL_FSP_TYPES:
            text = base if not self.fsp else f"{base}({self.fsp})"
        elif base in CHAR_TYPES | BINARY_CHAR_TYPES | {"bit", "vector"}:
            text = base if self.length is None else f"{base}({self.length})"
        else:
            text = base
        if self.unsigned:
            text += " unsigned"
        return text

    def __str__(self) -> str:
        return self.descriptor()


def quote_string(value: str) -> str:
    """Quote text as a MySQL string literal (ENUM/SET members in descriptors): ``'`` doubled, backslash, NUL,
    CR, LF and Ctrl-Z escaped, so the result is one line that MySQL, sqlglot and :func:`parse_type` read back.

    Escaping the backslash (which TiDB's own SHOW CREATE TABLE does not) keeps the round trip exact.
    """
    out = value.replace("\\", "\\\\").replace("'", "''")
    out = out.replace("\0", "\\0").replace("\n", "\\n").replace("\r", "\\r").replace("\x1a", "\\Z")
    return f"'{out}'"


def enum_descriptor(base: str, elements: Sequence[str]) -> str:
    """Build an ``enum(...)``/``set(...)`` descriptor from members, for decoders that receive them as a list."""
    return make_type(base, elements=tuple(elements)).descriptor()


# ---------------------------------------------------------------------------------------------------------------
# Building and parsing
# ---------------------------------------------------------------------------------------------------------------


def make_type(
    name: str,
    *,
    unsigned: bool = False,
    params: Sequence[int] = (),
    elements: Sequence[str] = (),
    charset: Optional[str] = None,
    sql_defaults: bool = False,
) -> MySQLType:
    """Build a normalized type from its parts: ``name`` (canonical or alias), numeric ``params`` as written.

    ``sql_defaults=True`` applies what SQL means by a bare type (``DECIMAL`` = ``decimal(10,0)``, ``BIT`` =
    ``bit(1)``, ``CHAR``/``BINARY`` = length 1); otherwise a bare type stays bare (= unknown). Raises
    ``ValueError`` for an unknown type or invalid parameters.
    """
    key = " ".join(name.lower().split())
    base, forced_unsigned = _ALIASES.get(key, (key, False))
    if base not in BASE_TYPES:
        raise ValueError(f"unknown MySQL type {name!r}")
    unsigned = unsigned or forced_unsigned
    params = tuple(params)
    for p in params:
        if not isinstance(p, int) or isinstance(p, bool) or p < 0:
            raise ValueError(f"invalid parameter {p!r} for MySQL type {name!r}")

    if charset is not None and charset.lower() == "binary" and base in _TO_BINARY:
        base = _TO_BINARY[base]

    def arity(*allowed: int) -> None:
        if len(params) not in allowed:
            raise ValueError(f"MySQL type {name!r} takes {' or '.join(map(str, allowed))} parameters, got {params}")

    if elements and base not in ENUM_SET_TYPES:
        raise ValueError(f"MySQL type {name!r} takes no quoted members")
    if unsigned and base not in INTEGER_TYPES | FLOAT_TYPES | {"decimal", "bit", "year"}:
        raise ValueError(f"MySQL type {name!r} cannot be unsigned")

    if base in ("bit", "year", "float", "double"):
        # TiDB flags BIT and YEAR unsigned; UNSIGNED FLOAT/DOUBLE is deprecated and stores the same type
        unsigned = False
    if base in INTEGER_TYPES:
        arity(0, 1)  # display width: meaningless for values
        return MySQLType(base, unsigned=unsigned)
    if base == "year":
        arity(0, 1)
        return MySQLType("year")
    if base in FLOAT_TYPES:
        arity(0, 1, 2)
        if base == "float" and len(params) == 1 and params[0] > 24:
            base = "double"  # FLOAT(p): p is binary precision; 25..53 means DOUBLE
        return MySQLType(base, unsigned=unsigned)
    if base == "decimal":
        arity(0, 1, 2)
        if not params:
            return MySQLType("decimal", unsigned=unsigned, length=10, scale=0) if sql_defaults else MySQLType(
                "decimal", unsigned=unsigned
            )
        precision, scale = params[0], params[1] if len(params) == 2 else 0
        if precision < 1 or scale > precision:
            raise ValueError(f"invalid decimal precision/scale {params} in {name!r}")
        return MySQLType("decimal", unsigned=unsigned, length=precision, scale=scale)
    if base in TEMPORAL_FSP_TYPES:
        arity(0, 1)
        fsp = params[0] if params else 0
        if fsp > 6:
            raise ValueError(f"fractional seconds precision {fsp} > 6 in {name!r}")
        return MySQLType(base, fsp=fsp or None)
    if base in CHAR_TYPES | BINARY_CHAR_TYPES:
        arity(0, 1)
        length = params[0] if params else (1 if sql_defaults and base in ("char", "binary") else None)
        return MySQLType(base, length=length)
    if base in TEXT_TYPES | BLOB_TYPES:
        arity(0, 1)  # TEXT(M)/BLOB(M): only picks the storage size
        return MySQLType(base)
    if base == "bit":
        arity(0, 1)
        width = params[0] if params else (1 if sql_defaults else None)
        if width is not None and not 1 <= width <= 64:
            raise ValueError(f"invalid bit width {width} in {name!r}")
        return MySQLType("bit", length=width)
    if base == "vector":
        arity(0, 1)
        return MySQLType("vector", length=params[0] if params else None)
    if base in ENUM_SET_TYPES:
        arity(0)
        return MySQLType(base, elements=tuple(elements))
    arity(0)  # date, json
    return MySQLType(base)


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
      | (?P<num>\d+)
      | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
      | (?P<punct>[(),<>])
    )""",
    re.VERBOSE | re.DOTALL,
)

_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def _unquote(token: str) -> str:
    """MySQL string literal semantics: doubled quote, backslash escapes (``\\%``/``\\_`` keep the backslash)."""
    quote, body = token[0], token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read MySQL type {text!r} at position {pos}")
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


def parse_type(descriptor: str, *, sql_defaults: bool = False) -> MySQLType:
    """Read a type descriptor or full MySQL column type SQL (case-insensitive keywords) into a normalized type.

    Accepts everything decoders produce (``"bigint unsigned"``, bare ``"decimal"``, ``"enum('a','b')"``,
    ``"TiDBVECTORFloat32"``) and column type SQL (``"int(11) unsigned zerofill"``, ``"decimal(65,30)"``,
    ``"enum('a','it''s')"``, ``"timestamp(3)"``, ``"varchar(10) character set utf8mb4 collate utf8mb4_bin"``,
    ``"vector<float32>(3)"``). Raises ``ValueError`` with the reason when it is not a MySQL type.
    """
    tokens = _tokenize(descriptor)
    if not tokens or tokens[0][0] != "word":
        raise ValueError(f"not a MySQL type: {descriptor!r}")
    # the longest run of leading words that names a type
    i = 0
    while i < len(tokens) and i < _MAX_NAME_WORDS and tokens[i][0] == "word":
        i += 1
    name_words = [w.lower() for _, w in tokens[:i]]
    for n in range(len(name_words), 0, -1):
        candidate = " ".join(name_words[:n])
        if candidate in _ALIASES or candidate in BASE_TYPES:
            break
    else:
        raise ValueError(f"unknown MySQL type {descriptor!r}")
    name, pos = candidate, n

    if name in ("vector", "tidbvectorfloat32") and pos < len(tokens) and tokens[pos] == ("punct", "<"):
        # TiDB's VECTOR<FLOAT32>(n): the element type is always float32
        if pos + 2 >= len(tokens) or tokens[pos + 1][0] != "word" or tokens[pos + 2] != ("punct", ">"):
            raise ValueError(f"cannot read MySQL type {descriptor!r}")
        if tokens[pos + 1][1].lower() not in ("float", "float32"):
            raise ValueError(f"unsupported vector element type in {descriptor!r}")
        pos += 3

    params: list[int] = []
    elements: list[str] = []
    if pos < len(tokens) and tokens[pos] == ("punct", "("):
        pos += 1
        expect_value = True
        while True:
            if pos >= len(tokens):
                raise ValueError(f"unclosed parenthesis in MySQL type {descriptor!r}")
            kind, value = tokens[pos]
            pos += 1
            if expect_value and kind == "num":
                params.append(int(value))
            elif expect_value and kind == "str":
                elements.append(_unquote(value))
            elif not expect_value and (kind, value) == ("punct", ","):
                pass
            elif not expect_value and (kind, value) == ("punct", ")"):
                break
            elif expect_value and (kind, value) == ("punct", ")") and not params and not elements:
                break  # "enum()" / "int()" style: nothing inside
            else:
                raise ValueError(f"unexpected {value!r} in MySQL type {descriptor!r}")
            expect_value = not expect_value
        if params and elements:
            raise ValueError(f"mixed numbers and strings in MySQL type {descriptor!r}")

    unsigned = False
    charset: Optional[str] = None
    while pos < len(tokens):
        kind, value = tokens[pos]
        word = value.lower() if kind == "word" else None
        pos += 1
        if word in ("unsigned", "zerofill"):
            unsigned = True
        elif word in ("signed", "binary", "ascii", "unicode", "byte"):
            pass  # SIGNED is the default; BINARY/ASCII/UNICODE pick a collation or charset, not a value type
        elif word in ("charset", "character", "char", "collate"):
            if word in ("character", "char"):
                if pos < len(tokens) and tokens[pos][0] == "word" and tokens[pos][1].lower() == "set":
                    pos += 1
                else:
                    raise ValueError(f"unexpected {value!r} in MySQL type {descriptor!r}")
            if pos >= len(tokens) or tokens[pos][0] not in ("word", "str"):
                raise ValueError(f"missing name after {value!r} in MySQL type {descriptor!r}")
            arg = tokens[pos][1] if tokens[pos][0] == "word" else _unquote(tokens[pos][1])
            pos += 1
            if word != "collate":
                charset = arg
        else:
            raise ValueError(f"unexpected {value!r} in MySQL type {descriptor!r}")

    return make_type(
        name, unsigned=unsigned, params=params, elements=elements, charset=charset, sql_defaults=sql_defaults
    )


def normalize(descriptor: str, *, sql_defaults: bool = False) -> str:
    """The normalized descriptor text of any accepted form: ``"INT(11) UNSIGNED ZEROFILL"`` -> ``"int unsigned"``."""
    return parse_type(descriptor, sql_defaults=sql_defaults).descriptor()


# ---------------------------------------------------------------------------------------------------------------
# Iceberg mapping
# ---------------------------------------------------------------------------------------------------------------


def iceberg_type(t: MySQLType) -> str:
    """The Iceberg column type, as Spark SQL type text, that holds every value of ``t`` exactly where possible.

    Integers widen where the unsigned range needs it (INT UNSIGNED -> bigint, BIGINT UNSIGNED -> decimal(20,0));
    DECIMAL above Iceberg's 38 digits is narrowed (see :func:`narrowing`); TIME (may exceed 24h, be negative) and
    VECTOR become strings; BIT of any width (and a bare ``bit``: width unknown) is :data:`BIT_ICEBERG`; a bare
    ``decimal`` takes :data:`BARE_DECIMAL_ICEBERG`.
    """
    base = t.base
    if base in ("tinyint", "smallint", "mediumint", "year"):
        return "int"
    if base == "int":
        return "bigint" if t.unsigned else "int"
    if base == "bigint":
        return "decimal(20,0)" if t.unsigned else "bigint"
    if base == "float":
        return "float"
    if base == "double":
        return "double"
    if base == "decimal":
        if t.length is None:
            return BARE_DECIMAL_ICEBERG
        precision, scale = t.length, t.scale or 0
        if precision > MAX_ICEBERG_PRECISION:
            return f"decimal({MAX_ICEBERG_PRECISION},{min(scale, MAX_ICEBERG_PRECISION)})"
        return f"decimal({precision},{scale})"
    if base == "date":
        return "date"
    if base in ("datetime", "timestamp"):
        return "timestamp_ntz"
    if base == "bit":
        return BIT_ICEBERG
    if base in BINARY_TYPES:
        return "binary"
    if base in CHAR_TYPES | TEXT_TYPES | ENUM_SET_TYPES | {"time", "json", "vector"}:
        return "string"
    raise ValueError(f"no Iceberg mapping for MySQL type {t.descriptor()!r}")


def narrowing(t: MySQLType) -> Optional[str]:
    """Why the Iceberg type of ``t`` cannot hold every MySQL value, or None when it can.

    The merge engine records this (table property / log) when it creates or changes a column.
    """
    if t.base != "decimal":
        return None
    if t.length is None:
        return (
            f"precision of {t.descriptor()!r} is unknown; mapped to {BARE_DECIMAL_ICEBERG}, "
            "values with more digits cannot be stored"
        )
    if t.length > MAX_ICEBERG_PRECISION:
        target = iceberg_type(t)
        integer_digits = MAX_ICEBERG_PRECISION - min(t.scale or 0, MAX_ICEBERG_PRECISION)
        return (
            f"{t.descriptor()!r} exceeds Iceberg's {MAX_ICEBERG_PRECISION} digits; narrowed to {target}, "
            f"values with more than {integer_digits} integer digits cannot be stored"
        )
    return None


_DECIMAL_TEXT = re.compile(r"decimal\((\d+),(\d+)\)")

_PYICEBERG_SIMPLE: dict[str, ice.PrimitiveType] = {
    "int": ice.IntegerType(),
    "bigint": ice.LongType(),
    "float": ice.FloatType(),
    "double": ice.DoubleType(),
    "date": ice.DateType(),
    "timestamp_ntz": ice.TimestampType(),
    "string": ice.StringType(),
    "binary": ice.BinaryType(),
}


def pyiceberg_type_of(spark_type: str) -> ice.PrimitiveType:
    """The pyiceberg type for one of the Spark type texts :func:`iceberg_type` returns."""
    m = _DECIMAL_TEXT.fullmatch(spark_type)
    if m:
        return ice.DecimalType(int(m.group(1)), int(m.group(2)))
    try:
        return _PYICEBERG_SIMPLE[spark_type]
    except KeyError:
        raise ValueError(f"not an Iceberg type produced by iceberg_type: {spark_type!r}") from None


def pyiceberg_type(t: MySQLType) -> ice.PrimitiveType:
    """:func:`iceberg_type` as a ``pyiceberg.types`` object, so schema changes can go through pyiceberg too."""
    return pyiceberg_type_of(iceberg_type(t))


Widening = Literal["same", "widen", "unsupported"]


def widening(old: MySQLType, new: MySQLType) -> Widening:
    """What changing a column from ``old`` to ``new`` means for its Iceberg column.

    ``"same"``: the Iceberg type does not change (string lengths, enum members, tinyint -> int, ...), only the
    doc does. ``"widen"``: a promotion Iceberg allows in place (int -> bigint, float -> double, decimal precision
    up with the same scale). ``"unsupported"``: anything else (narrowing, signedness past the Iceberg type,
    int -> string, ...), which the merge engine must not apply in place.
    """
    before, after = iceberg_type(old), iceberg_type(new)
    if before == after:
        return "same"
    if (before, after) in (("int", "bigint"), ("float", "double")):
        return "widen"
    m_before, m_after = _DECIMAL_TEXT.fullmatch(before), _DECIMAL_TEXT.fullmatch(after)
    if m_before and m_after:
        p1, s1 = int(m_before.group(1)), int(m_before.group(2))
        p2, s2 = int(m_after.group(1)), int(m_after.group(2))
        if s1 == s2 and p2 > p1:
            return "widen"
    return "unsupported"


_INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}


def holds_every_value(old: MySQLType, new: MySQLType) -> bool:
    """Whether every value a column of type ``old`` holds is a value of ``new`` that the lake stores the same
    way: integers into a range that contains theirs, decimals to a higher precision at the same scale, text to
    longer text. Rows written before such a MODIFY COLUMN may then be typed by the new type (no DDL barrier). ENUM and
    SET are never: their members may be reordered, which changes what an index means. FLOAT to DOUBLE neither:
    a float's text read as a double is not the float widened."""
    if widening(old, new) == "unsupported":
        return False
    if old.base in INTEGER_TYPES and new.base in INTEGER_TYPES:
        old_bits, new_bits = _INTEGER_BITS[old.base], _INTEGER_BITS[new.base]
        if old.unsigned == new.unsigned:
            return new_bits >= old_bits
        return old.unsigned and new_bits > old_bits  # signed -> unsigned drops the negatives
    if old.base == "decimal" and new.base == "decimal":
        return (old.scale is not None and old.scale == new.scale and old.length is not None
                and new.length is not None and new.length >= old.length and (old.unsigned or not new.unsigned))
    if old.base in CHAR_TYPES | TEXT_TYPES and new.base in TEXT_TYPES:
        return True
    if old.base in CHAR_TYPES and new.base in CHAR_TYPES:
        return old.length is not None and new.length is not None and new.length >= old.length
    return False


# ---------------------------------------------------------------------------------------------------------------
# Column doc round trip
# ---------------------------------------------------------------------------------------------------------------


def column_doc(t: MySQLType, comment: Optional[str] = None) -> str:
    """The Iceberg column doc recording the MySQL type: ``"mysql:<descriptor>"``, then the column comment.

    The Iceberg type alone loses what the merge engine needs later (enum members to turn indexes into names,
    unsignedness, the exact decimal). The descriptor never contains a line break (members are escaped), so the
    comment, if any, follows after the first newline.
    """
    doc = DOC_PREFIX + t.descriptor()
    return doc if comment is None else f"{doc}\n{comment}"


def _split_doc(doc: str) -> tuple[str, Optional[str]]:
    if not doc.startswith(DOC_PREFIX):
        raise ValueError(f"column doc does not record a MySQL type: {doc[:60]!r}")
    head, sep, comment = doc[len(DOC_PREFIX) :].partition("\n")
    return head, (comment if sep else None)


def type_from_doc(doc: str) -> MySQLType:
    """The MySQLType recorded by :func:`column_doc` (exact round trip). Raises ``ValueError`` for other docs."""
    return parse_type(_split_doc(doc)[0])


def comment_from_doc(doc: str) -> Optional[str]:
    """The column comment recorded by :func:`column_doc`, None when there was none."""
    return _split_doc(doc)[1]
