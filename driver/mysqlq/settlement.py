"""Settlement: the one owner of a subscriber's outcomes.

Every outcome of a delivered message goes through :class:`Settlement`, whoever decides it:

* the handler, through its message (``msg.ack()``, ``nack()``, ``extend()``, ``dead_letter()``,
  ``transaction()``): :class:`~mysqlq.message.Message` calls the four methods of its
  :class:`~mysqlq.message.Settler` protocol, which this class implements;
* the ack policy, once a handler returned or raised (:meth:`Settlement.handled`), before it runs
  (``ACK_FIRST``: :meth:`Settlement.ack_first`), or when it ran past ``max_handler_time``
  (:meth:`Settlement.give_up`), with the retry strategy's delay (:mod:`mysqlq.policy`,
  :mod:`mysqlq.retry`);
* the subscriber's loops, for messages that must not start (:meth:`Settlement.expire`) or are
  handed back at stop (:meth:`Settlement.release`): a release costs no attempt (G14).

Outcomes are queued for the flush loop (:class:`~mysqlq.flusher.Flusher`), which batches them;
the database fences a stale one by its delivery token and lease epoch (G4). Here, a handler that
was given up settles nothing more: its message was settled for it already, and what it sends
later is dropped and counted (``late_outcomes``). An outcome in the caller's transaction runs
at once on that connection (:mod:`mysqlq.effects`); the database alone fences it there.

Its collaborators are passed in: what the subscriber holds (:class:`~mysqlq.holdings.Holdings`,
which knows the given-up deliveries), the flusher, the counters (:class:`~mysqlq.tally.Tally`),
and the connections a handler settles on itself (:class:`Sessions`: one per handler thread in
the sync subscriber, a pool behind an executor in :mod:`mysqlq.aio`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from mysqlq import _sql, codec, effects
from mysqlq.connection import execute_rows
from mysqlq.errors import Error
from mysqlq.flusher import COUNTED, Flusher, Pending
from mysqlq.holdings import Holdings
from mysqlq.message import Message, record_outcome
from mysqlq.policy import AckPolicy, after_handler
from mysqlq.retry import RetryStrategy
from mysqlq.settings import ms, positive
from mysqlq.tally import Tally

__all__ = ["Sessions", "Settlement", "clock", "where"]

log = logging.getLogger("mysqlq.subscriber")

# what handler time is measured with: a runner reads it when a handler starts (handled() then)
clock = time.perf_counter


def where(m: Message) -> str:
    """A message, for a log line."""
    return f"topic={m.topic} key={m.key} offset={m.offset} id={m.id} attempt={m.attempt}"


class Sessions(Protocol):
    """The connections a handler settles on itself (``msg.transaction()``, ``ACK_FIRST``)."""

    def connection(self) -> Any:
        """The calling thread's session (READ COMMITTED; :func:`mysqlq.effects.session`)."""

    def discard(self) -> None:
        """Drop the calling thread's session: it failed."""

    def transaction(self, message: Message, ack: Callable[[Message, Any], None]) -> Any:
        """The handler's transaction on ``message``, which calls ``ack(message, conn)`` on a
        clean exit (:func:`mysqlq.effects.transaction`); sync or async, as the handler is."""


class Settlement:
    """The outcomes of one subscriber's messages: see the module documentation.

    ``group`` and ``name`` are the subscriber's; ``policy`` and ``retry`` decide what follows a
    handler; ``max_handler_time`` is only named in what a given-up handler's message carries."""

    def __init__(
        self,
        *,
        group: str,
        name: str,
        policy: AckPolicy,
        retry: RetryStrategy,
        max_handler_time: float,
        holdings: Holdings,
        flusher: Flusher,
        tally: Tally,
        sessions: Sessions,
    ) -> None:
        self.group = group
        self.name = name
        self.policy = policy
        self.retry = retry
        self.max_handler_time = max_handler_time
        self._holdings = holdings
        self._flusher = flusher
        self._tally = tally
        self._sessions = sessions
        # a handler that returns leaves an ack to send (every policy but ACK_FIRST, which acked
        # before, and MANUAL, which leaves it to the handler): handled()'s short way
        self._acks_on_return = policy not in (AckPolicy.ACK_FIRST, AckPolicy.MANUAL)

    # what a message asks: the Settler protocol of mysqlq.message --------------------------------

    def settle(
        self,
        message: Message,
        outcome: str,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        """Queue ``outcome`` (``ack``, ``nack`` after ``delay`` seconds or the retry strategy's,
        ``dead_letter``) for the flush loop, unless the handler was given up."""
        if self._fenced(message, outcome):
            return
        if outcome == "ack":
            self._flusher.enqueue(Pending("ack", message))
            return
        error = codec.error_text(error)
        if outcome == "nack":
            delay_ms = self._delay_ms(message, delay)
            self._flusher.enqueue(Pending("nack", message, delay_ms=delay_ms, error=error))
        elif outcome == "dead_letter":
            self._flusher.enqueue(Pending("dead_letter", message, error=error))
        else:
            self._flusher.enqueue(Pending("ack", message))

    def extend(self, message: Message, seconds: float) -> None:
        """Keep the message invisible, and its handler from being given up, ``seconds`` more."""
        positive("seconds", seconds)
        if self._fenced(message, "extend"):
            return
        # a handler that says it needs longer gets it: visibility and give-up deadline
        self._holdings.extend_running(message, time.monotonic() + seconds)
        self._flusher.enqueue(Pending("extend", message, delay_ms=ms(seconds)))

    def settle_in(
        self,
        message: Message,
        outcome: str,
        conn: Any,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        """In the caller's transaction on ``conn``: no local fencing, the database decides (a
        given-up handler's late settle is stale there once its nack landed, and raises)."""
        if message.settled:
            raise Error(f"message {message.id!r} is already settled")
        delay_ms = self._delay_ms(message, delay)
        effects.settle_in(conn, self.group, message, outcome, delay_ms=delay_ms, error=error)
        record_outcome(message, outcome)
        self._tally.count(f"{COUNTED[outcome]}_in_transaction")

    def transaction(self, message: Message) -> Any:
        """A transaction on the subscriber's database that acks ``message`` when it commits."""
        return self._sessions.transaction(message, self._ack_in)

    def _ack_in(self, message: Message, conn: Any) -> None:
        self.settle_in(message, "ack", conn)

    # what the subscriber asks -------------------------------------------------------------------

    @property
    def acks_first(self) -> bool:
        """``AckPolicy.ACK_FIRST``: each message is acked (:meth:`ack_first`) before it runs."""
        return self.policy is AckPolicy.ACK_FIRST

    def ack_first(self, message: Message) -> bool:
        """Ack on the calling thread's own session before the handler runs. False (do not run
        it) when the ack was refused as stale or could not be sent: the message then runs at
        most once, elsewhere or never."""
        deliveries = codec.deliveries_json([message])
        try:
            (row,) = execute_rows(self._sessions.connection(), _sql.ACK, (self.group, deliveries))
        except Error as exc:
            self._sessions.discard()
            log.warning("%s: ack before the handler failed, not run: %s", self.name, exc)
            return False
        if int(row["settled"]) != 1:
            self._tally.count("stale")
            return False
        record_outcome(message, "ack")
        self._tally.count("acked")
        return True

    def handled(self, message: Message, started: float, exc: BaseException | None = None) -> None:
        """A handler that started at ``started`` (:func:`clock`) returned (``exc`` None) or
        raised ``exc``: what it left unsettled is settled as the ack policy says."""
        self._tally.handler_ran(clock() - started)
        if exc is None and self._acks_on_return:
            # the common case, the short way: what after_handler() and conclude() would do
            if not message.settled:
                record_outcome(message, "ack")
                self.settle(message, "ack")
            return
        text = None
        if exc is not None:
            self._tally.count("handler_errors")
            text = codec.error_text(f"{type(exc).__name__}: {exc}")
            log.warning("handler failed on %s: %s", where(message), text)
        if message.settled:
            return
        decision = after_handler(self.policy, self.retry, message.attempt, exc is not None)
        if decision.outcome is not None:
            self.conclude(message, decision.outcome, delay=decision.delay, error=text)

    def conclude(
        self,
        message: Message,
        outcome: str,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        """Settle a message on its handler's behalf, unless the handler settled it already."""
        if message.settled:
            return
        record_outcome(message, outcome)
        self.settle(message, outcome, delay=delay, error=error)

    def give_up(self, message: Message) -> None:
        """Its handler ran past ``max_handler_time`` (:meth:`Holdings.overdue` fenced it): the
        message counts one failed attempt, settled as the ack policy says."""
        self._tally.given_up()
        log.warning(
            "%s: handler exceeded max_handler_time (%gs) on %s; its message is settled as its"
            " ack policy says (nacked by default) and its thread replaced",
            self.name,
            self.max_handler_time,
            where(message),
        )
        decision = after_handler(
            self.policy, self.retry, message.attempt, failed=True, given_up=True
        )
        if decision.outcome is not None:
            error = f"handler exceeded max_handler_time ({self.max_handler_time:g}s)"
            self._flusher.enqueue(Pending(decision.outcome, message, ms(decision.delay), error))

    def expire(self, message: Message) -> None:
        """A buffered message that must not start (its visibility, lease or lease epoch is gone):
        back to the group at once, its attempt given back."""
        self._tally.count("expired_unstarted")
        self.release(message)

    def release(self, message: Message) -> None:
        """Hand a message that did not start back to the group (at stop), its attempt given
        back."""
        self._flusher.enqueue(Pending("release", message))

    # fencing ------------------------------------------------------------------------------------

    def _fenced(self, message: Message, outcome: str) -> bool:
        """A handler that was given up settles nothing: its message was settled already."""
        fenced = self._holdings.fenced(message)
        if fenced:
            self._tally.count("late_outcomes")
            log.warning(
                "%s: dropped the %s of a handler given up on %s", self.name, outcome, where(message)
            )
        return fenced

    def _delay_ms(self, message: Message, delay: float | None) -> int:
        """A nack's delay: ``delay`` seconds, or the retry strategy's after this attempt."""
        return ms(self.retry.delay(message.attempt)) if delay is None else ms(delay)
