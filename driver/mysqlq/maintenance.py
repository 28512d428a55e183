"""The subscriber's maintenance loop: GC and heartbeat cleanup without the event scheduler.

Every subscriber ticks ``queue_maintenance_tick`` every ``interval`` seconds; the procedure runs
``queue_maintenance`` for at most one caller per interval (a row lock decides who). So GC and the
cleanup go on wherever consumers run: on MariaDB, whose event scheduler is off by default, and on
a newly promoted primary, where the event comes up disabled (docs/ha.md).
"""

from __future__ import annotations

import logging
import threading

from mysqlq import _sql
from mysqlq.errors import Error, InvalidArgument
from mysqlq.link import Link

__all__ = ["check_interval", "maintenance_loop", "start"]

log = logging.getLogger("mysqlq.maintenance")


def check_interval(interval: float | None) -> None:
    """None (leave maintenance to the event or cron) or at least one second."""
    if interval is None:
        return
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval >= 1:
        raise InvalidArgument(f"maintenance_interval must be None or >= 1 s, not {interval!r}")


def start(dsn: str, runner: str, interval: float, stopping: threading.Event) -> threading.Thread:
    """Start :func:`maintenance_loop` in a daemon thread; returns it."""
    thread = threading.Thread(
        target=maintenance_loop,
        args=(dsn, runner, interval, stopping),
        name="mysqlq-maintenance",
        daemon=True,
    )
    thread.start()
    return thread


def maintenance_loop(dsn: str, runner: str, interval: float, stopping: threading.Event) -> None:
    """Tick maintenance every ``interval`` seconds until ``stopping`` is set."""
    link = Link(dsn, name=f"{runner} maintenance", forever=True, stopping=stopping)
    interval_ms = max(1000, round(interval * 1000))
    try:
        while not stopping.wait(interval):
            try:
                (row,) = link.rows(_sql.MAINTENANCE_TICK, (runner, interval_ms))
                if row["ran"]:
                    log.debug("%s ran maintenance", runner)
            except Error as exc:
                if stopping.is_set():
                    break
                log.warning("%s: maintenance tick failed: %s", runner, exc)
    finally:
        link.close()
