"""One retry policy for transient errors, used by the client, the subscriber's loops and Spark.

A transient error is one after which the same call may succeed: a lost connection
(:class:`~mysqlq.errors.ConnectionLost`), a deadlock, a lock wait timeout (every
:class:`~mysqlq.errors.TransientError`). Only calls the server can repeat safely are retried: a
publish with an id (G1), a procedure that runs its own transaction, a read. Waits grow
exponentially with jitter, from 50 ms up to 2 s.

>>> for attempt in retrying(attempts=6):                    # doctest: +SKIP
...     with attempt:
...         rows = execute_rows(conn, sql, args)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_exponential_jitter,
)

from mysqlq.errors import TransientError

__all__ = ["ATTEMPTS", "retrying", "transient"]

ATTEMPTS = 6
INITIAL_WAIT = 0.05
MAX_WAIT = 2.0


def retrying(
    attempts: int | None = ATTEMPTS,
    *,
    before_sleep: Callable[[RetryCallState], Any] | None = None,
    give_up: Callable[[], bool] | None = None,
) -> Retrying:
    """A tenacity ``Retrying`` for transient errors: ``attempts`` tries (None: until it succeeds
    or ``give_up()`` says stop), then the last error is raised as it was."""
    stop = stop_never if attempts is None else stop_after_attempt(attempts)
    if give_up is not None:
        stop = stop | (lambda _state: give_up())
    return Retrying(
        retry=retry_if_exception_type(TransientError),
        wait=wait_exponential_jitter(multiplier=INITIAL_WAIT, max=MAX_WAIT, jitter=INITIAL_WAIT),
        stop=stop,
        before_sleep=before_sleep,
        reraise=True,
    )


def transient(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: call ``func`` under :func:`retrying` with the default attempts."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return retrying()(func, *args, **kwargs)

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    wrapper.__wrapped__ = func  # type: ignore[attr-defined]
    return wrapper
