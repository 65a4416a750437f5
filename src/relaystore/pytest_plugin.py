"""pytest fixtures for testing code that embeds relaystore (opt in; never loaded by itself).

Enable it in a test module or the root ``conftest.py``::

    pytest_plugins = ["relaystore.pytest_plugin"]

or on the command line with ``-p relaystore.pytest_plugin``. It offers:

* ``relaystore_store``: a fresh :class:`~relaystore.EventStore` opened in the test's
  ``tmp_path`` (``relaystore.sqlite3``), closed when the test ends;
* ``relaystore_journal``: a fresh :class:`~relaystore.testing.JournalBuilder`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystore.actors.store import EventStore
from relaystore.testing import JournalBuilder

__all__ = ["relaystore_journal", "relaystore_store"]


@pytest.fixture
def relaystore_store(tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store in ``tmp_path``, closed (every actor stopped) after the test."""
    store = EventStore.open(tmp_path / "relaystore.sqlite3")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def relaystore_journal() -> JournalBuilder:
    """A fresh journal builder: format 2, from genesis, on the default clock."""
    return JournalBuilder()
