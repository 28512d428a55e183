"""Fixtures of the Celery tests: kombu connections to the test's database over the mysqlq
transport."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("kombu")

import mysqlq.celery


@pytest.fixture
def broker_url(dsn: str) -> str:
    """The test database as a Celery broker URL (mysqlq://...)."""
    return "mysqlq://" + dsn.split("://", 1)[1]


@pytest.fixture
def kombu_connection(broker_url: str) -> Iterator[Callable[..., Any]]:
    """Factory: ``kombu_connection(**transport_options)`` -> an open kombu Connection over the
    mysqlq transport (closed after the test)."""
    from kombu import Connection

    assert mysqlq.celery.ALIAS == "mysqlq"
    with contextlib.ExitStack() as stack:

        def make(**options: Any) -> Any:
            conn = Connection(broker_url, transport_options=options)
            conn.connect()
            stack.callback(conn.release)
            return conn

        yield make
