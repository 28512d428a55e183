"""Celery on mysqlq: a kombu transport whose queues are mysqlq topics and consumer groups.

>>> import mysqlq.celery            # registers the transport alias "mysqlq" with kombu
>>> app = Celery("proj", broker="mysqlq://app:secret@db:3306/app")

kombu looks a URL's scheme up in ``kombu.transport.TRANSPORT_ALIASES`` (it has no entry points
for transports), so the module that creates the Celery app imports ``mysqlq.celery`` first; or,
without the import, the app names the class: ``broker_transport =
"mysqlq.celery.transport:Transport"``. See docs/celery.md.

This subpackage belongs to the ``mysqlq`` distribution's ``celery`` extra (kombu); ``import
mysqlq`` never loads it.
"""

from __future__ import annotations

from kombu import transport as _kombu_transport

__all__ = ["ALIAS", "TRANSPORT", "register"]

ALIAS = "mysqlq"
TRANSPORT = "mysqlq.celery.transport:Transport"


def register(alias: str = ALIAS) -> None:
    """Let kombu (and so Celery) resolve ``<alias>://`` URLs to this transport."""
    _kombu_transport.TRANSPORT_ALIASES[alias] = TRANSPORT
    _kombu_transport._transport_cache.pop(alias, None)


register()
