"""One Airflow pool per changefeed, one slot: merges (and maintenance) of a changefeed queue instead of colliding.

The merge itself takes the changefeed's lock (``ticdc_lakehouse.runtime.locks``), which is the real guarantee -- it also
covers the CLI and other Airflow deployments. The pool makes Airflow aware of it: a second merge waits in the
queue rather than starting, failing with ``LockBusy`` and spending a retry.

Pools must exist before the scheduler will queue a task that uses them::

    python -m lakehouse_airflow.pools pools.json && airflow pools import pools.json

(or set ``[airflow] merge_pools = false`` to run without them: the lock alone then guards the merges).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional, Sequence

POOL_PREFIX = "lakehouse_merge_"


def merge_pool(changefeed: str) -> str:
    return f"{POOL_PREFIX}{changefeed}"


def dag_changefeeds(settings) -> list[str]:
    """The changefeeds that get a DAG: the configured ones, else ``default``."""
    return list(settings.changefeeds) or [settings.changefeed().name]


def pools_enabled(settings) -> bool:
    return settings.airflow.merge_pools


def pool_definitions(settings) -> dict[str, dict[str, Any]]:
    """``airflow pools import`` JSON: one single-slot pool per changefeed."""
    return {
        merge_pool(name): {
            "slots": 1,
            "description": f"ticdc-lakehouse: one merge or maintenance of changefeed {name} at a time",
            "include_deferred": False,
        }
        for name in dag_changefeeds(settings)
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ticdc_lakehouse.runtime.config import load_settings

    args = list(sys.argv[1:] if argv is None else argv)
    text = json.dumps(pool_definitions(load_settings()), indent=2)
    if args:
        with open(args[0], "w") as handle:
            handle.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
