"""The consumer: a subscriber of a group runs handlers on the messages of the partitions it holds.

Four small loops, each on its own connection, and a pool of handler threads:

* **lease** — every ``rebalance_interval`` (at most ``lease_duration / 3``): heartbeat, renew,
  rebalance and pick up new partitions (``queue_acquire_leases``);
* **fetch** — ``queue_fetch_wait`` for every partition held in one call: a long poll that waits
  inside the server, up to ``poll_interval``, until a held partition has work, then fetches;
* **keepalive** — every ``visibility_timeout / 3``, one ``queue_extend`` for every message the
  subscriber holds, running or buffered (G14), so no message it holds expires while it is alive;
  it also gives up on handlers past ``max_handler_time``;
* **flush** — batches acks (and nacks, extends, dead letters, releases) into few calls;
* **handlers** — ``concurrency`` threads (:class:`~mysqlq.handler_pool.HandlerPool`). A
  partition's messages run one after the other in offset order; different partitions run in
  parallel.

What follows a handler is its ``ack_policy``'s (:mod:`mysqlq.policy`): by default a return
acks and a raise nacks with the ``retry`` strategy's delay (:mod:`mysqlq.retry`). Explicit
``msg.ack()/nack()/extend()/dead_letter()`` calls are final. A fetch charges an attempt and a
release gives it back (G14). A handler past ``max_handler_time`` is given up, its partition goes
on, and what it settles later is dropped (:mod:`mysqlq.holdings`). A buffered message whose
visibility, lease or lease epoch is gone is released, not started.
``stop()`` (or SIGTERM/SIGINT in ``run()``) stops fetching, lets running handlers finish, returns
buffered messages uncharged, flushes and deregisters: another subscriber takes over at once.

Without the database (a crash, a failover: docs/ha.md) the loops retry through the host list; no
buffered message starts, outcomes wait for the (new) primary, fenced there by lease epoch, and
``stop()`` returns within its timeout and flush grace.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from mysqlq import _sql, codec, effects, groups, maintenance, version
from mysqlq.connection import connect as open_connection
from mysqlq.connection import resolve_dsn
from mysqlq.errors import Error, InvalidArgument
from mysqlq.flusher import COUNTED, Flusher, Settlement
from mysqlq.handler_pool import HandlerPool
from mysqlq.holdings import Holdings
from mysqlq.link import Link, Reachability
from mysqlq.message import Message
from mysqlq.metrics import SubscriberMetrics
from mysqlq.policy import AckPolicy, after_handler, as_policy, strategy
from mysqlq.retry import RetryStrategy
from mysqlq.routing import handler_for
from mysqlq.settler import SubscriberSettler

__all__ = ["Subscriber"]

log = logging.getLogger("mysqlq.subscriber")

Handler = Callable[[Message], Any]


# what stop() gives the final flush and the deregistration after the handlers' timeout
FLUSH_GRACE = 5.0
# a loop's statement unanswered this long (s) takes its connection as lost; a loop checks this
# often that its server still takes writes (a member that left its group answers reads)
LOOP_READ_TIMEOUT, LOOP_VERIFY_EVERY = 30, 5.0


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _where(m: Message) -> str:
    return f"topic={m.topic} key={m.key} offset={m.offset} id={m.id} attempt={m.attempt}"


def _positive(name: str, value: float, *, integer: bool = False, low: float = 0.0) -> None:
    if integer and (not isinstance(value, int) or isinstance(value, bool)):
        raise InvalidArgument(f"{name} must be an integer, not {value!r}")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > low:
        raise InvalidArgument(f"{name} must be a number above {low:g}, not {value!r}")


class Subscriber:
    """A member of consumer group ``group`` on ``topic``; see the module documentation."""

    message_class: type[Message] = Message  # what a fetched row becomes (mysqlq.aio: its own)

    def __init__(
        self,
        dsn: str | None = None,
        *,
        topic: str,
        group: str,
        handler: Handler | None = None,
        handlers: Mapping[str, Handler] | None = None,
        name: str | None = None,
        batch_size: int = 10,
        visibility_timeout: float = 60.0,
        max_attempts: int | None = None,
        lease_duration: float = 30.0,
        rebalance_interval: float = 1.0,
        max_buffered: int | None = None,
        poll_interval: float = 0.1,
        concurrency: int = 4,
        retry_backoff: float = 1.0,
        max_backoff: float = 300.0,
        ack_policy: AckPolicy | str = AckPolicy.NACK_ON_ERROR,
        retry: RetryStrategy | None = None,
        dlq_topic: str | None = None,
        max_handler_time: float = 600.0,
        maintenance_interval: float | None = 10.0,
        metrics: Any = None,
        check_version: bool = True,
    ) -> None:
        self.handler = handler_for(handler, handlers)
        _positive("batch_size", batch_size, integer=True)
        _positive("concurrency", concurrency, integer=True)
        if max_attempts is not None:  # None: the group's own
            _positive("max_attempts", max_attempts, integer=True)
        _positive("visibility_timeout", visibility_timeout)
        _positive("lease_duration", lease_duration)
        _positive("rebalance_interval", rebalance_interval)
        if max_buffered is not None:
            _positive("max_buffered", max_buffered, integer=True)
            if max_buffered > 100_000:
                raise InvalidArgument(f"max_buffered must be at most 100000, not {max_buffered}")
        _positive("poll_interval", poll_interval)
        _positive("retry_backoff", retry_backoff, low=-1e-12)
        _positive("max_backoff", max_backoff, low=-1e-12)
        _positive("max_handler_time", max_handler_time)
        self.ack_policy = as_policy(ack_policy)
        self.retry = strategy(retry, retry_backoff, max_backoff)
        maintenance.check_interval(maintenance_interval)
        self.dsn = resolve_dsn(dsn)
        self.topic = topic
        self.group = group
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.batch_size = batch_size
        self.visibility_timeout = visibility_timeout
        self.max_attempts = max_attempts
        self.lease_duration = lease_duration
        self.rebalance_interval = rebalance_interval
        # fetched messages waiting for a handler: more means fewer, larger fetches and acks; each
        # must start before its visibility deadline (max_buffered x handler time / concurrency)
        self.max_buffered = max_buffered or min(concurrency * batch_size * 8, 100_000)
        self.poll_interval = poll_interval
        self.concurrency = concurrency
        self.dlq_topic = dlq_topic
        # a running handler keeps its message invisible up to this long, then is given up
        self.max_handler_time = max_handler_time
        self.maintenance_interval = maintenance_interval
        self._metrics = SubscriberMetrics(metrics, topic, group) if metrics else None

        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._deadline = float("inf")  # monotonic: when stop() must have returned
        self._wake = threading.Event()
        self._lock = threading.Lock()
        # whether the loops reach the database (handlers wait while they do not)
        self._reach = Reachability()
        # the flush loop's queue; stop() finishes it once every buffered message is in it
        self._flusher = Flusher(group, self.name, self._record, self._wake.set)
        self._settler = SubscriberSettler(self)
        # leases, buffered and running messages
        self._holdings = Holdings(max_handler_time)
        self._threads: list[threading.Thread] = []
        self._pool: HandlerPool | None = None
        self._counts = collections.Counter()
        self._handler_seconds = 0.0

        # validate the arguments and the schema now, not in a background thread
        self._check_version = check_version
        self._register()

    def _register(self) -> None:
        """Check the schema's version and join the group (mysqlq.aio does it off the loop)."""
        args = (self.group, self.topic, self.name, self.max_attempts, self.dlq_topic)
        conn = open_connection(self.dsn)
        try:
            if self._check_version:
                version.check_version(conn, _sql.PROTOCOL_VERSION)
            # None: the group's own (a new group gets groups.DEFAULT_MAX_ATTEMPTS)
            self.max_attempts = groups.join(conn, *args, _ms(self.lease_duration))["max_attempts"]
        finally:
            conn.close()

    # lifecycle ----------------------------------------------------------------------------

    def start(self) -> Subscriber:
        if self._threads:
            raise Error("subscriber already started")
        self._pool = self._new_pool()
        for name, target in (
            ("lease", self._lease_loop),
            ("fetch", self._fetch_loop),
            ("keepalive", self._keepalive_loop),
            ("flush", self._flush_loop),
        ):
            t = threading.Thread(target=target, name=f"mysqlq-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.maintenance_interval is not None:
            self._threads.append(
                maintenance.start(self.dsn, self.name, self.maintenance_interval, self._stopping)
            )
        log.info("subscriber %s joined group %s on %s", self.name, self.group, self.topic)
        return self

    def _new_pool(self) -> Any:
        return HandlerPool(self.concurrency)

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (or :meth:`stop` from another thread), then stop
        gracefully."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self._stopping.set())
        try:
            self.start()
            while not self._stopping.wait(0.5):
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
        self._stopping.set()
        self._wake.set()
        handlers_until = time.monotonic() + timeout
        self._deadline = deadline = handlers_until + FLUSH_GRACE
        # a fetch in flight must land in the buffers before they are collected for release
        for t in self._threads:
            if t.name == "mysqlq-fetch":
                t.join(timeout=max(0.1, handlers_until - time.monotonic()))
        # no new handler starts once stopping is set; wait for the running ones (the keepalive
        # loop still extends their messages)
        while time.monotonic() < handlers_until and self._holdings.running:
            time.sleep(0.01)
        for message in self._holdings.drain():
            self._flusher.enqueue(Settlement("release", message))
        self._flusher.finish(deadline)
        for t in self._threads:
            t.join(timeout=max(0.0, deadline + 1.0 - time.monotonic()))
        if self._pool is not None:
            self._pool.shutdown()
        self._stopped.set()
        log.info("subscriber %s left group %s", self.name, self.group)

    def stats(self) -> dict[str, Any]:
        holdings = self._holdings
        with self._lock:
            counts = dict(self._counts)
            seconds = self._handler_seconds
        return {
            **counts,
            "partitions_held": len(holdings.leases),
            "buffered": holdings.buffered,
            "running": holdings.running,
            "handler_seconds": round(seconds, 6),
            "database_lost": self._reach.losses,
            "connected": self._reach.online.is_set(),
        }

    # lease loop -----------------------------------------------------------------------------

    def _lease_loop(self) -> None:
        link = self._link("lease")
        # a new member gets its share, and a new key its consumer, within one interval
        interval = min(self.lease_duration / 3, self.rebalance_interval)
        try:
            while not self._stopping.is_set():
                started = time.monotonic()
                try:
                    rows = link.rows(
                        _sql.ACQUIRE_LEASES,
                        (self.group, self.topic, self.name, _ms(self.lease_duration)),
                    )
                    held = {int(r["partition_id"]): int(r["lease_epoch"]) for r in rows}
                    gained, lost = self._holdings.set_leases(held, started + self.lease_duration)
                    if gained or lost:
                        log.info(
                            "%s holds %d partitions (+%d -%d)",
                            self.name,
                            len(held),
                            len(gained),
                            len(lost),
                        )
                        self._wake.set()
                    if self._metrics:
                        self._metrics.lag(link, held)
                except Error as exc:
                    if self._stopping.is_set():
                        break
                    log.error("%s: lease tick failed: %s", self.name, exc)
                self._stopping.wait(max(0.0, interval - (time.monotonic() - started)))
            # the flush loop has returned what it could; now leave the group at once
            self._flusher.done.wait(timeout=max(0.0, self._deadline - time.monotonic()))
            with contextlib.suppress(Error):
                link.rows(
                    _sql.DEREGISTER,
                    (self.group, self.topic, self.name),
                    give_up_when_stopping=False,
                    give_up=lambda: time.monotonic() >= self._deadline,
                )
        finally:
            link.close()

    # fetch loop -----------------------------------------------------------------------------

    def _fetch_loop(self) -> None:
        link = self._link("fetch")
        limit = self.max_buffered
        try:
            while not self._stopping.is_set():
                room = limit - self._holdings.buffered
                if not self._holdings.holding(time.monotonic()) or room <= 0:
                    self._wait()
                    continue
                fetched_at = time.monotonic()
                try:
                    # a long poll: the server waits up to poll_interval for work to appear on
                    # the held partitions, so a message is fetched within ~10 ms of its commit
                    rows = link.rows(
                        _sql.FETCH_WAIT,
                        (
                            self.group,
                            self.topic,
                            self.name,
                            self.batch_size,
                            _ms(self.visibility_timeout),
                            room,
                            _ms(self.poll_interval),
                        ),
                    )
                except Error as exc:
                    if self._stopping.is_set():
                        break
                    log.error("%s: fetch failed: %s", self.name, exc)
                    self._wait()
                    continue
                if rows:
                    # the server's deadline is at least this late: it read its clock after we sent
                    self._dispatch(rows, fetched_at + self.visibility_timeout)
                # the server has already waited when nothing came; after a partial fetch, the
                # next long poll returns as soon as more work appears
                if not rows and time.monotonic() - fetched_at < self.poll_interval / 2:
                    # the server saw work it could not deliver yet: do not spin on it
                    self._wait()
        finally:
            link.close()

    def _wait(self) -> None:
        self._wake.wait(self.poll_interval)
        self._wake.clear()

    def _dispatch(self, rows: list[dict], deadline: float) -> None:
        messages = [self.message_class.from_row(r, self._settler) for r in rows]
        self._count("delivered", len(messages))
        if self._metrics:
            self._metrics.delivered.inc(len(messages))
        for pid, generation in self._holdings.add(messages, deadline):
            assert self._pool is not None
            self._pool.submit(self._run_partition, pid, generation)

    # handlers -------------------------------------------------------------------------------

    def _link(self, loop: str) -> Link:
        """A loop's connection (retried until it answers or the subscriber stops): see LOOP_*."""
        timeout, name = LOOP_READ_TIMEOUT + math.ceil(self.poll_interval), f"{self.name} {loop}"
        return Link(
            self.dsn,
            name=name,
            forever=True,
            stopping=self._stopping,
            reach=self._reach,
            read_timeout=timeout,
            verify_every=LOOP_VERIFY_EVERY,
        )

    def _run_partition(self, pid: int, generation: int) -> None:
        """Run a partition's buffered messages one after the other, in offset order."""
        while True:
            # no message starts while the database is unreachable: its outcome could not land
            while not self._reach.online.wait(0.2) and not self._stopping.is_set():
                pass
            held, started = self._holdings.take(
                pid, generation, self._stopping.is_set(), time.monotonic()
            )
            if held is None:
                return
            if not started:
                self._count("expired_unstarted")
                self._flusher.enqueue(Settlement("release", held.message))
                continue
            try:
                # ACK_FIRST: acked on this thread's connection before it runs (at most once)
                if self.ack_policy is not AckPolicy.ACK_FIRST or self._settler.ack_first(
                    held.message
                ):
                    self._handle(held.message)
            finally:
                self._holdings.finished(held)

    def _handle(self, message: Message) -> None:
        started = time.perf_counter()
        try:
            self.handler(message)
        except Exception as exc:  # a failing handler nacks its message
            self._handled(message, started, exc)
        else:
            self._handled(message, started)

    def _handled(self, message: Message, started: float, exc: BaseException | None = None) -> None:
        """What follows a handler (shared with mysqlq.aio, whose handlers are coroutines)."""
        elapsed = time.perf_counter() - started
        with self._lock:
            self._handler_seconds += elapsed
        if self._metrics:
            self._metrics.handler_seconds.observe(elapsed)
        if exc is not None:
            self._count("handler_errors")
            text = codec.error_text(f"{type(exc).__name__}: {exc}")
            log.warning("handler failed on %s: %s", _where(message), text)
        if not message.settled:
            decision = after_handler(self.ack_policy, self.retry, message.attempt, exc is not None)
            if decision.outcome is not None:
                message._outcome = decision.outcome
                error = None if exc is None else text
                self._settle(message, decision.outcome, delay=decision.delay, error=error)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _backoff_ms(self, attempt: int) -> int:
        """An explicit ``msg.nack()``'s delay when it gives none: the retry strategy's."""
        return _ms(self.retry.delay(attempt))

    # outcomes -------------------------------------------------------------------------------

    def _settle(
        self,
        message: Message,
        outcome: str,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        if self._fenced(message, outcome):
            return
        error = codec.error_text(error)
        if outcome == "nack":
            delay_ms = self._backoff_ms(message.attempt) if delay is None else _ms(delay)
            self._flusher.enqueue(Settlement("nack", message, delay_ms=delay_ms, error=error))
        elif outcome == "dead_letter":
            self._flusher.enqueue(Settlement("dead_letter", message, error=error))
        else:
            self._flusher.enqueue(Settlement("ack", message))

    def _extend(self, message: Message, seconds: float) -> None:
        _positive("seconds", seconds)
        if self._fenced(message, "extend"):
            return
        # a handler that says it needs longer gets it: visibility and give-up deadline
        self._holdings.extend_running(message, time.monotonic() + seconds)
        self._flusher.enqueue(Settlement("extend", message, delay_ms=_ms(seconds)))

    def _settle_in(
        self,
        message: Message,
        outcome: str,
        conn: Any,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        """In the caller's transaction: no local fencing, the database decides (a given-up
        handler's late settle is stale there once its nack landed, and raises)."""
        if message.settled:
            raise Error(f"message {message.id!r} is already settled")
        delay_ms = self._backoff_ms(message.attempt) if delay is None else _ms(delay)
        effects.settle_in(conn, self.group, message, outcome, delay_ms=delay_ms, error=error)
        message._outcome = outcome
        self._count(f"{COUNTED[outcome]}_in_transaction")

    def _fenced(self, message: Message, outcome: str) -> bool:
        """A handler that was given up settles nothing: its message was nacked already."""
        fenced = self._holdings.fenced(message)
        if fenced:
            self._count("late_outcomes")
            log.warning(
                "%s: dropped the %s of a handler given up on %s",
                self.name,
                outcome,
                _where(message),
            )
        return fenced

    # keepalive loop -------------------------------------------------------------------------

    def _keepalive_loop(self) -> None:
        """Keep every held message invisible to others while this subscriber lives (G14), release
        buffered messages of partitions it lost, and give up on handlers past max_handler_time."""
        link = self._link("keepalive")
        tick = min(0.5, self.visibility_timeout / 6)
        every = self.visibility_timeout / 3
        last = time.monotonic()
        try:
            while not self._flusher.final.wait(tick):
                now = time.monotonic()
                self._give_up_overdue(now)
                self._release_moved(now)
                if now - last >= every:
                    last = now
                    self._extend_held(link)
        finally:
            link.close()

    def _give_up_overdue(self, now: float) -> None:
        for held, generation in self._holdings.overdue(now):
            message = held.message
            self._count("given_up")
            if self._metrics:
                self._metrics.given_up.inc()
            log.warning(
                "%s: handler exceeded max_handler_time (%gs) on %s; its message is settled as its"
                " ack policy says (nacked by default) and its thread replaced",
                self.name,
                self.max_handler_time,
                _where(message),
            )
            decision = after_handler(
                self.ack_policy, self.retry, message.attempt, failed=True, given_up=True
            )
            if decision.outcome is not None:
                error = f"handler exceeded max_handler_time ({self.max_handler_time:g}s)"
                self._flusher.enqueue(
                    Settlement(decision.outcome, message, _ms(decision.delay), error)
                )
            assert self._pool is not None
            self._pool.replace(held.thread)
            # the partition goes on: its next message in a new runner
            self._pool.submit(self._run_partition, message.partition_id, generation)

    def _release_moved(self, now: float) -> None:
        """Buffered messages of a partition no longer held under their epoch go back at once: its
        new holder would wait for them otherwise."""
        for message in self._holdings.moved(now):
            self._count("expired_unstarted")
            self._flusher.enqueue(Settlement("release", message))

    def _extend_held(self, link: Link) -> None:
        held = self._holdings.all_held()
        if not held:
            return
        sent = time.monotonic()
        deliveries = codec.deliveries_json(h.message for h in held)
        try:
            link.rows(_sql.EXTEND, (self.group, deliveries, _ms(self.visibility_timeout)))
        except Error as exc:
            log.error("%s: extending %d messages failed: %s", self.name, len(held), exc)
            return
        self._holdings.extended(held, sent + self.visibility_timeout)
        self._count("keepalives")

    def _flush_loop(self) -> None:
        link = self._link("flush")
        try:
            self._flusher.run(link)
        finally:
            link.close()

    def _record(self, outcome: str, settled: int, stale: int, dead: int) -> None:
        """What one flush call did: a nack at the last attempt moves the message to the DLQ, so
        it counts there."""
        settled -= dead if outcome == "nack" else 0
        self._count(COUNTED[outcome], settled)
        self._count("stale", stale)
        if outcome == "nack" and dead:
            self._count("dead_lettered", dead)
        if self._metrics:
            self._metrics.outcome(outcome, settled)
            if outcome == "nack" and dead:
                self._metrics.outcome("dead_letter", dead)
