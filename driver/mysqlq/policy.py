"""Ack policies: what a subscriber does with a message when its handler returns, raises, or is
given up at ``max_handler_time``. The names are FastStream's.

======================  =================================  ======================================
policy                  handler returned                   handler raised (or was given up)
======================  =================================  ======================================
``NACK_ON_ERROR``       ack                                nack with the retry strategy's delay;
(default)                                                  the DLQ once the strategy gives up or
                                                           ``max_attempts`` is reached
``ACK``                 ack                                ack (the error is logged and counted)
``REJECT_ON_ERROR``     ack                                dead-letter at once, with the error
``ACK_FIRST``           (acked before the handler ran: at most once; a message whose ack was
                        refused as stale does not run)
``MANUAL``              nothing: the handler settles (``msg.ack()``, ``nack()``, ``dead_letter()``,
                        ``transaction()``); what it leaves unsettled comes back after its
                        visibility timeout. A given-up handler's message is nacked.
======================  =================================  ======================================

A handler that settled its message itself (any policy) has the last word.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from mysqlq.errors import InvalidArgument
from mysqlq.retry import Exponential, RetryStrategy

__all__ = ["AckPolicy", "Decision", "after_handler", "as_policy", "strategy"]


class AckPolicy(enum.Enum):
    NACK_ON_ERROR = "nack_on_error"
    ACK = "ack"
    REJECT_ON_ERROR = "reject_on_error"
    ACK_FIRST = "ack_first"
    MANUAL = "manual"


def as_policy(value: AckPolicy | str) -> AckPolicy:
    """An :class:`AckPolicy` from itself or its name (``"ack_first"``, ``"ACK_FIRST"``)."""
    if isinstance(value, AckPolicy):
        return value
    if isinstance(value, str):
        try:
            return AckPolicy(value.lower())
        except ValueError:
            pass
    names = ", ".join(p.name for p in AckPolicy)
    raise InvalidArgument(f"ack_policy must be one of {names}, not {value!r}")


class Decision(NamedTuple):
    """What to send: ``outcome`` None sends nothing; ``delay`` in seconds (a nack's)."""

    outcome: str | None
    delay: float = 0.0


def after_handler(
    policy: AckPolicy, retry: RetryStrategy, attempt: int, failed: bool, given_up: bool = False
) -> Decision:
    """The outcome for a message its handler left unsettled (see the module documentation)."""
    if policy is AckPolicy.ACK_FIRST:
        return Decision(None)
    if policy is AckPolicy.MANUAL:
        if not given_up:
            return Decision(None)
        delay = retry.next_delay(attempt)
        return Decision("nack", 0.0 if delay is None else delay)
    if not failed:
        return Decision("ack")
    if policy is AckPolicy.ACK:
        return Decision("ack")
    if policy is AckPolicy.REJECT_ON_ERROR:
        return Decision("dead_letter")
    delay = retry.next_delay(attempt)
    return Decision("dead_letter") if delay is None else Decision("nack", delay)


def strategy(
    retry: RetryStrategy | None, retry_backoff: float = 1.0, max_backoff: float = 300.0
) -> RetryStrategy:
    """The subscriber's retry strategy: ``retry``, or the exponential one its older arguments
    ``retry_backoff`` and ``max_backoff`` describe (the default: 1 s doubling up to 300 s)."""
    if retry is None:
        return Exponential(retry_backoff, 2.0, max_backoff, jitter=True)
    if not isinstance(retry, RetryStrategy):
        raise InvalidArgument(f"retry must be a mysqlq.retry strategy, not {retry!r}")
    if (retry_backoff, max_backoff) != (1.0, 300.0):
        raise InvalidArgument("give either retry= or retry_backoff/max_backoff, not both")
    return retry
