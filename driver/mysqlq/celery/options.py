"""The transport's settings (Celery's ``broker_transport_options``) and its names.

A Celery queue ``q`` is the mysqlq topic ``<topic_prefix><q>`` consumed by the group of the same
name. Topic and group names are mysqlq identifiers (1 to 191 characters of ``A-Z a-z 0-9 . _ - :
/``): every other character of a queue name (``@`` in ``celery@host.dq2``, a space, non-ASCII) is
written ``:`` and its UTF-8 bytes in hex, and so is ``:`` itself, so two queue names never share a
topic. A name too long for its DLQ topic (``<topic>_dlq``, 191 characters at most) keeps its first
170 characters and a hash of the whole.
"""

from __future__ import annotations

import dataclasses
import hashlib
import string
from collections.abc import Mapping
from typing import Any

__all__ = ["Options", "topic_for"]

# a mysqlq identifier's characters, ':' left out: it is the escape character here
_PLAIN = frozenset(string.ascii_letters + string.digits + "._/-")
_IDENTIFIER = _PLAIN | {":"}
# the DLQ topic <topic>_dlq must be an identifier too (191 characters at most)
MAX_TOPIC = 191 - len("_dlq")
_HASHED_PREFIX = 170
# visibility_timeout's default with renew_visibility off: it must outlast the longest task, as
# Redis's default (one hour) does
UNRENEWED_VISIBILITY_TIMEOUT = 3600.0


def topic_for(prefix: str, queue: str) -> str:
    """The mysqlq topic (and group) of Celery queue ``queue``."""
    if not isinstance(queue, str) or not queue:
        raise ValueError(f"a queue name must be a non-empty string, not {queue!r}")
    escaped = "".join(
        ch if ch in _PLAIN else "".join(f":{b:02x}" for b in ch.encode("utf-8")) for ch in queue
    )
    name = prefix + escaped
    if len(name) > MAX_TOPIC:
        digest = hashlib.sha256(queue.encode("utf-8")).hexdigest()[:16]
        name = f"{name[:_HASHED_PREFIX]}:{digest}"
    return name


def _seconds(
    options: Mapping[str, Any], key: str, default: float, low: float, high: float = 31_536_000
) -> float:
    value = options.get(key)
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"transport option {key}={value!r}: not a number of seconds") from None
    if not low <= seconds <= high:
        raise ValueError(f"transport option {key}={value!r}: must be {low} to {high} seconds")
    return seconds


def _count(
    options: Mapping[str, Any], key: str, default: int | None, high: int, low: int = 1
) -> int | None:
    value = options.get(key)
    if value is None or value == "":
        return default
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"transport option {key}={value!r}: not a whole number") from None
    if not low <= count <= high:
        raise ValueError(f"transport option {key}={value!r}: must be {low} to {high}")
    return count


def _flag(options: Mapping[str, Any], key: str, default: bool) -> bool:
    value = options.get(key, default)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


@dataclasses.dataclass(frozen=True)
class Options:
    """What ``broker_transport_options`` can set (see docs/celery.md for each one)."""

    # how long a message a worker holds stays invisible without a renewal: the time after which
    # a crashed (or frozen) worker's messages are delivered again
    visibility_timeout: float = 60.0
    # renew the visibility of every message the worker holds (running, prefetched, waiting for
    # its ETA) every visibility_timeout / 3 while the worker lives; False: Redis/SQS semantics,
    # a message not acked within visibility_timeout is delivered again even to a live worker
    renew_visibility: bool = True
    # how long a worker's partitions stay its own without a lease tick (after a crash, the others
    # take them over after this)
    lease_duration: float = 30.0
    # how often a worker ticks its leases (at most lease_duration / 3): renews them, takes its
    # share, and picks up partitions created since (a new partition is fetched only after a tick)
    rebalance_interval: float = 1.0
    # how often a worker ticks queue_maintenance_tick (GC, heartbeat cleanup; one worker per
    # interval runs it), as the Python subscriber does; 0: leave it to the event or cron
    maintenance_interval: float = 10.0
    # how long the keeper gathers settles (acks, nacks, releases) before it sends them, so that
    # one call settles many: an ack reaches the database this much later at most
    settle_interval: float = 0.02
    # seconds a consumer of one queue waits inside the server for a message before polling again
    polling_interval: float = 1.0
    # inside that wait, the pause between two looks for a message (queue_fetch_wait's
    # p_probe_ms): shorter answers a publish sooner and costs the server more while idle
    probe_interval: float = 0.01
    # deliveries of one message (crashes, requeues) before it goes to the queue's DLQ topic
    max_attempts: int = 20
    # in-flight window per partition (queue_fetch's p_batch_size): a fetch of max_fetch then
    # touches two partitions, not seven (a fetch's cost grows with the partitions it serves)
    batch_size: int = 64
    # messages one fetch asks for at most (and the window when the channel has no prefetch limit)
    max_fetch: int = 100
    # messages a worker fetches ahead into its buffer beyond Celery's prefetch window (None: one
    # window, and at least 200 held in all, window and buffer, at most 2 x max_fetch ahead; 0:
    # none, the window is all it holds)
    fetch_ahead: int | None = None
    # the least number of partitions a consumer makes sure its queue's topic has (None: leave
    # the topic's setting, 16 for a new topic); unkeyed tasks are spread over them, and at most
    # that many workers share a queue
    partitions: int | None = 64
    # publish tasks that have an ETA (countdown, eta=, retry countdown) as delayed messages, so
    # the database holds them until they are due instead of a worker
    broker_eta: bool = True
    # basic_reject(requeue=False) dead-letters the message (into <topic>_dlq) instead of
    # dropping it
    dead_letter_rejected: bool = False
    topic_prefix: str = "celery."

    @classmethod
    def from_transport_options(cls, options: Mapping[str, Any] | None) -> Options:
        options = dict(options or {})
        renew = _flag(options, "renew_visibility", cls.renew_visibility)
        prefix = str(options.get("topic_prefix", cls.topic_prefix))
        if not set(prefix) <= _IDENTIFIER or len(prefix) > 64:
            raise ValueError(
                f"transport option topic_prefix={prefix!r}: at most 64 characters of "
                "A-Z a-z 0-9 . _ - : /"
            )
        return cls(
            # with renewals the timeout only has to outlast a stall of the worker; without them
            # it must outlast the longest task, as Redis's default does
            visibility_timeout=_seconds(
                options,
                "visibility_timeout",
                cls.visibility_timeout if renew else UNRENEWED_VISIBILITY_TIMEOUT,
                1,
            ),
            renew_visibility=renew,
            lease_duration=_seconds(options, "lease_duration", cls.lease_duration, 1),
            rebalance_interval=_seconds(
                options, "rebalance_interval", cls.rebalance_interval, 0.01
            ),
            settle_interval=_seconds(options, "settle_interval", cls.settle_interval, 0),
            maintenance_interval=_seconds(
                options, "maintenance_interval", cls.maintenance_interval, 0
            ),
            polling_interval=min(
                _seconds(options, "polling_interval", cls.polling_interval, 0), 60.0
            ),
            # queue_fetch_wait's p_probe_ms: 1 to 1000 ms
            probe_interval=_seconds(options, "probe_interval", cls.probe_interval, 0.001, 1),
            max_attempts=_count(options, "max_attempts", cls.max_attempts, 1000),
            batch_size=_count(options, "batch_size", cls.batch_size, 10_000),
            max_fetch=_count(options, "max_fetch", cls.max_fetch, 100_000),
            fetch_ahead=_count(options, "fetch_ahead", cls.fetch_ahead, 100_000, low=0),
            # None or 0: leave the topic's partitions as they are
            partitions=_count(options, "partitions", cls.partitions, 4096, low=0) or None,
            broker_eta=_flag(options, "broker_eta", cls.broker_eta),
            dead_letter_rejected=_flag(options, "dead_letter_rejected", cls.dead_letter_rejected),
            topic_prefix=prefix,
        )

    def topic(self, queue: str) -> str:
        return topic_for(self.topic_prefix, queue)

    @property
    def visibility_ms(self) -> int:
        return max(1, round(self.visibility_timeout * 1000))

    @property
    def lease_ms(self) -> int:
        return max(1, round(self.lease_duration * 1000))
