"""``LakehouseTrigger``: the wait loop the lakehouse triggers share, run in Airflow's triggerer (no worker slot).

Why: a sensor that waits for "``shop.orders`` is consistent up to the end of this interval" or "the landing caught
up with Kafka" can wait for hours; poking holds a worker slot, rescheduling re-runs a task each time. A deferred
sensor hands the wait to a trigger, whose checks are cheap (pyiceberg metadata reads, Kafka offset requests) and
run in a thread, off the triggerer's event loop.

Each trigger fires one event: ``{"status": "done", ...}`` when the condition holds, ``{"status": "error",
"message": ...}`` when the check itself fails (the sensor then fails with that message).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Optional

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: seconds between two checks
DEFAULT_POLL_SECONDS = 30.0


class LakehouseTrigger(BaseTrigger):
    """Checks ``check()`` every ``poll_interval`` seconds until ``done(state)``; subclasses say what and when.

    :param lakehouse_conn_id: the Airflow connection with the catalog settings (see ``LakehouseHook``)
    :param config_file: a lakehouse config file (default: ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.toml``)
    :param poll_interval: seconds between two checks
    """

    def __init__(self, lakehouse_conn_id: str = "lakehouse_default", config_file: Optional[str] = None,
                 poll_interval: float = DEFAULT_POLL_SECONDS) -> None:
        super().__init__()
        self.lakehouse_conn_id = lakehouse_conn_id
        self.config_file = config_file
        self.poll_interval = float(poll_interval)

    def hook(self):
        from lakehouse_airflow.hooks.lakehouse import LakehouseHook

        return LakehouseHook(self.lakehouse_conn_id, self.config_file)

    def common_kwargs(self) -> dict[str, Any]:
        """The base's constructor arguments, for ``serialize``."""
        return {"lakehouse_conn_id": self.lakehouse_conn_id, "config_file": self.config_file,
                "poll_interval": self.poll_interval}

    def check(self) -> dict[str, Any]:
        """The current state (runs in a thread)."""
        raise NotImplementedError

    def done(self, state: dict[str, Any]) -> bool:
        raise NotImplementedError

    def failure(self, exc: Exception) -> dict[str, Any]:
        """The error event's payload when ``check`` raised."""
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                state = await asyncio.to_thread(self.check)
            except Exception as exc:  # noqa: BLE001 - reported to the sensor, which fails with it
                yield TriggerEvent({"status": "error", **self.failure(exc)})
                return
            if self.done(state):
                yield TriggerEvent({"status": "done", **state})
                return
            self.log.info("not yet: %s", state)
            await asyncio.sleep(self.poll_interval)
