"""A kombu transport on mysqlq, so Celery runs with ``broker_url = "mysqlq://user:pw@host/db"``.

Built on kombu's virtual transport. A queue ``q`` is the topic ``celery.q`` (``topic_prefix``)
and the consumer group of the same name; a worker is one subscriber of that group (see
docs/celery.md for the whole mapping). What kombu asks of a virtual channel maps onto the
consumer protocol of docs/protocol.md:

=====================  ==============================================================
kombu                  mysqlq
=====================  ==============================================================
``_put``               ``queue_publish_message``: id = the message's delivery tag (a
                       new UUID per publish), priority 0-9, kind = the task name, a
                       delay when the task has an ETA (``broker_eta``)
drain                  ``queue_fetch_wait`` (one queue) or ``queue_fetch`` in a prefetch
                       thread, up to the room in the channel's prefetch window; the
                       delivery is held (and renewed) until it is settled
``basic_ack``          ``queue_ack`` (batched by the keeper thread)
``basic_reject``       requeue: ``queue_nack`` with no delay (an attempt is spent);
                       else ``queue_ack`` (dropped), or ``queue_dead_letter`` with
                       ``dead_letter_rejected``
``_restore``           ``queue_release_messages``: visible again at once, the attempt
                       given back (prefetched messages at shutdown)
``_size``              the group's lag;  ``_purge``: ``queue_seek`` to the end
=====================  ==============================================================
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from kombu.transport import virtual

from mysqlq import connection as mq_connection
from mysqlq.celery.broker import Broker
from mysqlq.celery.channel import Channel
from mysqlq.celery.options import Options
from mysqlq.errors import DatabaseError, InvalidArgument, TransientError, redact_dsn

__all__ = ["Channel", "Transport", "dsn_of"]


def dsn_of(client: Any) -> str:
    """The mysqlq DSN of a kombu connection: ``mysqlq://...`` (or ``mysqlq+mysql://...``) as
    ``mysql://...``; ``mysqlq://`` alone takes ``$MYSQLQ_DSN``."""
    url = str(client.hostname or "")
    if "://" not in url:
        raise InvalidArgument(
            "the mysqlq transport needs a URL: broker_url = 'mysqlq://user:password@host:3306/db'"
        )
    rest = url.split("://", 1)[1]
    if not rest or rest == "/":
        return mq_connection.resolve_dsn(None)
    dsn = "mysql://" + rest
    mq_connection.parse_dsn(dsn)  # InvalidDSN now, not at the first call
    return dsn


class Transport(virtual.Transport):
    """The kombu transport ``mysqlq`` (registered by ``import mysqlq.celery``)."""

    Channel = Channel

    can_parse_url = True  # kombu hands over the whole URL: host lists, TLS parameters and all
    default_port = 3306
    driver_type = "mysqlq"
    driver_name = "mysqlclient"
    polling_interval = 1.0

    connection_errors = (*virtual.Transport.connection_errors, TransientError)
    channel_errors = (*virtual.Transport.channel_errors, DatabaseError, InvalidArgument)

    # no fanout: broadcast (remote control, mingle, gossip) needs bindings shared between
    # processes, which this transport does not keep; Celery leaves those features off.
    # asynchronous: Celery's worker runs its event loop (the hub) on a pipe the prefetch threads
    # and the acks write to, and gives each pool process queues of its own (its blocking pool's
    # shared queue stays locked when a pool process dies while waiting for a task)
    implements = virtual.Transport.implements.extend(
        asynchronous=True, exchange_type=frozenset(["direct", "topic"]), heartbeats=False
    )

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.options = Options.from_transport_options(client.transport_options)
        self.polling_interval = self.options.polling_interval
        self.broker = Broker(dsn_of(client), self.options)
        # notified when a channel buffered messages, and when a settle freed prefetch room
        self.ready = threading.Condition()
        self.broker.on_settle = self.wake
        self._failure: BaseException | None = None
        # the event loop's wake-up: readable while there may be something to deliver
        self._loop: Any = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._signaled = False
        self._loop_thread: int | None = None
        self._delivering = False

    def wake(self) -> None:
        """Something may be deliverable (messages buffered, prefetch room freed): wake a
        prefetch thread waiting for room, and the consumer thread or the event loop when
        something is deliverable. Any thread; called after every settle, so it wakes no thread
        that would find nothing to do."""
        channels = list(self.channels)
        for channel in channels:
            channel.poke()
        if self._loop is None:
            with self.ready:
                self.ready.notify_all()
            return
        if self._signaled or not any(c.deliverable() for c in channels):
            return
        if self._delivering and threading.get_ident() == self._loop_thread:
            # an ack while on_readable delivers (a solo pool runs the task inline): it looks
            # again before it returns
            return
        # the pipe, from the loop's own thread too: a callback the loop's thread adds with
        # call_soon while the loop runs its ready callbacks or timers waits for its next poll
        # to return (up to a second, the timer below)
        self._signal()

    def _signal(self) -> None:
        """Make the loop's pipe readable, once until on_readable reads it (any thread)."""
        with self.ready:
            if not self._signaled and self._loop is not None:
                self._signaled = True
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"!")

    def fail(self, exc: BaseException) -> None:
        """A prefetch thread failed: the consumer thread raises ``exc`` at its next drain."""
        with self.ready:
            self._failure = exc
            self.ready.notify_all()
        self._signal()

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        self._loop = loop
        # Deliveries run only in the pipe's callback, which the hub calls after a poll. Celery
        # acks in callbacks it adds with call_soon from the loop's thread. Each turn of the hub
        # runs such callbacks, then its timers, then polls: callbacks added during the events
        # run at the next turn, but those added while it runs a timer or a ready callback wait
        # until that turn's poll returns, which sleeps until the next timer when nothing else
        # wakes it. A delivery from the timer used to drain the pipe, deliver a window and so
        # leave its acks to the next second, every second.
        loop.add_reader(self._wake_r, self.on_readable)
        # a timer every second: the loop never sleeps longer (a warm shutdown is noticed at
        # once), and nothing deliverable waits longer than that for a wake-up it missed
        loop.call_repeatedly(1.0, self.on_tick)
        self._signal()  # deliver what is buffered already

    def on_tick(self) -> None:
        """(the event loop, every second) Restart a stopped prefetch thread; signal the pipe when
        something is deliverable or a prefetch thread failed (on_readable then delivers)."""
        channels = list(self.channels)
        for channel in channels:
            channel.ensure_fetcher()
        if self._failure is not None or any(c.deliverable() for c in channels):
            self._signal()

    def on_readable(self) -> None:
        """(the event loop, when the pipe is readable) Deliver what the prefetch window
        allows."""
        self._loop_thread = threading.get_ident()
        with self.ready:
            with contextlib.suppress(OSError):
                while os.read(self._wake_r, 4096):
                    pass
            self._signaled = False
            failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
        channels = list(self.channels)
        self._delivering = True
        try:
            for channel in channels:
                channel.ensure_fetcher()
                channel.deliver_buffered(self._deliver)
        finally:
            self._delivering = False
        if any(c.deliverable() for c in channels):
            # an ack during the delivery freed room in a channel delivered before it: at the
            # loop's next turn, after the other events waiting
            self.wake()

    def establish_connection(self) -> Any:
        self.broker.check()
        return super().establish_connection()

    def verify_connection(self, connection: Any) -> bool:
        try:
            self.broker.check()
        except Exception:
            return False
        return True

    def close_connection(self, connection: Any) -> None:
        try:
            super().close_connection(connection)
        finally:
            self.broker.close()
            loop, self._loop = self._loop, None
            if loop is not None:
                with contextlib.suppress(Exception):
                    loop.remove(self._wake_r)
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_r = self._wake_w = -1

    def driver_version(self) -> str:
        import mysqlq

        return mysqlq.__version__

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        return uri if include_password else redact_dsn(uri)

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Deliver what the channels' prefetch threads buffered; wait for some up to
        ``timeout`` (TimeoutError after it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            failure, self._failure = self._failure, None
            if failure is not None:
                raise failure
            delivered = 0
            for channel in list(self.channels):
                channel.ensure_fetcher()
                delivered += channel.deliver_buffered(self._deliver)
            if delivered:
                return
            with self.ready:
                if self._failure is None and not any(c.deliverable() for c in self.channels):
                    if deadline is None:
                        self.ready.wait(1.0)
                    else:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise TimeoutError()
                        self.ready.wait(remaining)
