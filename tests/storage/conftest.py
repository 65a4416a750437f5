"""Storage fixtures: a writer connection on a fresh store, or on one migrated from revision 1.

Every operation test runs against both, so a migrated store behaves exactly like a
fresh one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from relaystore.storage.connection import WriterConnection, open_writer
from relaystore.storage.sessions import save_session
from tests.storage.builders import running_session
from tests.storage.legacy import create_legacy_store


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """Where the test's store lives (not created yet)."""
    return tmp_path / "store.sqlite3"


@pytest.fixture(params=["fresh", "migrated"])
def writer(request: pytest.FixtureRequest, store_path: Path) -> Iterator[WriterConnection]:
    """The writer of a fresh store, or of a revision-1 store it migrated on open."""
    if request.param == "migrated":
        create_legacy_store(store_path)
    handle = open_writer(store_path, synchronous="OFF")
    yield handle
    handle.close()


@pytest.fixture
def db(writer: WriterConnection) -> apsw.Connection:
    """The writer's apsw connection, holding no session."""
    return writer.connection


@pytest.fixture
def session_db(db: apsw.Connection) -> apsw.Connection:
    """The writer's connection with the running fixture session ``session-1`` saved."""
    save_session(db, running_session())
    return db


@pytest.fixture
def store(session_db: apsw.Connection) -> apsw.Connection:
    """A writer connection (fresh or migrated store) holding ``session-1``."""
    return session_db
