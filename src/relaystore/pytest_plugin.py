"""pytest fixtures for testing code that embeds relaystore (opt in; never loaded by itself).

Enable it in a test module or the root ``conftest.py``::

    pytest_plugins = ["relaystore.pytest_plugin"]

or on the command line with ``-p relaystore.pytest_plugin``. It offers:

* ``relaystore_store``: a fresh :class:`~relaystore.EventStore` opened in the test's
  ``tmp_path`` (``relaystore.sqlite3``), closed when the test ends;
* ``relaystore_async_store``: the same as a :class:`~relaystore.aio.AsyncEventStore`,
  opened and closed on the test's event loop. It works out of the box: an ``async def``
  test that takes it, and carries no async marker of its own, is run on asyncio by
  anyio's pytest plugin, which this plugin registers when it is not loaded already
  (install with ``pip install "relaystore[pytest]"``: pytest and anyio). A test marked
  ``@pytest.mark.anyio`` (its ``anyio_backend`` must be ``"asyncio"``) or
  ``@pytest.mark.asyncio`` (pytest-asyncio) is left to that marker;
* ``relaystore_journal``: a fresh :class:`~relaystore.testing.JournalBuilder`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from relaystore.actors.aio import AsyncEventStore
from relaystore.actors.store import EventStore
from relaystore.testing import JournalBuilder

__all__ = [
    "pytest_configure",
    "pytest_pycollect_makeitem",
    "relaystore_async_store",
    "relaystore_journal",
    "relaystore_store",
]

_ASYNC_FIXTURE = "relaystore_async_store"
_ASYNC_MARKERS = frozenset({"anyio", "asyncio"})


def pytest_configure(config: pytest.Config) -> None:
    """Register anyio's plugin (which runs the async fixture) unless it is loaded or
    blocked (``-p no:anyio``)."""
    manager = config.pluginmanager
    if manager.get_plugin("anyio") is not None or manager.is_blocked("anyio"):
        return
    import anyio.pytest_plugin

    if not manager.is_registered(anyio.pytest_plugin):
        manager.register(anyio.pytest_plugin, "anyio")


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> None:
    """Mark an unmarked ``async def`` test that takes the async store to run on asyncio."""
    if not collector.istestfunction(obj, name) or not inspect.iscoroutinefunction(obj):
        return
    if _ASYNC_FIXTURE not in inspect.signature(obj).parameters:
        return
    marks = {mark.name for mark in getattr(obj, "pytestmark", ())}
    closest = {marker for marker in _ASYNC_MARKERS if collector.get_closest_marker(marker)}
    if marks & _ASYNC_MARKERS or closest:
        return
    pytest.mark.anyio(obj)
    pytest.mark.parametrize("anyio_backend", ["asyncio"])(obj)


@pytest.fixture
def relaystore_store(tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store in ``tmp_path``, closed (every actor stopped) after the test."""
    store = EventStore.open(tmp_path / "relaystore.sqlite3")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
async def relaystore_async_store(tmp_path: Path) -> AsyncIterator[AsyncEventStore]:
    """A fresh asyncio store in ``tmp_path``, closed (every actor stopped) after the test."""
    async with AsyncEventStore.open(tmp_path / "relaystore.sqlite3") as store:
        yield store


@pytest.fixture
def relaystore_journal() -> JournalBuilder:
    """A fresh journal builder: format 2, from genesis, on the default clock."""
    return JournalBuilder()
