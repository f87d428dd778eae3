"""Names of the columns the merge's frames carry beside a table's own, shared by the driver's plans and the
task-side writers.

Why a module of its own: a write task's Python worker imports the writer's module (``batch_write``) and what it
imports. Taken from the planning modules (``changes``, ``batch_rewrite``), these names brought their type library
with them (``iceberg.columns`` -> ``core.mysql_types`` -> pyiceberg, pydantic): 0.18 s of imports in each worker,
at the start of a run's write jobs.
"""

from __future__ import annotations

#: a change's operation in a change set (``changes.merge_source``): I, U or D
OP = "_op"
#: prefix of the per-column "value was sent" flags (``changes.partial_positions``)
PRESENT = "_present_"
#: 1 on a row a change wrote (an insert or update), else 0: the writer counts it as the table's rows written
WRITTEN = "_lakehouse_written"
#: 1 on a table row a change replaced or deleted, else 0: the writer counts it as the table's rows removed
REMOVED = "_lakehouse_removed"
#: true on a row a delete removed: counted, never written
DROPPED = "_lakehouse_dropped"
#: Iceberg's row-lineage fields (format v3) and their reserved field ids (``MetadataColumns``)
ROW_ID = "_row_id"
LAST_UPDATED = "_last_updated_sequence_number"
LINEAGE_FIELD_IDS = {ROW_ID: 2147483540, LAST_UPDATED: 2147483539}
