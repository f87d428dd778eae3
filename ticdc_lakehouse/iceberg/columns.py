"""The columns of a target Iceberg table as the merge writes them.

Its own module because the table code (``iceberg/tables.py``, which reads them from the catalog) and the change-set
transforms (``merge/changes.py``, ``merge/value_checks.py``, which type values by them) both speak of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ticdc_lakehouse.core.mysql_types import parse_type


@dataclass(frozen=True)
class TargetColumn:
    """A column of the target Iceberg table: its name, Spark type and the MySQL type descriptor (field doc);
    ``required``: the Iceberg field is required (a key), so a NULL is an invalid value, never written.

    ``name_from``: set on a slot of a frame of tables of different columns (``merge.column_slots``): the frame's
    column holding, for each event, its table's name for the slot (NULL: the table has no column there). ``name``
    is then the slot's own name in the frame, and values are read by the name in ``name_from``."""

    name: str
    spark_type: str
    mysql_type: Optional[str]
    required: bool = False
    name_from: Optional[str] = None


def mysql_base(descriptor: Optional[str]) -> tuple[str, tuple[str, ...]]:
    """The MySQL base type of a column's descriptor and its ENUM/SET members (``("", ())`` without one)."""
    if not descriptor:
        return "", ()
    parsed = parse_type(descriptor)
    return parsed.base, tuple(parsed.elements or ())
