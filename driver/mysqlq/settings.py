"""A subscriber's settings: the arguments of :class:`mysqlq.Subscriber` (and of
:class:`mysqlq.aio.Subscriber`, which takes the same), checked and completed in one place.

:class:`SubscriberSettings` is the one list of those arguments, with their defaults; building it
checks them all, before anything touches the database, and fills in what was left to the
subscriber: the handler (one function, or a router over ``handlers=``), the ack policy from its
name, the retry strategy (``retry``, or the exponential one ``retry_backoff`` and ``max_backoff``
describe), the DSN (``MYSQLQ_DSN`` when none is given), a name, and ``max_buffered``.
``max_attempts`` None becomes the group's own once the subscriber has joined it.

Times are seconds here, as everywhere in the Python API; :func:`ms` turns them into the
milliseconds the procedures take.
"""

from __future__ import annotations

import inspect
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from mysqlq import maintenance
from mysqlq.connection import resolve_dsn
from mysqlq.errors import InvalidArgument
from mysqlq.policy import AckPolicy, as_policy, strategy
from mysqlq.retry import RetryStrategy
from mysqlq.routing import handler_for

__all__ = ["SettingsAttributes", "SubscriberSettings", "ms", "positive"]

Handler = Callable[[Any], Any]

MAX_BUFFERED = 100_000
# queue_fetch_wait's p_probe_ms: 1 to 1000 ms
MIN_PROBE, MAX_PROBE = 0.001, 1.0


def ms(seconds: float) -> int:
    """Seconds (the Python API's unit) as the milliseconds the procedures take."""
    return round(seconds * 1000)


def positive(name: str, value: float, *, integer: bool = False, low: float = 0.0) -> None:
    """Refuse ``value`` unless it is a number above ``low`` (an int when ``integer``)."""
    if integer and (not isinstance(value, int) or isinstance(value, bool)):
        raise InvalidArgument(f"{name} must be an integer, not {value!r}")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > low:
        raise InvalidArgument(f"{name} must be a number above {low:g}, not {value!r}")


@dataclass
class SubscriberSettings:
    """The arguments of a subscriber, checked (:class:`mysqlq.InvalidArgument` names the bad one)
    and completed (see the module documentation). After construction ``handler``, ``ack_policy``,
    ``retry``, ``dsn``, ``name`` and ``max_buffered`` hold what the subscriber uses."""

    dsn: str | None = field(default=None, repr=False)  # it may hold a password
    _: KW_ONLY
    topic: str
    group: str
    handler: Handler | None = None
    handlers: Mapping[str, Handler] | None = None
    # instead of handler/handlers: called with lists of messages (mysqlq.batching)
    batch_handler: Handler | None = None
    batch_max: int = 100
    batch_wait: float = 0.05
    name: str | None = None
    batch_size: int = 10
    visibility_timeout: float = 60.0
    max_attempts: int | None = None
    lease_duration: float = 30.0
    rebalance_interval: float = 1.0
    max_buffered: int | None = None
    poll_interval: float = 0.1
    # inside a long poll, the pause between two looks at the held partitions (1 ms to 1 s):
    # shorter fetches a commit sooner and costs the server more while nothing comes
    probe_interval: float = 0.01
    concurrency: int = 4
    retry_backoff: float = 1.0
    max_backoff: float = 300.0
    ack_policy: AckPolicy | str = AckPolicy.NACK_ON_ERROR
    retry: RetryStrategy | None = None
    dlq_topic: str | None = None
    max_handler_time: float = 600.0
    maintenance_interval: float | None = 10.0
    metrics: Any = None
    check_version: bool = True

    def __post_init__(self) -> None:
        self.handler = handler_for(self.handler, self.handlers, self.batch_handler)
        positive("batch_max", self.batch_max, integer=True)
        positive("batch_wait", self.batch_wait, low=-1e-12)
        if self.batch_handler is None and (self.batch_max, self.batch_wait) != (100, 0.05):
            raise InvalidArgument("batch_max and batch_wait apply only to a batch_handler")
        positive("batch_size", self.batch_size, integer=True)
        positive("concurrency", self.concurrency, integer=True)
        if self.max_attempts is not None:  # None: the group's own
            positive("max_attempts", self.max_attempts, integer=True)
        positive("visibility_timeout", self.visibility_timeout)
        positive("lease_duration", self.lease_duration)
        positive("rebalance_interval", self.rebalance_interval)
        if self.max_buffered is not None:
            positive("max_buffered", self.max_buffered, integer=True)
            if self.max_buffered > MAX_BUFFERED:
                raise InvalidArgument(
                    f"max_buffered must be at most {MAX_BUFFERED}, not {self.max_buffered}"
                )
        positive("poll_interval", self.poll_interval)
        positive("probe_interval", self.probe_interval)
        if not MIN_PROBE <= self.probe_interval <= MAX_PROBE:
            raise InvalidArgument(
                f"probe_interval must be between {MIN_PROBE:g} and {MAX_PROBE:g} s,"
                f" not {self.probe_interval!r}"
            )
        positive("retry_backoff", self.retry_backoff, low=-1e-12)
        positive("max_backoff", self.max_backoff, low=-1e-12)
        # a running handler keeps its message invisible up to this long, then is given up
        positive("max_handler_time", self.max_handler_time)
        self.ack_policy = as_policy(self.ack_policy)
        self.retry = strategy(self.retry, self.retry_backoff, self.max_backoff)
        maintenance.check_interval(self.maintenance_interval)
        self.dsn = resolve_dsn(self.dsn)
        self.name = self.name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        # fetched messages waiting for a handler: more means fewer, larger fetches and acks; each
        # must start before its visibility deadline (max_buffered x handler time / concurrency)
        # (a batch handler's batches fill from the buffer: room for two full ones at least)
        batches = 2 * self.batch_max if self.batch_handler is not None else 0
        self.max_buffered = self.max_buffered or min(
            max(self.concurrency * self.batch_size * 8, batches), MAX_BUFFERED
        )


def _setting(name: str) -> Any:
    def get(self: SettingsAttributes) -> Any:
        return getattr(self.settings, name)

    def put(self: SettingsAttributes, value: Any) -> None:
        setattr(self.settings, name, value)

    return property(get, put, doc=f"``{name}``, as its settings hold it")


class SettingsAttributes:
    """A subscriber's arguments as its attributes (``sub.name``, ``sub.batch_size``, ...), read
    from (and written to) its :class:`SubscriberSettings`; its signature is theirs."""

    __signature__ = inspect.signature(SubscriberSettings)

    settings: SubscriberSettings

    dsn = _setting("dsn")
    topic = _setting("topic")
    group = _setting("group")
    handler = _setting("handler")
    batch_handler = _setting("batch_handler")
    batch_max = _setting("batch_max")
    batch_wait = _setting("batch_wait")
    name = _setting("name")
    batch_size = _setting("batch_size")
    visibility_timeout = _setting("visibility_timeout")
    max_attempts = _setting("max_attempts")
    lease_duration = _setting("lease_duration")
    rebalance_interval = _setting("rebalance_interval")
    max_buffered = _setting("max_buffered")
    poll_interval = _setting("poll_interval")
    probe_interval = _setting("probe_interval")
    concurrency = _setting("concurrency")
    ack_policy = _setting("ack_policy")
    retry = _setting("retry")
    dlq_topic = _setting("dlq_topic")
    max_handler_time = _setting("max_handler_time")
    maintenance_interval = _setting("maintenance_interval")
