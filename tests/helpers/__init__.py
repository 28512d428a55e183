"""Plain modules the tests import (``from helpers.support import call``); no tests, no fixtures.

``tests/`` is on ``sys.path`` through ``pythonpath = ["tests"]`` in pyproject.toml, so these
import the same way from every layer's folder and under any pytest import mode.
"""
