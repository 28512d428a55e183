"""The consumer: a subscriber of a group runs handlers on the messages of the partitions it holds.

Four small loops, each on its own connection (:mod:`mysqlq.loops`), and a pool of handler
threads:

* **lease** — every ``rebalance_interval`` (at most ``lease_duration / 3``): heartbeat, renew,
  rebalance and pick up new partitions (``queue_acquire_leases``);
* **fetch** — ``queue_fetch_wait`` for every partition held in one call: a long poll that waits
  inside the server, up to ``poll_interval``, until a held partition has work, then fetches;
  after a fetch that served every partition held, the next long poll carries their acks;
* **keepalive** — every ``visibility_timeout / 3``, one ``queue_extend`` for every message the
  subscriber holds, running or buffered (G14), so no message it holds expires while it is alive;
  it also gives up on handlers past ``max_handler_time``;
* **flush** — batches acks (and nacks, extends, dead letters, releases) into few calls, or
  hands a batch of acks to the fetch loop when it waits for them;
* **handlers** — ``concurrency`` threads (:class:`~mysqlq.handler_pool.HandlerPool`). A
  partition's messages run one after the other in offset order; different partitions run in
  parallel. With a ``batch_handler``, ``concurrency`` threads run batches instead
  (:mod:`mysqlq.batching`: a partition in one running batch at a time, in offset order).

What follows a handler is its ``ack_policy``'s (:mod:`mysqlq.policy`): by default a return
acks and a raise nacks with the ``retry`` strategy's delay (:mod:`mysqlq.retry`). Explicit
``msg.ack()/nack()/extend()/dead_letter()`` calls are final. Every outcome, whoever decides it,
goes through the subscriber's :class:`~mysqlq.settlement.Settlement`. A fetch charges an attempt
and a release gives it back (G14). A handler past ``max_handler_time`` is given up, its partition
goes on, and what it settles later is dropped (:mod:`mysqlq.holdings`). A buffered message whose
visibility, lease or lease epoch is gone is released, not started.
``stop()`` (or SIGTERM/SIGINT in ``run()``) stops fetching, lets running handlers finish, returns
buffered messages uncharged, flushes and deregisters: another subscriber takes over at once.

Without the database (a crash, a failover: docs/ha.md) the loops retry through the host list; no
buffered message starts, outcomes wait for the (new) primary, fenced there by lease epoch, and
``stop()`` returns within its timeout and flush grace.

The parts are shared with :mod:`mysqlq.aio` (:class:`~mysqlq.consumer.Consumer`); what is this
module's own is the thread runner and the blocking lifecycle.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from mysqlq.batching import ThreadBatches
from mysqlq.consumer import FLUSH_GRACE, Consumer
from mysqlq.effects import ThreadSessions
from mysqlq.errors import Error
from mysqlq.handler_pool import HandlerPool
from mysqlq.message import Message
from mysqlq.settings import SettingsAttributes, SubscriberSettings
from mysqlq.settlement import clock

__all__ = ["FLUSH_GRACE", "Subscriber"]

log = logging.getLogger("mysqlq.subscriber")


class ThreadRunner:
    """The :class:`~mysqlq.loops.Runners` of the sync subscriber: each partition's messages run
    one after the other on a thread of a :class:`~mysqlq.handler_pool.HandlerPool`."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.handler = consumer.settings.handler
        self.pool = HandlerPool(consumer.settings.concurrency)

    def start(self, pid: int, generation: int) -> None:
        self.pool.submit(self.run_partition, pid, generation)

    def replace(self, worker: Any) -> None:
        self.pool.replace(worker)

    def shutdown(self) -> None:
        self.pool.shutdown()

    def run_partition(self, pid: int, generation: int) -> None:
        """Run a partition's buffered messages one after the other, in offset order."""
        consumer, settlement = self.consumer, self.consumer.settlement
        online, stopping = consumer.control.reach.online, consumer.stopping
        me = threading.current_thread()
        while True:
            # no message starts while the database is unreachable: its outcome could not land
            if not online.is_set():
                while not online.wait(0.2) and not stopping.is_set():
                    pass
            held = consumer.take(pid, generation, me)
            if held is None:
                return
            try:
                # ACK_FIRST: acked on this thread's connection before it runs (at most once)
                if not settlement.acks_first or settlement.ack_first(held.message):
                    self.handle(held.message)
            finally:
                consumer.finished(held)

    def handle(self, message: Message) -> None:
        started = clock()
        assert self.handler is not None
        try:
            self.handler(message)
        except Exception as exc:  # a failing handler nacks its message
            self.consumer.settlement.handled(message, started, exc)
        else:
            self.consumer.settlement.handled(message, started)


class Subscriber(SettingsAttributes):
    """A member of consumer group ``group`` on ``topic``; see the module documentation. The
    arguments are :class:`~mysqlq.settings.SubscriberSettings`'; they are checked, and the
    group joined (the schema's version checked), in the constructor."""

    def __init__(self, dsn: str | None = None, **options: Any) -> None:
        self.settings = settings = SubscriberSettings(dsn, **options)
        self._consumer = Consumer(settings, Message, ThreadSessions(settings.dsn or ""))
        self._runner: ThreadRunner | ThreadBatches | None = None
        self._stopped = threading.Event()
        # validate the arguments and the schema now, not in a background thread
        self._consumer.register()

    def start(self) -> Subscriber:
        if self._consumer.started:
            raise Error("subscriber already started")
        batches = self.settings.batch_handler is not None
        self._runner = ThreadBatches(self._consumer) if batches else ThreadRunner(self._consumer)
        self._consumer.start(self._runner)
        return self

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (or :meth:`stop` from another thread), then stop
        gracefully."""
        stopping = self._consumer.stopping
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: stopping.set())
        try:
            self.start()
            while not stopping.wait(0.5):
                pass
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop fetching, let running handlers finish (up to ``timeout`` seconds), return
        buffered messages at once, flush outcomes, release the leases and deregister. Returns
        within ``timeout`` + ``FLUSH_GRACE`` (5 s) + about one, with the database up or down:
        outcomes the flush could not send by then are dropped (they come back after their
        visibility timeout)."""
        if self._stopped.is_set():
            return
        consumer = self._consumer
        handlers_until = consumer.begin_stop(timeout)
        consumer.join_fetch(handlers_until)
        # no new handler starts once stopping is set; wait for the running ones (the keepalive
        # loop still extends their messages)
        while time.monotonic() < handlers_until and consumer.holdings.running:
            time.sleep(0.01)
        consumer.hand_back()
        consumer.join()
        if self._runner is not None:
            self._runner.shutdown()
        self._stopped.set()
        log.info("subscriber %s left group %s", self.name, self.group)

    def stats(self) -> dict[str, Any]:
        return self._consumer.stats()
