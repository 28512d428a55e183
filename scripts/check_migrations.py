#!/usr/bin/env python3
"""Fail (exit 1) when a migration snapshot differs from its revision's snapshot_sha256, when
the snapshots (the baseline and one delta per revision) do not fold, or, with a unified diff,
when procedures/ and sql/ differ from the schema they fold into at head (see
mysqlq.schema.freeze).  Run as a script or as ``python -m scripts.check_migrations``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

try:
    from mysqlq.schema.freeze import check_main
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, str(ROOT / "driver"))
    from mysqlq.schema.freeze import check_main

if __name__ == "__main__":
    sys.exit(check_main(root=ROOT))
