"""Celery on mysqlq: the kombu transport (mysqlq.celery) in-process, and Celery workers as real
processes.

This folder is the package ``celery`` to pytest (``tests/`` is on its path), so in the pytest
process ``import celery`` finds it, not Celery. The tests here therefore never import Celery:
they drive kombu directly, and run Celery only in subprocesses (``worker_app.py``, with this
folder itself on ``PYTHONPATH``, where ``celery`` is Celery again). A pytest plugin that imports
Celery into the pytest process (pytest-celery) must be left out (``-p no:celery``).
"""
