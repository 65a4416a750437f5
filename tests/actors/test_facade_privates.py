"""No module of the package reaches into the facade's privates: internal callers use the
one door, :func:`~relaystore.actors.store_internals.store_internals`.

The facade is :class:`~relaystore.EventStore`, :class:`~relaystore.aio.AsyncEventStore`,
the :class:`~relaystore.actors.core.StoreCore` they share and their base
:class:`~relaystore.actors.facts.StoreFacts`. Its own modules (:data:`FACADE_MODULES`)
may use its private attributes; every other module of the package (``src/relaystore``,
``domain``, ``storage``, ``actors``) may not: an attribute access ``x._name`` whose
``_name`` is a private attribute of one of those classes (a method, a property, or an
attribute one of their methods assigns) is a reach, unless ``x`` is ``self`` or ``cls``
(a class's own attribute of the same name is its own business).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from relaystore import EventStore
from relaystore.actors.core import StoreCore
from relaystore.actors.facts import StoreFacts
from relaystore.aio import AsyncEventStore
from tests.paths import ROOT

FACADE_CLASSES: tuple[type, ...] = (EventStore, AsyncEventStore, StoreCore, StoreFacts)
FACADE_MODULES = frozenset(
    {
        "actors/store.py",  # EventStore
        "actors/aio.py",  # AsyncEventStore
        "actors/core.py",  # StoreCore, which both facades share
        "actors/facts.py",  # StoreFacts, both facades' base
        "actors/store_internals.py",  # the one door for internal callers
    }
)
"""The facade's own modules: the only ones that may use its private attributes."""
PACKAGE_FOLDERS = ("src/relaystore", "domain", "storage", "actors")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_names() -> frozenset[str]:
    """Every private attribute of the facade's classes: defined in the class body, or
    assigned to ``self._name`` by one of its methods."""
    names: set[str] = set()
    for kind in FACADE_CLASSES:
        names.update(name for name in vars(kind) if _private(name))
        names.update(getattr(kind, "__annotations__", {}))
        tree = ast.parse(inspect.getsource(kind))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
    return frozenset(name for name in names if _private(name))


def _reaches(path: Path, private: frozenset[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in private
        and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
    ]


def test_the_private_names_are_found() -> None:
    """The scan knows the privates it looks for (a guard on the scan itself)."""
    private = _private_names()
    assert {"_core", "_store", "_loop", "_route", "_hand_over", "_follow"} <= private


def test_no_module_outside_the_facade_uses_its_private_attributes() -> None:
    private = _private_names()
    reaches = [
        reach
        for folder in PACKAGE_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() not in FACADE_MODULES
        for reach in _reaches(path, private)
    ]
    assert reaches == []
