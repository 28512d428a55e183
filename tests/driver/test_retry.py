"""The retry strategies' arithmetic (mysqlq.retry): delays, jitter bounds, ceilings, the total
budget, and bad arguments. What the subscriber does with them is test_ack_policy.py's, on a
real server."""

from __future__ import annotations

import pytest

import mysqlq
from mysqlq import retry
from mysqlq.policy import strategy


def test_constant_linear_and_exponential_delays() -> None:
    assert retry.Constant(2.5).delays(3) == [2.5, 2.5, 2.5]
    assert retry.Linear(1.0, 2.0).delays(4) == [1.0, 3.0, 5.0, 7.0]
    assert retry.Linear(1.0, 2.0, max_delay=4.0).delays(4) == [1.0, 3.0, 4.0, 4.0]
    exp = retry.Exponential(0.5, 3.0, max_delay=10.0, jitter=False)
    assert exp.delays(5) == [0.5, 1.5, 4.5, 10.0, 10.0]
    # no overflow far past the ceiling
    assert exp.delay(10_000) == 10.0


def test_jitter_draws_between_half_and_all_of_the_delay() -> None:
    exp = retry.Exponential(1.0, 2.0, max_delay=300.0, jitter=True)
    draws = [exp.delay(4) for _ in range(200)]
    assert all(4.0 <= d <= 8.0 for d in draws)
    assert len(set(draws)) > 100  # they differ


def test_max_total_delay_gives_up_once_the_nominal_delays_pass_it() -> None:
    linear = retry.Linear(5.0, 5.0, max_total_delay=20.0)
    assert [linear.next_delay(n) for n in (1, 2, 3)] == [5.0, 10.0, None]  # 5+10+15 > 20
    assert retry.Constant(1.0, max_total_delay=3.0).next_delay(3) == 1.0
    assert retry.Constant(1.0, max_total_delay=3.0).next_delay(4) is None
    assert retry.NoRetry().next_delay(1) is None


def test_the_default_strategy_is_the_old_backoff() -> None:
    default = strategy(None)
    assert isinstance(default, retry.Exponential) and default.jitter
    assert (default.initial, default.multiplier, default.max_delay) == (1.0, 2.0, 300.0)
    old = strategy(None, retry_backoff=0.25, max_backoff=2.0)
    assert [old.nominal(n) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 2.0, 2.0]


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: retry.Constant(-1), "delay"),
        (lambda: retry.Constant(float("inf")), "delay"),
        (lambda: retry.Linear(1, "2"), "step"),
        (lambda: retry.Exponential(1, 0.5), "multiplier"),
        (lambda: retry.Exponential(1, True), "multiplier"),
        (lambda: retry.Exponential(max_delay=-3), "max_delay"),
        (lambda: retry.Constant(1, max_total_delay=-1), "max_total_delay"),
    ],
)
def test_bad_arguments_name_what_was_wrong(make, named) -> None:
    with pytest.raises(mysqlq.InvalidArgument, match=named):
        make()
