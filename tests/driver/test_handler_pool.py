"""The handler pool keeps its size when a hung handler's thread is given up (G14), and the
subscriber refuses a bad max_handler_time before it touches the database."""

from __future__ import annotations

import threading

import pytest

import mysqlq
from mysqlq.handler_pool import HandlerPool


def test_a_replaced_thread_is_retired_and_the_pool_keeps_working():
    pool = HandlerPool(1, name="test-pool")
    hang = threading.Event()
    running: list[threading.Thread] = []
    started = threading.Event()

    def hung() -> None:
        running.append(threading.current_thread())
        started.set()
        hang.wait(30)

    done = threading.Event()
    pool.submit(hung)
    assert started.wait(5)
    # with its only thread stuck, a new task waits
    pool.submit(done.set)
    assert not done.wait(0.2)
    pool.replace(running[0])
    assert done.wait(5), "the replacement thread did not take the waiting task"
    assert pool.size == 1 and pool.retired == 1
    # the retired thread exits once its handler returns; it takes no more tasks
    hang.set()
    running[0].join(5)
    assert not running[0].is_alive()
    assert pool.size == 1 and pool.retired == 0
    again = threading.Event()
    pool.submit(again.set)
    assert again.wait(5)
    pool.shutdown()


def test_replace_ignores_a_thread_that_is_not_a_worker():
    pool = HandlerPool(2)
    pool.replace(threading.current_thread())
    pool.replace(None)
    assert pool.size == 2 and pool.retired == 0
    pool.shutdown()


@pytest.mark.parametrize("value", [0, -1, "10", None, True])
def test_max_handler_time_must_be_a_positive_number(value):
    with pytest.raises(mysqlq.InvalidArgument, match="max_handler_time"):
        mysqlq.Subscriber(
            "mysql://nobody@127.0.0.1:1/none",
            topic="t",
            group="g",
            handler=print,
            max_handler_time=value,
        )
