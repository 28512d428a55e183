"""Fixtures of the driver tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.procs import Harness

import mysqlq


@pytest.fixture
def h(db: Any, tmp_path: Path) -> Any:
    harness = Harness(db, tmp_path)
    try:
        yield harness
    finally:
        harness.stop_all()
        harness.client.close()


@pytest.fixture
def client(dsn: str) -> Any:
    """A mysqlq.Client on the test's database, closed after the test."""
    with mysqlq.connect(dsn) as c:
        yield c
