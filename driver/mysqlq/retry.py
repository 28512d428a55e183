"""Retry strategies: how long a message whose handler failed waits before its next attempt.

The delay goes into the nack (``queue_nack``'s ``p_delay_ms``), so the database's clock holds the
message back, whichever subscriber fetches it next. A strategy may also give up: after
``max_total_delay`` seconds of nominal delays, or at once (:class:`NoRetry`); the message then
goes to the dead-letter queue with the handler's error. ``max_attempts`` (the topic's, or the
subscriber's) still caps the attempts whatever the strategy says.

>>> Exponential(initial=1.0, multiplier=2.0, max_delay=30.0, jitter=False).delays(6)
[1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
>>> Linear(initial=5.0, step=5.0, max_total_delay=20.0).next_delay(3) is None  # 5+10+15 > 20
True

Per-key order (G6) holds for first deliveries: a retried message waits its delay while later
messages of its key go on (G7). For strict order, consume with ``batch_size=1`` and retry inside
the handler (docs/retries.md).
"""

from __future__ import annotations

import math
import random

from mysqlq.errors import InvalidArgument

__all__ = ["Constant", "Exponential", "Linear", "NoRetry", "RetryStrategy"]


def _seconds(name: str, value: float | None, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgument(f"{name} must be a number of seconds, 0 or more, not {value!r}")
    if math.isinf(value):
        raise InvalidArgument(f"{name} must be finite, not {value!r}")
    return float(value)


class RetryStrategy:
    """The base of the strategies: :meth:`nominal` is the delay after the failure of attempt
    ``n`` (1-based) before jitter; :meth:`next_delay` is what the nack carries, or None to
    dead-letter."""

    def __init__(self, *, max_total_delay: float | None = None) -> None:
        self.max_total_delay = _seconds("max_total_delay", max_total_delay, optional=True)

    def nominal(self, attempt: int) -> float:
        raise NotImplementedError

    def delay(self, attempt: int) -> float:
        """The delay after the failure of ``attempt`` (jitter applied where the strategy has it)."""
        return self.nominal(attempt)

    def next_delay(self, attempt: int) -> float | None:
        """The delay before the next attempt, or None when the strategy gives up: the nominal
        delays of attempts 1..``attempt`` add up past ``max_total_delay``."""
        if self.max_total_delay is not None:
            total = sum(self.nominal(n) for n in range(1, max(1, attempt) + 1))
            if total > self.max_total_delay:
                return None
        return self.delay(attempt)

    def delays(self, attempts: int) -> list[float]:
        """The first ``attempts`` delays (for documentation and tests)."""
        return [self.delay(n) for n in range(1, attempts + 1)]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({fields})"


class Constant(RetryStrategy):
    """The same delay after every failure."""

    def __init__(self, delay: float = 1.0, *, max_total_delay: float | None = None) -> None:
        super().__init__(max_total_delay=max_total_delay)
        self.delay_s = _seconds("delay", delay)

    def nominal(self, attempt: int) -> float:
        return float(self.delay_s or 0.0)


class Linear(RetryStrategy):
    """``initial``, then ``step`` more after each failure, up to ``max_delay``."""

    def __init__(
        self,
        initial: float = 1.0,
        step: float = 1.0,
        *,
        max_delay: float | None = None,
        max_total_delay: float | None = None,
    ) -> None:
        super().__init__(max_total_delay=max_total_delay)
        self.initial = _seconds("initial", initial)
        self.step = _seconds("step", step)
        self.max_delay = _seconds("max_delay", max_delay, optional=True)

    def nominal(self, attempt: int) -> float:
        value = (self.initial or 0.0) + (self.step or 0.0) * max(0, attempt - 1)
        return value if self.max_delay is None else min(value, self.max_delay)


class Exponential(RetryStrategy):
    """``initial * multiplier ** (attempt - 1)``, up to ``max_delay``; with ``jitter`` each
    delay is drawn between half of it and all of it, so failed messages do not come back in
    step. The subscriber's default: ``Exponential(1.0, 2.0, 300.0, jitter=True)``."""

    def __init__(
        self,
        initial: float = 1.0,
        multiplier: float = 2.0,
        max_delay: float = 300.0,
        jitter: bool = True,
        *,
        max_total_delay: float | None = None,
    ) -> None:
        super().__init__(max_total_delay=max_total_delay)
        self.initial = _seconds("initial", initial)
        if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)):
            raise InvalidArgument(f"multiplier must be a number, 1 or more, not {multiplier!r}")
        if not 1 <= multiplier < math.inf:
            raise InvalidArgument(f"multiplier must be a number, 1 or more, not {multiplier!r}")
        self.multiplier = float(multiplier)
        self.max_delay = _seconds("max_delay", max_delay)
        self.jitter = bool(jitter)

    def nominal(self, attempt: int) -> float:
        initial, ceiling = self.initial or 0.0, self.max_delay or 0.0
        exponent = max(0, attempt - 1)
        # past the ceiling the power only overflows: stop computing it there
        growth = exponent * math.log(self.multiplier or 1.0)
        if initial and growth > math.log(ceiling / initial + 1):
            return ceiling
        return min(ceiling, initial * self.multiplier**exponent)

    def delay(self, attempt: int) -> float:
        base = self.nominal(attempt)
        return base * random.uniform(0.5, 1.0) if self.jitter else base


class NoRetry(RetryStrategy):
    """The first failure dead-letters the message."""

    def __init__(self) -> None:
        super().__init__(max_total_delay=None)

    def nominal(self, attempt: int) -> float:
        return 0.0

    def next_delay(self, attempt: int) -> float | None:
        return None
