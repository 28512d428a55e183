"""The four loops of a subscriber, each run in its own thread on its own connection (a
:class:`~mysqlq.link.Link`), the same under :mod:`mysqlq.subscriber` and :mod:`mysqlq.aio`:

* :class:`LeaseLoop` — every ``rebalance_interval`` (at most ``lease_duration / 3``): heartbeat,
  renew, rebalance and pick up new partitions (``queue_acquire_leases``); at stop, deregister
  once the flush loop is done;
* :class:`FetchLoop` — ``queue_fetch_wait`` for every partition held in one call: a long poll
  that waits inside the server, up to ``poll_interval``, until a held partition has work; the
  messages are buffered and their partitions' runners started; after a fetch that served every
  partition held, it first waits for their outcomes (:meth:`FetchLoop.settle`): the flush of
  them, or, when they are acks alone, the batch the flusher hands over, which the next long poll
  carries (``p_acks``: one call and one commit for the acks and the fetch);
* :class:`KeepaliveLoop` — every ``visibility_timeout / 3``, one ``queue_extend`` for every
  message held, running or buffered (G14); gives up on handlers past ``max_handler_time`` and
  releases buffered messages of partitions no longer held under their epoch;
* :func:`flush_loop` — the :class:`~mysqlq.flusher.Flusher`: outcomes, batched.

What they share is a :class:`Control`; what runs the handlers is a :class:`Runners` (threads or
tasks).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mysqlq import _sql, codec
from mysqlq.errors import Error
from mysqlq.flusher import Flusher, Pending
from mysqlq.holdings import Holdings
from mysqlq.link import Link, Reachability
from mysqlq.message import Message
from mysqlq.settings import SubscriberSettings, ms
from mysqlq.settlement import Settlement
from mysqlq.tally import Tally

__all__ = ["Control", "FetchLoop", "KeepaliveLoop", "LeaseLoop", "Runners", "flush_loop"]

log = logging.getLogger("mysqlq.subscriber")

# a loop's statement unanswered this long (s) takes its connection as lost; a loop checks this
# often that its server still takes writes (a member that left its group answers reads)
LOOP_READ_TIMEOUT, LOOP_VERIFY_EVERY = 30, 5.0


class Runners(Protocol):
    """What runs a partition's messages: one runner per (partition, generation) at a time."""

    def start(self, pid: int, generation: int) -> None:
        """Start running partition ``pid``'s buffered messages, as runner ``generation``."""

    def replace(self, worker: Any) -> None:
        """Its handler was given up: retire ``worker`` and keep the pool's size."""


@dataclass(eq=False)
class Control:
    """What the loops share: ``stopping`` (stop() began), ``wake`` (the fetch loop has something
    to look at), ``reach`` (whether the database answers; handlers wait while it does not) and
    ``deadline`` (monotonic: when stop() must have returned)."""

    stopping: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    reach: Reachability = field(default_factory=Reachability)
    deadline: float = math.inf

    def past_deadline(self) -> bool:
        return time.monotonic() >= self.deadline

    def link(self, settings: SubscriberSettings, loop: str) -> Link:
        """A loop's connection (retried until it answers or the subscriber stops): LOOP_*."""
        return Link(
            settings.dsn,
            name=f"{settings.name} {loop}",
            forever=True,
            stopping=self.stopping,
            reach=self.reach,
            read_timeout=LOOP_READ_TIMEOUT + math.ceil(settings.poll_interval),
            verify_every=LOOP_VERIFY_EVERY,
        )


class LeaseLoop:
    def __init__(
        self,
        settings: SubscriberSettings,
        control: Control,
        holdings: Holdings,
        flusher: Flusher,
        metrics: Any = None,
    ) -> None:
        self.settings, self.control, self.holdings = settings, control, holdings
        self.flusher, self.metrics = flusher, metrics

    def __call__(self) -> None:
        s, control = self.settings, self.control
        link = control.link(s, "lease")
        # a new member gets its share, and a new key its consumer, within one interval
        interval = min(s.lease_duration / 3, s.rebalance_interval)
        try:
            while not control.stopping.is_set():
                started = time.monotonic()
                try:
                    self.tick(link, started)
                except Error as exc:
                    if control.stopping.is_set():
                        break
                    log.error("%s: lease tick failed: %s", s.name, exc)
                control.stopping.wait(max(0.0, interval - (time.monotonic() - started)))
            # the flush loop has returned what it could; now leave the group at once
            self.flusher.done.wait(timeout=max(0.0, control.deadline - time.monotonic()))
            with contextlib.suppress(Error):
                link.rows(
                    _sql.DEREGISTER,
                    (s.group, s.topic, s.name),
                    give_up_when_stopping=False,
                    give_up=control.past_deadline,
                )
        finally:
            link.close()

    def tick(self, link: Link, started: float) -> None:
        s = self.settings
        rows = link.rows(_sql.ACQUIRE_LEASES, (s.group, s.topic, s.name, ms(s.lease_duration)))
        held = {int(r["partition_id"]): int(r["lease_epoch"]) for r in rows}
        gained, lost = self.holdings.set_leases(held, started + s.lease_duration)
        if gained or lost:
            log.info("%s holds %d partitions (+%d -%d)", s.name, len(held), len(gained), len(lost))
            self.control.wake.set()
        if self.metrics:
            self.metrics.lag(link, held)


class FetchLoop:
    """``make(row)`` is a fetched row as the handler's message (attached to its settlement)."""

    def __init__(
        self,
        settings: SubscriberSettings,
        control: Control,
        holdings: Holdings,
        tally: Tally,
        make: Callable[[dict[str, Any]], Message],
        runners: Runners,
        flusher: Flusher,
    ) -> None:
        self.settings, self.control, self.holdings = settings, control, holdings
        self.tally, self.make, self.runners = tally, make, runners
        self.flusher = flusher

    def __call__(self) -> None:
        s, control, holdings, flusher = self.settings, self.control, self.holdings, self.flusher
        link = control.link(s, "fetch")
        # the acks the next long poll carries (handed over by the flusher, see settle), and
        # their batch's number
        acks: list[Pending] = []
        number = 0
        try:
            while not control.stopping.is_set():
                room = s.max_buffered - holdings.buffered
                if not holdings.holding(time.monotonic()) or room <= 0:
                    if acks:
                        flusher.give_back(acks)
                        acks = []
                    self.idle()
                    continue
                fetched_at = time.monotonic()
                # a flush from now on may free a partition this fetch does not serve (see settle)
                control.wake.clear()
                try:
                    # a long poll: the server acks what it carries, then waits up to
                    # poll_interval for work to appear on the held partitions, looking every
                    # probe_interval (10 ms), so a message is fetched about that soon after its
                    # commit
                    answers = link.results(
                        _sql.FETCH_WAIT,
                        (
                            s.group,
                            s.topic,
                            s.name,
                            s.batch_size,
                            ms(s.visibility_timeout),
                            room,
                            ms(s.poll_interval),
                            ms(s.probe_interval),
                            codec.deliveries_json([p.message for p in acks]) if acks else None,
                        ),
                    )
                except Error as exc:
                    if acks:
                        flusher.give_back(acks)
                        acks = []
                    if control.stopping.is_set():
                        break
                    log.error("%s: fetch failed: %s", s.name, exc)
                    self.idle()
                    continue
                rows = answers[0]
                if acks:
                    (done,) = answers[1]
                    flusher.carried(
                        number, int(done["settled"]), int(done["stale"]), int(done["dead_lettered"])
                    )
                    self.tally.count("acks_carried", len(acks))
                    acks = []
                if rows:
                    # (read before the messages go out: a flush that takes outcomes from now on
                    # may carry theirs)
                    taken = flusher.taken
                    # the server's deadline is at least this late: it read its clock after we sent
                    self.dispatch(rows, fetched_at + s.visibility_timeout)
                    acks, number = self.settle(rows, taken)
                # the server has already waited when nothing came; after a partial fetch, the
                # next long poll returns as soon as more work appears
                if not rows and time.monotonic() - fetched_at < s.poll_interval / 2:
                    # the server saw work it could not deliver yet: do not spin on it
                    self.idle()
        finally:
            if acks:
                flusher.give_back(acks)
            link.close()

    def idle(self) -> None:
        self.control.wake.wait(self.settings.poll_interval)
        self.control.wake.clear()

    def settle(self, rows: list[dict[str, Any]], taken: int) -> tuple[list[Pending], int]:
        """After a fetch that served every partition held, wait for a flush of their outcomes
        before the next long poll, up to ``poll_interval``, or for the flusher to hand over a
        batch of acks, which the next long poll carries (returned, with the batch's number;
        ``([], 0)`` when none came): until their messages are settled
        those partitions have nothing to deliver (a partition's next batch waits for its last
        one), so the server's probe, every probe_interval, would only find the flush late and cost a
        read each time. The flush waited for is one that took its outcomes after the fetch's
        messages were handed out (``taken``: the flusher's batches taken before that): a flush
        that ends while the fetch is still out carries earlier outcomes, and its wake-up alone
        would send the next long poll out before this fetch's outcomes are flushed. A fetch that
        left a held partition out polls at once, as that partition may get work any time, and
        so does the wait when the loop gains a partition."""
        served = {row["partition_id"] for row in rows}
        wake, until = self.control.wake, time.monotonic() + self.settings.poll_interval
        flusher = self.flusher
        if not served.issuperset(self.holdings.leases):
            return [], 0
        flusher.wait_to_carry()
        try:
            while (
                flusher.flushed <= taken
                and not flusher.handed
                and served.issuperset(self.holdings.leases)
                and not self.control.stopping.is_set()
            ):
                left = until - time.monotonic()
                if left <= 0:
                    break
                wake.wait(left)
                wake.clear()
        finally:
            carried = flusher.carry()
        return carried

    def dispatch(self, rows: list[dict[str, Any]], deadline: float) -> None:
        messages = [self.make(r) for r in rows]
        self.tally.delivered(len(messages))
        for pid, generation in self.holdings.add(messages, deadline):
            self.runners.start(pid, generation)


class KeepaliveLoop:
    """Keep every held message invisible to others while the subscriber lives (G14), release
    buffered messages of partitions it lost, and give up on handlers past max_handler_time.
    Runs until the flusher is ``final`` (stop)."""

    def __init__(
        self,
        settings: SubscriberSettings,
        control: Control,
        holdings: Holdings,
        settlement: Settlement,
        tally: Tally,
        runners: Runners,
        final: threading.Event,
    ) -> None:
        self.settings, self.control, self.holdings = settings, control, holdings
        self.settlement, self.tally, self.runners, self.final = settlement, tally, runners, final

    def __call__(self) -> None:
        link = self.control.link(self.settings, "keepalive")
        tick = min(0.5, self.settings.visibility_timeout / 6)
        last = time.monotonic()
        try:
            while not self.final.wait(tick):
                now = time.monotonic()
                self.give_up_overdue(now)
                for message in self.holdings.moved(now):
                    # its partition is no longer ours under its epoch: its new holder would wait
                    self.settlement.expire(message)
                if now - last >= self.settings.visibility_timeout / 3:
                    last = now
                    self.extend_held(link)
        finally:
            link.close()

    def give_up_overdue(self, now: float) -> None:
        for held, generation in self.holdings.overdue(now):
            self.settlement.give_up(held.message)
            self.runners.replace(held.worker)
            # the partition goes on: its next message in a new runner
            self.runners.start(held.message.partition_id, generation)

    def extend_held(self, link: Link) -> None:
        s, held = self.settings, self.holdings.all_held()
        if not held:
            return
        sent = time.monotonic()
        deliveries = codec.deliveries_json(h.message for h in held)
        try:
            link.rows(_sql.EXTEND, (s.group, deliveries, ms(s.visibility_timeout)))
        except Error as exc:
            log.error("%s: extending %d messages failed: %s", s.name, len(held), exc)
            return
        self.holdings.extended(held, sent + s.visibility_timeout)
        self.tally.count("keepalives")


def flush_loop(control: Control, settings: SubscriberSettings, flusher: Flusher) -> None:
    link = control.link(settings, "flush")
    try:
        flusher.run(link)
    finally:
        link.close()
