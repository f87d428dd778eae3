"""TiDB DDL action codes (``timodel.ActionType``) to our normalized DDL type names, and back.

Open Protocol and Craft send a DDL as (action code, query). The merge job only needs to know what kind of
statement it is; the code is TiDB's, so several codes share one name (ADD PRIMARY KEY is an index, the
deprecated multi-column ADD COLUMNS is still ADD_COLUMN) and everything without a table-shape effect we act on is
OTHER. TiDB has no action of its own for RENAME COLUMN: it is a MODIFY COLUMN whose query says so.
"""

from __future__ import annotations

import re

OTHER = "OTHER"

#: action code -> normalized name (codes from TiDB pkg/meta/model ActionType)
ACTION_TO_DDL_TYPE: dict[int, str] = {
    1: "CREATE_SCHEMA",
    2: "DROP_SCHEMA",
    3: "CREATE_TABLE",
    4: "DROP_TABLE",
    5: "ADD_COLUMN",
    6: "DROP_COLUMN",
    7: "ADD_INDEX",
    8: "DROP_INDEX",
    11: "TRUNCATE_TABLE",
    12: "MODIFY_COLUMN",
    14: "RENAME_TABLE",
    15: "SET_DEFAULT",
    32: "ADD_INDEX",  # ADD PRIMARY KEY
    33: "DROP_INDEX",  # DROP PRIMARY KEY
    37: "ADD_COLUMN",  # ADD COLUMNS (deprecated, now a multi-schema change)
    38: "DROP_COLUMN",  # DROP COLUMNS (deprecated)
    47: "RENAME_TABLES",
    48: "DROP_INDEX",  # DROP INDEXES (deprecated)
    60: "CREATE_TABLE",  # CREATE TABLES (batch create; TiCDC splits it per table)
}

#: normalized name -> the action code an encoder writes for it
DDL_TYPE_TO_ACTION: dict[str, int] = {
    "CREATE_SCHEMA": 1,
    "DROP_SCHEMA": 2,
    "CREATE_TABLE": 3,
    "DROP_TABLE": 4,
    "ADD_COLUMN": 5,
    "DROP_COLUMN": 6,
    "ADD_INDEX": 7,
    "DROP_INDEX": 8,
    "TRUNCATE_TABLE": 11,
    "MODIFY_COLUMN": 12,
    "RENAME_COLUMN": 12,
    "RENAME_TABLE": 14,
    "SET_DEFAULT": 15,
    "RENAME_TABLES": 47,
    OTHER: 0,  # ActionNone: we do not know which of TiDB's many "other" actions it was
}

_RENAME_COLUMN = re.compile(r"\brename\s+column\b", re.IGNORECASE)


def ddl_type_for_action(action: int, query: str) -> str:
    """Normalized DDL type of a TiDB action code; OTHER for codes the merge job does not act on."""
    name = ACTION_TO_DDL_TYPE.get(action, OTHER)
    if name == "MODIFY_COLUMN" and _RENAME_COLUMN.search(query):
        return "RENAME_COLUMN"
    return name


def action_for_ddl_type(ddl_type: str) -> int:
    """The TiDB action code an encoder sends for a normalized DDL type (0 = ActionNone for OTHER/unknown)."""
    return DDL_TYPE_TO_ACTION.get(ddl_type, 0)
