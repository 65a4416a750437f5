"""Which actor answers a message is written once: :mod:`relaystore.actors.routing`
derives its table from the message unions, and the core routes by it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any, get_args

import pytest

from relaystore import EventStore, LoadState, ObserveRelayEvents, Reproject, SaveSession
from relaystore.actors import internal, routing
from relaystore.actors.envelope import Unanswerable
from relaystore.actors.internal import (
    DeskReaderMessage,
    DeskWriterMessage,
    LoadAuditView,
    LoadProjection,
    ProjectorReaderMessage,
    ProjectorWriterMessage,
)
from relaystore.actors.routing import INTERNAL_MESSAGES, OWNERS, ROUTES, message_types, owner_of
from relaystore.domain import messages, reads, search
from relaystore.domain.messages import (
    PUBLIC_MESSAGES,
    DeleteSession,
    ProjectorMessage,
    ReaderMessage,
    Request,
    WriterMessage,
)
from relaystore.testing import example_session

UNIONS: dict[str, tuple[Any, ...]] = {
    "writer": (WriterMessage, ProjectorWriterMessage, DeskWriterMessage),
    "projector": (ProjectorMessage,),
    "reader": (ReaderMessage, ProjectorReaderMessage, DeskReaderMessage),
}
"""Each actor's unions, as the modules that define the messages gather them."""


def _defined_in(module: ModuleType, kinds: Any) -> set[type[Any]]:
    return {
        value
        for value in vars(module).values()
        if inspect.isclass(value) and value.__module__ == module.__name__ and kinds(value)
    }


def _every_message_type() -> set[type[Any]]:
    """Every message class the package defines: the public ``Request`` s (reply types
    are plain Structs) and the actors' own dataclasses."""
    public = set().union(
        *(
            _defined_in(module, lambda kind: issubclass(kind, Request) and kind is not Request)
            for module in (messages, reads, search)
        )
    )
    return public | _defined_in(internal, dataclasses.is_dataclass)


def test_every_public_message_routes_to_exactly_one_actor() -> None:
    for kind in PUBLIC_MESSAGES:
        owners = [owner for owner, union in OWNERS if kind in message_types(union)]
        assert len(owners) == 1, kind.__name__
        assert ROUTES[kind] == owners[0]
    assert len(set(PUBLIC_MESSAGES)) == len(PUBLIC_MESSAGES)


def test_the_table_is_the_unions() -> None:
    """Adding a message to a union is enough: the table holds exactly the unions' types,
    each with the actor of its union."""
    expected = {
        kind: owner
        for owner, unions in UNIONS.items()
        for union in unions
        for kind in (get_args(union) or (union,))
    }
    assert dict(ROUTES) == expected
    assert set(dict(OWNERS)) == set(UNIONS)


def test_every_message_the_package_defines_is_routed() -> None:
    """A message class left out of every union would reach no actor (or the wrong one)."""
    assert _every_message_type() == set(ROUTES)


def test_internal_messages_are_the_routed_ones_that_are_not_public() -> None:
    assert set(INTERNAL_MESSAGES) == set(ROUTES) - set(PUBLIC_MESSAGES)
    assert set(INTERNAL_MESSAGES).isdisjoint(PUBLIC_MESSAGES)
    assert {LoadProjection, LoadAuditView} <= set(INTERNAL_MESSAGES)


def test_owner_of_reads_the_table() -> None:
    assert owner_of(SaveSession(record=example_session())) == "writer"
    assert owner_of(DeleteSession(session_id="session-1")) == "writer"
    assert owner_of(ObserveRelayEvents(session_id="session-1", events=[])) == "projector"
    assert owner_of(Reproject(session_id="session-1")) == "projector"
    assert owner_of(LoadState()) == "reader"
    assert owner_of(LoadAuditView(session_id="session-1")) == "reader"
    assert owner_of(LoadProjection(session_id="session-1")) == "writer"

    class Later(LoadState, frozen=True, kw_only=True):
        """A subclass goes where its class goes (``check_message`` takes it too)."""

    assert owner_of(Later()) == "reader"
    assert owner_of(object()) == "writer"  # which refuses it, naming it


def test_a_message_in_two_unions_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "OWNERS", (*OWNERS, ("reader", DeleteSession)))
    with pytest.raises(TypeError, match="DeleteSession is routed twice"):
        routing._derived_routes()


def test_the_core_routes_by_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core asks the table and nothing else: a reader message the table sent to the
    writer would reach the writer (which does not take it)."""
    monkeypatch.setattr(routing, "ROUTES", {**ROUTES, LoadState: "writer"})
    with EventStore.open(tmp_path / "s.sqlite3", projection="thread") as store:
        store.ask(SaveSession(record=example_session()))
        with pytest.raises(Unanswerable, match="the writer does not take LoadState"):
            store.ask(LoadState())
        with pytest.raises(Unanswerable, match="the writer does not take LoadState"):
            store.ask(LoadState(), timeout=10)
    monkeypatch.undo()
    with EventStore.open(tmp_path / "s.sqlite3", projection="thread") as store:
        assert list(store.ask(LoadState()).sessions) == ["session-1"]
