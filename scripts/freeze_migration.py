#!/usr/bin/env python3
"""Freeze procedures/ and sql/ into a new migration revision whose snapshot holds only what
changed (--message; --amend rewrites the newest), or print the full schema at a revision, folded
from the snapshots (--print-head, --print NNNN, --diff NNNN). See mysqlq.schema.freeze."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

try:
    from mysqlq.schema.freeze import freeze_main
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, str(ROOT / "driver"))
    from mysqlq.schema.freeze import freeze_main

if __name__ == "__main__":
    sys.exit(freeze_main(root=ROOT))
