"""The spark-submit application of ``mysqlq spark``: give spark-submit this file, then the
arguments of ``mysqlq spark``::

    spark-submit --master yarn \\
        "$(python -c 'import mysqlq.cli.spark_submit as s; print(s.__file__)')" \\
        archive --dsn mysql://… --path s3a://bucket/mysqlq-archive
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    from mysqlq.cli import main as cli

    cli(["spark", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    # Run as a file, its directory (this package's) comes first on sys.path, where the command
    # modules would shadow top-level modules of the same name: take it off.
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and sys.path[0] and os.path.realpath(sys.path[0]) == here:
        del sys.path[0]
    main()
