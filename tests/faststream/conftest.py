"""Fixtures of the FastStream tests (``mysqlq.faststream``, docs/faststream.md).

This layer folder has no ``__init__.py``, unlike the others, on purpose: ``pyproject.toml`` puts
``tests/`` on ``sys.path``, so a package ``tests/faststream`` would be importable as
``faststream`` and hide the FastStream library itself. As plain folders, its modules import as
top-level modules, hence their names: ``test_faststream_*.py``, ``fs_orders_app.py``.

``mode``: the tests written once for both of FastStream's ways of testing an app run twice,
``memory`` (``TestMySQLQBroker(broker)``, no server) and ``real``
(``TestMySQLQBroker(broker, with_real=True)`` on the test's own database).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("faststream")


@pytest.fixture(params=["memory", "real"])
def mode(request: Any) -> str | None:
    """None in memory; the DSN of a fresh database for the real mode."""
    if request.param == "memory":
        return None
    return request.getfixturevalue("dsn")
