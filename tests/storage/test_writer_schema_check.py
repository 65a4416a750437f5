"""The writer re-reads the schema before a batch only when another connection committed.

Its own commits cannot change the schema behind its back, so a writer committing batch
after batch reads the schema once; a commit by any other connection (an operator's shell,
an older build) makes the next batch read it again, and a revision rolled back
underneath it is still refused.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from relaystore.actors.writer import perform
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.errors import SchemaMismatch, SchemaMismatchReason
from relaystore.domain.messages import RecordActivities, SaveSession
from relaystore.storage import connection as connection_module
from relaystore.storage.batch import Batch
from relaystore.storage.connection import WriterConnection, open_writer
from relaystore.storage.schema import SCHEMA_VERSION
from relaystore.testing import example_session

SESSION = "session-1"


def _activity(n: int) -> RecordActivities:
    state = ApiActivityState(
        state=f"running-{n}", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    return RecordActivities(activities=[(SESSION, state)], recorded_at_ms=n)


def _write(writer: WriterConnection, message: object) -> None:
    with Batch(writer) as batch:
        _, error = batch.run(perform, message)
        if error is not None:
            raise error
        batch.commit()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per schema read the writer's check makes."""
    seen: list[int] = []
    real = connection_module.check_writer_schema

    def counting(connection: apsw.Connection, observed: int) -> int:
        seen.append(observed)
        return real(connection, observed)

    monkeypatch.setattr(connection_module, "check_writer_schema", counting)
    return seen


def test_the_writers_own_commits_do_not_make_it_read_the_schema_again(
    tmp_path: Path, reads: list[int]
) -> None:
    writer = open_writer(tmp_path / "store.sqlite3", synchronous="OFF")
    try:
        _write(writer, SaveSession(record=example_session(SESSION)))
        for n in range(20):
            _write(writer, _activity(n))
        assert len(reads) == 1
        other = apsw.Connection(str(tmp_path / "store.sqlite3"))
        other.execute("CREATE TABLE operator_notes(x)")  # another connection commits
        other.close()
        _write(writer, _activity(20))
        _write(writer, _activity(21))
        assert len(reads) == 2
    finally:
        writer.close()


def test_a_revision_rolled_back_by_another_connection_is_still_refused(
    tmp_path: Path, reads: list[int]
) -> None:
    path = tmp_path / "store.sqlite3"
    writer = open_writer(path, synchronous="OFF")
    try:
        _write(writer, SaveSession(record=example_session(SESSION)))
        other = apsw.Connection(str(path))
        future = SCHEMA_VERSION + 1
        other.execute(
            f"INSERT INTO schema_migrations(version, applied_at) VALUES ({future}, 'x');"
            f"PRAGMA user_version = {future};"
        )
        _write(writer, _activity(1))  # a compatible newer revision, now observed
        _write(writer, _activity(2))
        other.execute(
            f"DELETE FROM schema_migrations WHERE version = {future};"
            f"PRAGMA user_version = {SCHEMA_VERSION};"
        )
        other.close()
        with pytest.raises(SchemaMismatch) as refused:
            _write(writer, _activity(3))
        assert refused.value.reason is SchemaMismatchReason.ROLLBACK
        assert len(reads) == 3  # the first batch, and after each of the other's commits
    finally:
        writer.close()
