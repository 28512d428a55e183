"""Handlers by kind: ``Subscriber(handlers={"order.created": f, "*": g})``.

A message goes to the handler of its ``kind``; one whose kind has no handler goes to the ``"*"``
handler, and without one it is dead-lettered with the reason ``no handler for kind <kind>``
(``no handler for messages without a kind``), whatever the ack policy: no handler would ever
take it. Works for plain functions and for
coroutine functions alike (the router returns what the handler returns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mysqlq.errors import InvalidArgument

__all__ = ["ANY_KIND", "KindRouter", "handler_for"]

ANY_KIND = "*"


class KindRouter:
    """A handler that calls the handler of each message's kind."""

    def __init__(self, handlers: Mapping[str, Callable[[Any], Any]]) -> None:
        if not isinstance(handlers, Mapping) or not handlers:
            raise InvalidArgument("handlers must be a non-empty mapping of kind to handler")
        for kind, fn in handlers.items():
            if not isinstance(kind, str) or not kind:
                raise InvalidArgument(f"handlers: a kind must be a non-empty str, not {kind!r}")
            if not callable(fn):
                raise InvalidArgument(f"handlers: the handler of kind {kind!r} is not callable")
        self.handlers = dict(handlers)
        self.fallback = self.handlers.get(ANY_KIND)

    def __call__(self, message: Any) -> Any:
        fn = self.handlers.get(message.kind) if message.kind is not None else None
        fn = fn or self.fallback
        if fn is None:
            what = "messages without a kind" if message.kind is None else f"kind {message.kind}"
            message.dead_letter(f"no handler for {what}")
            return None
        return fn(message)


def handler_for(
    handler: Callable[[Any], Any] | None,
    handlers: Mapping[str, Callable[[Any], Any]] | None,
    batch_handler: Callable[[Any], Any] | None = None,
) -> Callable[[Any], Any] | None:
    """The subscriber's one handler, from exactly one of ``handler`` and ``handlers``; None
    with a ``batch_handler`` (which takes the place of both)."""
    if batch_handler is not None:
        if handler is not None or handlers is not None:
            raise InvalidArgument(
                "give either batch_handler or handler/handlers, not both (a batch handler "
                "settles lists of messages; route by kind inside it)"
            )
        if not callable(batch_handler):
            raise InvalidArgument("batch_handler must be callable")
        return None
    if (handler is None) == (handlers is None):
        raise InvalidArgument("give exactly one of handler and handlers")
    if handlers is not None:
        return KindRouter(handlers)
    if not callable(handler):
        raise InvalidArgument("handler must be callable")
    return handler
