"""The workshop's commands on the ``mysqlq`` command line: ``mysqlq demo`` and ``mysqlq bench``.

``mysqlq.cli`` adds every command of the entry point group ``mysqlq.commands`` (tools/
pyproject.toml declares these two), so they are there where the workshop is installed (this
repository's .venv, CI) and absent from a user's ``pip install mysqlq``.
"""

from mysqlq_dev.commands.bench import bench
from mysqlq_dev.commands.demo import demo

__all__ = ["bench", "demo"]
