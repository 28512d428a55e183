"""Where the migrations are: the packaged copy, or the source tree's in a checkout."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MIGRATIONS_ENV", "migrations_dir"]

MIGRATIONS_ENV = "MYSQLQ_MIGRATIONS_DIR"


def migrations_dir() -> Path:
    """The migrations directory: ``$MYSQLQ_MIGRATIONS_DIR`` if set, else the packaged
    ``mysqlq/_migrations``, else the source tree's ``migrations/``."""
    override = os.environ.get(MIGRATIONS_ENV)
    if override:
        return Path(override).resolve()
    package = Path(__file__).resolve().parents[1]  # mysqlq/
    packaged = package / "_migrations"
    if (packaged / "env.py").is_file():
        return packaged
    source = package.parents[1] / "migrations"  # an editable install: driver/mysqlq/
    if (source / "env.py").is_file():
        return source
    raise FileNotFoundError("mysqlq migrations directory not found (broken install?)")
