"""One retry policy for transient errors: what :class:`mysqlq.link.Link` retries, for the client,
the subscriber's loops and Spark alike.

A transient error is one after which the same call may succeed: a lost connection
(:class:`~mysqlq.errors.ConnectionLost`, a read-only server included), a deadlock, a lock wait
timeout, a failed certification (every :class:`~mysqlq.errors.TransientError`). Only calls the
server can repeat safely are retried: a publish with an id (G1), a procedure that runs its own
transaction, a read. Waits grow exponentially with jitter, from 50 ms up to 2 s, for as long as
the retry window: 60 s by default, longer than a Group Replication failover (about 22 s), so a
publisher rides through one. ``MYSQLQ_RETRY_WINDOW`` (seconds) changes the default; the client
and Spark take it as a setting too (``retry_window``).

>>> for attempt in retrying(window=5.0):                    # doctest: +SKIP
...     with attempt:
...         rows = execute_rows(conn, sql, args)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    stop_never,
    wait_exponential_jitter,
)

from mysqlq.errors import InvalidArgument, TransientError

__all__ = [
    "RETRY_WINDOW",
    "WINDOW_ENV",
    "check_window",
    "default_window",
    "retrying",
]

WINDOW_ENV = "MYSQLQ_RETRY_WINDOW"
RETRY_WINDOW = 60.0
INITIAL_WAIT = 0.05
MAX_WAIT = 2.0


def default_window() -> float:
    """The retry window in seconds: ``$MYSQLQ_RETRY_WINDOW`` if set, else 60."""
    text = os.environ.get(WINDOW_ENV)
    if not text:
        return RETRY_WINDOW
    try:
        window = float(text)
    except ValueError:
        raise InvalidArgument(f"{WINDOW_ENV}={text!r}: not a number of seconds") from None
    if not window >= 0:
        raise InvalidArgument(f"{WINDOW_ENV}={text!r}: must be 0 or more seconds")
    return window


def check_window(window: float | None) -> float:
    """``window`` (None: the default), checked: a number of seconds, 0 or more."""
    if window is None:
        return default_window()
    if isinstance(window, bool) or not isinstance(window, (int, float)) or not window >= 0:
        raise InvalidArgument(f"retry_window={window!r}: must be a number of seconds, 0 or more")
    return float(window)


def retrying(
    window: float | None = None,
    *,
    forever: bool = False,
    before_sleep: Callable[[RetryCallState], Any] | None = None,
    give_up: Callable[[], bool] | None = None,
) -> Retrying:
    """A tenacity ``Retrying`` for transient errors: tries until ``window`` seconds have passed
    since the first (None: the default window; ``forever``: until it succeeds or ``give_up()``
    says stop), then the last error is raised as it was."""
    stop = stop_never if forever else stop_after_delay(check_window(window))
    if give_up is not None:
        stop = stop | (lambda _state: give_up())
    return Retrying(
        retry=retry_if_exception_type(TransientError),
        wait=wait_exponential_jitter(multiplier=INITIAL_WAIT, max=MAX_WAIT, jitter=INITIAL_WAIT),
        stop=stop,
        before_sleep=before_sleep,
        reraise=True,
    )
