"""Fixtures of the driver tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.procs import Harness


@pytest.fixture
def h(db: Any, tmp_path: Path) -> Any:
    harness = Harness(db, tmp_path)
    try:
        yield harness
    finally:
        harness.stop_all()
        harness.client.close()
