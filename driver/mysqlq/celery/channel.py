"""The kombu channel of the mysqlq transport: publishing into topics, a prefetch thread that
fetches into a buffer, settling through the broker's keeper (see mysqlq.celery.transport)."""

from __future__ import annotations

import collections
import datetime
import json
import logging
import threading
import time
from queue import Empty
from typing import Any

from kombu.transport import virtual
from kombu.utils import json as kombu_json

from mysqlq.celery.broker import Broker
from mysqlq.celery.keeper import ACK, DEAD_LETTER, NACK, RELEASE, tag_of
from mysqlq.celery.options import Options
from mysqlq.celery.session import CALL_WINDOW, Session

__all__ = ["KEY_HEADER", "Channel", "eta_delay_ms"]

log = logging.getLogger("mysqlq.celery")

MAX_DELAY_MS = 31_536_000_000
# the pause of a prefetch thread that polls several queues and found none with a message
IDLE_PAUSE = 0.1
# the least a prefetch thread holds (its prefetch window and its buffer) with the default
# fetch_ahead: it fetches half of that or more at a time (max_fetch: 100), as a database call
# costs about the same for 50 or 100 messages, and the next fetch starts while the buffer still
# holds the time it takes (a fetch took 7 ms for 32 tasks in a busy worker; a solo worker runs 32
# no-op tasks in 3)
MIN_HELD = 200
# header (or message property) naming the partition key of a task: tasks with the same key are
# delivered in publish order (docs/celery.md)
KEY_HEADER = "mysqlq_key"


def _name(value: Any) -> str | None:
    """A free-form mysqlq name (1 to 191 characters, not ending in a space), or None."""
    if not isinstance(value, str) or not value:
        return None
    value = value[:191].rstrip(" ")
    return value or None


def _envelope(text: str) -> Any:
    """A kombu message decoded as kombu decodes it. kombu's decoder calls a hook for every JSON
    object, which only changes an object keyed ``__type__`` (kombu's encoding of dates, UUIDs,
    decimals): a text that cannot hold that key (not even escaped) is decoded without the hook,
    in three quarters of the time."""
    if "__type__" in text or "\\u" in text:
        return kombu_json.loads(text)
    return json.loads(text)


def eta_delay_ms(headers: dict[str, Any] | None, now: float | None = None) -> int:
    """Milliseconds until the ETA of a Celery message (protocol 2 ``eta`` header), 0 if none."""
    eta = (headers or {}).get("eta")
    if not eta:
        return 0
    if isinstance(eta, str):
        try:
            eta = datetime.datetime.fromisoformat(eta.replace("Z", "+00:00"))
        except ValueError:
            return 0
    if not isinstance(eta, datetime.datetime):
        return 0
    # a naive ETA is local time, as Celery reads it without a timezone
    delay = eta.timestamp() - (time.time() if now is None else now)
    return max(0, min(MAX_DELAY_MS, round(delay * 1000)))


class Channel(virtual.Channel):
    """A kombu channel whose queues are mysqlq topics (see the module documentation).

    Settling costs the consumer thread no thread switch: an ack is queued for the keeper (which
    is woken only when it would look too late by itself), wakes the prefetch thread only when it
    waits for room and there is room now (:meth:`poke`), and wakes the event loop only when a
    buffered message became deliverable (and not while the loop is delivering: see
    Transport.wake).

    A consuming channel runs a prefetch thread with a fetch session of its own: it fetches into
    a buffer, which the consumer thread delivers from as Celery's prefetch window
    (``worker_prefetch_multiplier`` x concurrency) allows. The buffer holds up to
    ``fetch_ahead`` messages (default: one window, and at least ``MIN_HELD`` in all) beyond the
    window: the database round trip is off the consumer thread, a pool process that finishes a
    task finds the next one waiting, and a fetch brings half of window + buffer or more (a call
    costs the database about the same for 1 or 50 messages). Buffered messages are held like
    delivered ones (renewed, released at a graceful stop); they come from partitions this worker
    leases, which no other worker would serve meanwhile.
    """

    supports_fanout = False
    do_restore = True

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._noack_queues: set[str] = set()
        self._got_queues: set[str] = set()  # queues basic_get consumed from
        self._buffer: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
        self._session: Session | None = None
        self._fetcher: threading.Thread | None = None
        self._stopping = False
        # set to wake the prefetch thread (room freed, a consumer added, closing); it waits on
        # it only when it has nothing to fetch, and poke() sets it only then
        self._poked = threading.Event()
        self._idle = False

    @property
    def broker(self) -> Broker:
        return self.connection.broker

    @property
    def options(self) -> Options:
        return self.connection.options

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = self.broker.session()
        return self._session

    # publishing ----------------------------------------------------------------------------

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        # nothing to create: a topic exists from its first publish, and a group from its first
        # consumer (a topic nobody subscribed to keeps every message, so none is lost before)
        self.options.topic(queue)

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return True

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        props = message.get("properties") or {}
        headers = message.get("headers") or {}
        delay = eta_delay_ms(headers) if self.options.broker_eta else 0
        key = headers.get(KEY_HEADER) or props.get(KEY_HEADER)
        tag = props.get("delivery_tag")
        self.broker.publish(
            self.options.topic(queue),
            kombu_json.dumps(message).encode("utf-8"),
            id=_name(str(tag)) if tag else None,
            key=_name(None if key is None else str(key)),
            delay_ms=delay,
            kind=_name(headers.get("task")),
            priority=self._get_message_priority(message),
        )

    # consuming -----------------------------------------------------------------------------

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kw: Any):
        topic = self.options.topic(queue)
        self.broker.start_consuming(topic, topic)
        if no_ack:
            self._noack_queues.add(queue)
        result = super().basic_consume(queue, no_ack, callback, consumer_tag, **kw)
        self._poked.set()
        self.ensure_fetcher()
        return result

    def ensure_fetcher(self) -> None:
        """Start the prefetch thread of a consuming channel, or start it again after it stopped
        on an error (which the consumer thread raised: kombu reconnects, or the caller retries)."""
        if not self._consumers or self._stopping or self.closed:
            return
        if self._fetcher is None or not self._fetcher.is_alive():
            self._fetcher = threading.Thread(
                target=self._fetch_loop, name=f"mysqlq-fetch-{self.channel_id}", daemon=True
            )
            self._fetcher.start()

    def basic_cancel(self, consumer_tag: str) -> None:
        queue = self._tag_to_queue.get(consumer_tag) if consumer_tag in self._consumers else None
        super().basic_cancel(consumer_tag)
        if queue is None:
            return
        if queue not in self._active_queues:
            self._noack_queues.discard(queue)
            self._release_buffered(queue)
        self.broker.stop_consuming(self.options.topic(queue))

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        topic = self.options.topic(queue)
        if queue not in self._got_queues:
            self.broker.start_consuming(topic, topic)
            self._got_queues.add(queue)
        rows = self.broker.fetch(self.session, topic, topic, 1, 0)
        self.broker.hold_many(topic, rows)
        payload = self._received(rows[0], topic, no_ack) if rows else None
        if payload is None:
            return None
        message = self.Message(payload, channel=self)
        if not no_ack:
            self.qos.append(message, message.delivery_tag)
        return message

    def basic_qos(self, prefetch_size: int = 0, prefetch_count: int = 0, apply_global=False):
        super().basic_qos(prefetch_size, prefetch_count, apply_global)
        self._poked.set()
        self.connection.wake()  # a larger window: buffered messages may be deliverable now

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        message = self.basic_get(queue, no_ack=True)
        if message is None:
            raise Empty()
        return message._raw

    def _room(self) -> int:
        """Messages the prefetch thread fetches now. It holds at most Celery's prefetch window
        (delivered and unacked) plus ``fetch_ahead`` more in its buffer, and fetches once half
        of that is free (fewer, larger fetches, while the rest keeps the pool busy); else 0."""
        o = self.options
        window = min(self.qos.prefetch_count or o.max_fetch, o.max_fetch)
        ahead = o.fetch_ahead
        if ahead is None:  # one window, and at least MIN_HELD held in all
            ahead = min(max(window, MIN_HELD - window), 2 * o.max_fetch)
        free = self.qos.can_consume_max_estimate()
        room = (window if free is None else min(free, window)) + ahead - len(self._buffer)
        return min(room, o.max_fetch) if room >= (window + ahead + 1) // 2 else 0

    def poke(self) -> None:
        """Wake the prefetch thread if it waits for room and there is room now (any thread)."""
        if self._idle and self._room() > 0:
            self._idle = False
            self._poked.set()

    def _fetch_loop(self) -> None:
        transport = self.connection
        ready = transport.ready
        o = self.options
        turn = 0
        while not self._stopping:
            queues = list(self._active_queues)
            room = self._room()
            if not queues or room <= 0:
                if self.deliverable():
                    transport.wake()  # what the consumer thread may not have seen
                self._poked.clear()
                self._idle = True
                if self._room() <= 0 or not self._active_queues:  # else freed meanwhile
                    self._poked.wait(max(o.polling_interval, IDLE_PAUSE))
                self._idle = False
                continue
            queue = queues[turn % len(queues)]
            turn += 1
            topic = o.topic(queue)
            # one queue: wait in the server; several: poll each in turn, then pause
            wait_ms = round(o.polling_interval * 1000) if len(queues) == 1 else 0
            try:
                rows = self.broker.fetch(self.session, topic, topic, room, wait_ms)
            except Exception as exc:
                transport.fail(exc)  # the consumer thread raises it: kombu reconnects
                return
            no_ack = queue in self._noack_queues
            self.broker.hold_many(topic, rows)
            fetched = []
            for row in rows:
                payload = self._received(row, topic, no_ack)
                if payload is not None:
                    fetched.append((queue, payload))
            with ready:
                if self._stopping:
                    for _queue, payload in fetched:
                        self.broker.settle(payload["properties"]["delivery_tag"], RELEASE)
                    return
                self._buffer.extend(fetched)
                if fetched:
                    transport.wake()
                elif len(queues) > 1 and turn % len(queues) == 0:
                    self._poked.clear()
                    self._poked.wait(min(o.polling_interval, IDLE_PAUSE))

    def deliverable(self) -> bool:
        return bool(self._buffer) and bool(self._consumers) and self.qos.can_consume()

    def deliver_buffered(self, callback: Any) -> int:
        """Deliver buffered messages while the prefetch window allows (consumer thread)."""
        delivered = 0
        callbacks = self.connection._callbacks
        while self._consumers and self.qos.can_consume():
            try:
                queue, payload = self._buffer.popleft()
            except IndexError:
                break
            if queue not in callbacks:  # its consumer was cancelled meanwhile
                self.broker.settle(payload["properties"]["delivery_tag"], RELEASE)
                continue
            callback(payload, queue)
            delivered += 1
        return delivered

    def drain_events(self, timeout: float | None = None, callback: Any = None, **kwargs: Any):
        if not self.deliver_buffered(callback or self.connection._deliver):
            raise Empty()

    def _release_buffered(self, queue: str | None = None) -> None:
        with self.connection.ready:
            keep = [(q, p) for q, p in self._buffer if queue is not None and q != queue]
            gone = [p for q, p in self._buffer if queue is None or q == queue]
            self._buffer.clear()
            self._buffer.extend(keep)
        for payload in gone:
            self.broker.settle(payload["properties"]["delivery_tag"], RELEASE)

    def _received(self, row: dict[str, Any], group: str, no_ack: bool) -> dict[str, Any] | None:
        """The kombu message of a fetched row, held by the broker until it is settled (or
        acked at once for a no-ack consumer); None for a row that is no kombu message (it goes
        to the DLQ)."""
        triple = (int(row["partition_id"]), int(row["offset"]), int(row["token"]))
        tag = tag_of(triple)
        try:
            payload = _envelope(bytes(row["payload"]).decode("utf-8"))
            props = payload["properties"]
        except Exception as exc:
            log.error("mysqlq: %s offset %s is not a kombu message (%r)", group, triple[1], exc)
            self.broker.settle(tag, DEAD_LETTER, f"not a kombu message: {exc!r}"[:1000])
            return None
        attempt = int(row.get("attempt") or 1)
        props["delivery_tag"] = tag
        info = props.setdefault("delivery_info", {})
        info["redelivered"] = attempt > 1
        info["mysqlq"] = {
            "topic": row.get("topic"),
            "group": group,
            "partition_id": triple[0],
            "offset": triple[1],
            "attempt": attempt,
        }
        if no_ack:
            self.broker.settle(tag, ACK)
        return payload

    # settling ------------------------------------------------------------------------------

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        # the window first: the settle's wake-up looks at it
        super().basic_ack(delivery_tag, multiple=multiple)
        self.broker.settle(delivery_tag, ACK)

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if requeue:
            # Celery requeues a task whose worker process died (task_reject_on_worker_lost) or
            # that raised Reject(requeue=True): the handler ran, so the attempt counts
            action: tuple[Any, ...] = (NACK, 0, "rejected with requeue")
        elif self.options.dead_letter_rejected:
            action = (DEAD_LETTER, "rejected")
        else:
            action = (ACK,)
        self.qos.reject(delivery_tag, requeue=False)
        self.broker.settle(delivery_tag, *action)

    def _restore(self, message: Any) -> None:
        # an unacked message given back when the channel closes (at a warm shutdown, the
        # prefetched tasks that never started) or on basic_recover: visible again at once, and
        # its attempt given back
        self.broker.settle(message.delivery_tag, RELEASE)

    def _restore_at_beginning(self, message: Any) -> None:
        self._restore(message)

    # queue administration ------------------------------------------------------------------

    def _size(self, queue: str) -> int:
        topic = self.options.topic(queue)
        return self.broker.lag(topic, topic)

    def _purge(self, queue: str) -> int:
        topic = self.options.topic(queue)
        return self.broker.purge(topic, topic)

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        topic = self.options.topic(queue)
        self.broker.unsubscribe(topic, topic)

    def close(self) -> None:
        if not self.closed and self.connection is not None:
            self._stopping = True
            self._poked.set()
            with self.connection.ready:
                self.connection.ready.notify_all()
            fetcher = self._fetcher
            if fetcher is not None and fetcher is not threading.current_thread():
                fetcher.join(self.options.polling_interval + CALL_WINDOW)
            self._release_buffered()
            for queue in self._got_queues:
                self.broker.stop_consuming(self.options.topic(queue))
            self._got_queues.clear()
        super().close()
