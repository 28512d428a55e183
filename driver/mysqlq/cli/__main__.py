"""``python -m mysqlq.cli``: the same as the ``mysqlq`` console script."""

from mysqlq.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
