"""Normalized DDL kinds for the JSON/Avro protocols (Simple, Canal-JSON, Debezium, Confluent Avro).

Those protocols name a DDL coarsely (Simple/Canal ``ALTER``, Debezium ``ALTER``) or by TiDB action code (the
Avro testing-only DDL message), so the precise kind the merge engine needs (``ADD_COLUMN`` vs ``MODIFY_COLUMN``)
comes from the statement text (TiDB action codes are mapped by ``tidb_ddl_actions``). Classification runs once per
DDL, never per row, so a few regexes are fine here.
"""

from __future__ import annotations

import re

CREATE_SCHEMA = "CREATE_SCHEMA"
DROP_SCHEMA = "DROP_SCHEMA"
CREATE_TABLE = "CREATE_TABLE"
DROP_TABLE = "DROP_TABLE"
ADD_COLUMN = "ADD_COLUMN"
DROP_COLUMN = "DROP_COLUMN"
ADD_INDEX = "ADD_INDEX"
DROP_INDEX = "DROP_INDEX"
TRUNCATE_TABLE = "TRUNCATE_TABLE"
MODIFY_COLUMN = "MODIFY_COLUMN"
RENAME_TABLE = "RENAME_TABLE"
RENAME_TABLES = "RENAME_TABLES"
SET_DEFAULT = "SET_DEFAULT"
RENAME_COLUMN = "RENAME_COLUMN"
OTHER = "OTHER"

#: Simple / Canal-JSON DDL type names; ALTER and QUERY need the statement text to be precise
PROTOCOL_TYPE_HINTS: dict[str, str] = {
    "CREATE": CREATE_TABLE,
    "ERASE": DROP_TABLE,
    "TRUNCATE": TRUNCATE_TABLE,
    "RENAME": RENAME_TABLE,
    "CINDEX": ADD_INDEX,
    "DINDEX": DROP_INDEX,
}

_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*\n|#[^\n]*\n", re.S)
_IDENT = r"(?:`(?:[^`]|``)*`|[\w$]+)"
_QUALIFIED = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"
_SCHEMA_STMT = re.compile(
    rf"^(CREATE|DROP)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_IDENT})", re.I
)
_ALTER_TABLE = re.compile(rf"^ALTER\s+(?:ONLINE\s+|OFFLINE\s+|IGNORE\s+)*TABLE\s+{_QUALIFIED}\s*(.*)$", re.I | re.S)


def unquote_identifier(text: str) -> str:
    """```a``b``` -> ``a`b``; bare identifiers are returned unchanged."""
    if len(text) >= 2 and text[0] == "`" and text[-1] == "`":
        return text[1:-1].replace("``", "`")
    return text


def schema_of_schema_ddl(query: str) -> str | None:
    """The database a ``CREATE/DROP DATABASE`` statement names (protocols may not send it separately)."""
    match = _SCHEMA_STMT.match(_strip(query))
    return unquote_identifier(match.group(2)) if match else None


def classify_query(query: str, hint: str | None = None) -> str:
    """The normalized kind of one DDL statement; ``hint`` (a protocol type name) is used when the text is vague."""
    text = _strip(query)
    upper = text.upper()
    words = upper.split(None, 4)
    kind = OTHER
    if len(words) >= 2:
        first, second = words[0], words[1]
        if first == "CREATE" and second in ("DATABASE", "SCHEMA"):
            kind = CREATE_SCHEMA
        elif first == "DROP" and second in ("DATABASE", "SCHEMA"):
            kind = DROP_SCHEMA
        elif first == "CREATE" and (second == "TABLE" or (second == "TEMPORARY" and words[2:3] == ["TABLE"])):
            kind = CREATE_TABLE
        elif first == "DROP" and (second == "TABLE" or (second == "TEMPORARY" and words[2:3] == ["TABLE"])):
            kind = DROP_TABLE
        elif first == "TRUNCATE":
            kind = TRUNCATE_TABLE
        elif first == "RENAME" and second == "TABLE":
            kind = RENAME_TABLES if len(_split_top_level(text)) > 1 else RENAME_TABLE
        elif first == "CREATE" and "INDEX" in words[1:4] and "TABLE" not in words[1:4]:
            kind = ADD_INDEX
        elif first == "DROP" and second == "INDEX":
            kind = DROP_INDEX
        elif first == "ALTER" and "TABLE" in words[1:4]:
            kind = _classify_alter(text)
    if kind == OTHER and hint:
        kind = PROTOCOL_TYPE_HINTS.get(hint.upper(), OTHER)
    return kind


def _strip(query: str) -> str:
    text = _COMMENT.sub(" ", query + "\n").strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def _classify_alter(text: str) -> str:
    match = _ALTER_TABLE.match(text)
    if not match:
        return OTHER
    kinds = {_classify_alter_spec(spec) for spec in _split_top_level(match.group(1)) if spec.strip()}
    return kinds.pop() if len(kinds) == 1 else OTHER


def _classify_alter_spec(spec: str) -> str:
    words = spec.strip().upper().split()
    if not words:
        return OTHER
    verb, rest = words[0], words[1:]
    target = rest[0] if rest else ""
    if verb == "ADD":
        if target in ("INDEX", "KEY", "UNIQUE", "PRIMARY", "FULLTEXT", "SPATIAL", "CONSTRAINT"):
            return OTHER if "FOREIGN" in rest or "CHECK" in rest else ADD_INDEX
        if target in ("PARTITION", "FOREIGN", "CHECK"):
            return OTHER
        return ADD_COLUMN
    if verb == "DROP":
        if target in ("INDEX", "KEY", "PRIMARY"):
            return DROP_INDEX
        if target in ("PARTITION", "FOREIGN", "CHECK", "CONSTRAINT"):
            return OTHER
        return DROP_COLUMN
    if verb == "MODIFY":
        return MODIFY_COLUMN
    if verb == "CHANGE":
        names = spec.strip().split()[1:]
        if names and names[0].upper() == "COLUMN":
            names = names[1:]
        if len(names) >= 2 and unquote_identifier(names[0]).lower() != unquote_identifier(names[1]).lower():
            return RENAME_COLUMN
        return MODIFY_COLUMN
    if verb == "RENAME":
        if target == "COLUMN":
            return RENAME_COLUMN
        if target in ("INDEX", "KEY"):
            return OTHER
        return RENAME_TABLE
    if verb == "ALTER":
        if target == "INDEX" or "CHECK" in rest or "CONSTRAINT" in rest:
            return OTHER
        if "DEFAULT" in rest:
            return SET_DEFAULT
    return OTHER


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses and quotes (``ADD COLUMN (a int, b int)`` is one spec)."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts
