"""Spark SQL spelling of names and text: quoted identifiers and string literals.

A module of its own, importing nothing, because every layer writes SQL (the merge, the state tables, maintenance,
time travel, create-tables) and none of them should import the Iceberg table code to spell a name.
"""

from __future__ import annotations


def quote(name: str) -> str:
    """A Spark SQL identifier for any upstream name: backticks, spaces, unicode and reserved words included."""
    return "`" + name.replace("`", "``") + "`"


def qualified(catalog: str, namespace: str, name: str) -> str:
    return f"{quote(catalog)}.{quote(namespace)}.{quote(name)}"


def sql_string(text: str) -> str:
    """A Spark SQL string literal for any text (quotes and backslashes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
