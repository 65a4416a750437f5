"""pytest fixtures for testing code that embeds relaystore (opt in; never loaded by itself).

Enable it in a test module or the root ``conftest.py``::

    pytest_plugins = ["relaystore.pytest_plugin"]

or on the command line with ``-p relaystore.pytest_plugin``. It offers:

* ``relaystore_store``: a fresh :class:`~relaystore.EventStore` opened in the test's
  ``tmp_path`` (``relaystore.sqlite3``), closed when the test ends;
* ``relaystore_async_store``: the same as a :class:`~relaystore.aio.AsyncEventStore`,
  opened and closed on the test's event loop. It is an async fixture, so the test runs
  under an async plugin on asyncio: anyio's (``@pytest.mark.anyio`` with the
  ``anyio_backend`` fixture returning ``"asyncio"``) or pytest-asyncio's (auto mode);
* ``relaystore_journal``: a fresh :class:`~relaystore.testing.JournalBuilder`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from relaystore.actors.aio import AsyncEventStore
from relaystore.actors.store import EventStore
from relaystore.testing import JournalBuilder

__all__ = ["relaystore_async_store", "relaystore_journal", "relaystore_store"]


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
