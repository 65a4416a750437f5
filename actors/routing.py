"""Which actor answers a message: the one routing table, derived from the message unions.

Every message type is in one actor's union, and :data:`OWNERS` names each union's actor
once (:data:`WriterTakes` and :data:`ReaderTakes` gather the writer's and the readers'):

* the **writer** (the one write connection): the public
  :data:`~relaystore.domain.messages.WriterMessage`, and what projectors
  (:data:`~relaystore.actors.internal.ProjectorWriterMessage`) and the maintenance desk
  (:data:`~relaystore.actors.internal.DeskWriterMessage`) ask of it;
* a session's **projector**: :data:`~relaystore.domain.messages.ProjectorMessage`;
* a **reader**: the public :data:`~relaystore.domain.messages.ReaderMessage`, and what
  the actors (:data:`~relaystore.actors.internal.ProjectorReaderMessage`) and the desk
  (:data:`~relaystore.actors.internal.DeskReaderMessage`) read.

:data:`ROUTES` maps every type of those unions to its owner, so adding a message to a
union is all it takes to route it. :func:`owner_of` is the one question
:class:`~relaystore.actors.core.StoreCore` asks, to route a message and to choose its
fast paths; :data:`INTERNAL_MESSAGES` is what the table routes that the facades do not
take (:func:`~relaystore.actors.settings.check_message` refuses it by type).

Must not: hand anything over (the core does), or say what an actor does with a message
(its own dispatch does: :func:`~relaystore.actors.writer.perform`,
:func:`~relaystore.actors.reader.answer`, the projector's ``handle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args

from ..domain.messages import PUBLIC_MESSAGES, ProjectorMessage, ReaderMessage, WriterMessage
from .internal import (
    DeskReaderMessage,
    DeskWriterMessage,
    ProjectorReaderMessage,
    ProjectorWriterMessage,
)

__all__ = [
    "INTERNAL_MESSAGES",
    "OWNERS",
    "ROUTES",
    "Owner",
    "ReaderTakes",
    "WriterTakes",
    "message_types",
    "owner_of",
]

Owner = Literal["writer", "projector", "reader"]
"""The actors a message can be routed to."""

WriterTakes = WriterMessage | ProjectorWriterMessage | DeskWriterMessage
"""Every message the writer answers (:func:`~relaystore.actors.writer.perform` takes)."""
ReaderTakes = ReaderMessage | ProjectorReaderMessage | DeskReaderMessage
"""Every message a reader answers (each a case of :func:`~relaystore.actors.reader.answer`)."""

OWNERS: tuple[tuple[Owner, Any], ...] = (
    ("writer", WriterTakes),
    ("projector", ProjectorMessage),
    ("reader", ReaderTakes),
)
"""Each actor with the union of what it answers: the only place routing is written."""


def message_types(union: Any) -> tuple[type[Any], ...]:
    """The message types of ``union`` (a union of one type is that type)."""
    return get_args(union) or (union,)


def _derived_routes() -> dict[type[Any], Owner]:
    routes: dict[type[Any], Owner] = {}
    for owner, union in OWNERS:
        for kind in message_types(union):
            if kind in routes:
                raise TypeError(
                    f"{kind.__name__} is routed twice: to the {routes[kind]} and the {owner}"
                )
            routes[kind] = owner
    return routes


ROUTES: Mapping[type[Any], Owner] = MappingProxyType(_derived_routes())
"""Every message type the store's actors answer, with the one that answers it."""

INTERNAL_MESSAGES: tuple[type[Any], ...] = tuple(
    kind for kind in ROUTES if kind not in set(PUBLIC_MESSAGES)
)
"""Every message the public ``ask`` and ``tell`` refuse by type: the actors' own."""


def owner_of(message: object) -> Owner:
    """The actor that answers ``message`` (an instance of a subclass, as its class's).

    A type the table does not hold goes to the writer, which answers it with
    :class:`~relaystore.actors.envelope.Unanswerable` naming it (the facades never send
    one: :func:`~relaystore.actors.settings.check_message` refuses it first).
    """
    for kind in type(message).__mro__:
        owner = ROUTES.get(kind)
        if owner is not None:
            return owner
    return "writer"
