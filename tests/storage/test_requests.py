"""Maintenance request rows: submitted by a command's connection, taken and answered by
the writer's; withdrawn or taken, never both; one open row per request; bounded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from relaystore.domain.errors import StoreBusy, StoreLocked
from relaystore.domain.maintenance import (
    ABANDONED,
    KEPT_ANSWERS,
    MAX_OPEN_REQUESTS,
    DeleteRequest,
    MaintenanceAnswer,
    VacuumRequest,
    encode_request,
)
from relaystore.storage.connection import WriterConnection, open_requester, open_writer
from relaystore.storage.requests import (
    claim_request,
    finish_request,
    load_request,
    open_requests,
    recover_requests,
    submit_request,
    withdraw_request,
)
from relaystore.storage.write_lock import read_lock_holder

VACUUM = encode_request(VacuumRequest())
DONE = MaintenanceAnswer(out=["done"])


@pytest.fixture
def handles(store_path: Path) -> Iterator[tuple[WriterConnection, apsw.Connection]]:
    """The store's writer and a command's requester connection."""
    writer = open_writer(store_path, synchronous="OFF")
    requester = open_requester(store_path)
    yield writer, requester
    requester.close()
    writer.close()


def test_a_request_is_withdrawn_or_taken_never_both(
    handles: tuple[WriterConnection, apsw.Connection],
) -> None:
    writer, requester = handles
    submit_request(requester, "r-1", "vacuum", VACUUM, 1)
    assert claim_request(writer.connection, "r-1", 2)
    assert not withdraw_request(requester, "r-1")  # taken: it stays
    assert not claim_request(writer.connection, "r-1", 2)  # taken once
    submit_request(requester, "r-2", "delete", encode_request(DeleteRequest(session_id="s")), 1)
    assert withdraw_request(requester, "r-2")
    assert not claim_request(writer.connection, "r-2", 2)  # withdrawn: never taken
    assert load_request(requester, "r-2") is None


def test_an_identical_open_request_is_joined_and_an_id_names_one_request(
    handles: tuple[WriterConnection, apsw.Connection],
) -> None:
    writer, requester = handles
    first = submit_request(requester, "r-1", "vacuum", VACUUM, 10)
    joined = submit_request(requester, "r-2", "vacuum", VACUUM, 11)
    assert joined.request_id == "r-1"
    assert joined.requester_pid == 11  # the process waiting for it now
    assert [stored.request_id for stored in open_requests(writer.connection, 8)] == ["r-1"]
    claim_request(writer.connection, "r-1", 12)
    assert finish_request(writer.connection, "r-1", DONE)
    again = submit_request(requester, "r-1", "vacuum", VACUUM, 13)
    assert (again.state, again.answer) == ("done", DONE)  # its answer, not a new run
    fresh = submit_request(requester, "r-3", "vacuum", VACUUM, 13)  # answered: a new one
    assert (fresh.request_id, fresh.state) == ("r-3", "pending")
    assert first.state == "pending"


def test_an_abandoned_request_submitted_again_waits_again(
    handles: tuple[WriterConnection, apsw.Connection],
) -> None:
    writer, requester = handles
    submit_request(requester, "r-1", "vacuum", VACUUM, 10)
    gone = MaintenanceAnswer(failed=True, error=ABANDONED)
    # The desk abandons only while the process it saw still asks for the request.
    assert not finish_request(
        writer.connection, "r-1", gone, from_state="pending", requester_pid=99
    )
    assert finish_request(writer.connection, "r-1", gone, from_state="pending", requester_pid=10)
    again = submit_request(requester, "r-1", "vacuum", VACUUM, 11)
    assert (again.state, again.requester_pid, again.answer) == ("pending", 11, None)


def test_open_requests_are_bounded_and_answers_pruned(
    handles: tuple[WriterConnection, apsw.Connection],
) -> None:
    writer, requester = handles
    for n in range(MAX_OPEN_REQUESTS):
        submit_request(
            requester, f"r-{n}", "delete", encode_request(DeleteRequest(session_id=f"s{n}")), 1
        )
    with pytest.raises(StoreBusy, match="wait for the store's writer already"):
        submit_request(requester, "one-more", "vacuum", VACUUM, 1)
    for n in range(KEPT_ANSWERS + 10):
        request_id = f"a-{n}"
        if n >= MAX_OPEN_REQUESTS:
            submit_request(
                requester,
                request_id,
                "delete",
                encode_request(DeleteRequest(session_id=f"t{n}")),
                1,
            )
        else:
            request_id = f"r-{n}"
        claim_request(writer.connection, request_id, 2)
        finish_request(writer.connection, request_id, DONE)
    (kept,) = writer.connection.execute(
        "SELECT count(*) FROM maintenance_requests WHERE state = 'done'"
    ).fetchone()
    assert kept == KEPT_ANSWERS


def test_the_next_writer_fails_what_the_last_left_running(
    handles: tuple[WriterConnection, apsw.Connection],
) -> None:
    writer, requester = handles
    submit_request(requester, "r-1", "vacuum", VACUUM, 1)
    claim_request(writer.connection, "r-1", 2)
    interrupted = MaintenanceAnswer(failed=True, error="interrupted")
    assert recover_requests(writer.connection, interrupted) == 1
    stored = load_request(requester, "r-1")
    assert stored is not None
    assert (stored.state, stored.answer) == ("failed", interrupted)
    assert recover_requests(writer.connection, interrupted) == 0


def test_the_writer_names_itself_in_its_lock_file(store_path: Path) -> None:
    writer = open_writer(store_path)
    try:
        holder = read_lock_holder(store_path)
        assert holder is not None
        assert (holder.pid, holder.takes_requests) == (os.getpid(), False)
        assert holder.alive()
        writer.take_requests()
        assert read_lock_holder(store_path).takes_requests  # type: ignore[union-attr]
        with pytest.raises(StoreLocked, match=f"by process {os.getpid()}") as refused:
            open_writer(store_path)
        assert refused.value.holder_pid == os.getpid()
    finally:
        writer.close()


def test_a_damaged_open_row_is_read_as_damaged_and_can_be_failed(
    handles: tuple[WriterConnection, apsw.Connection],
) -> None:
    writer, requester = handles
    submit_request(requester, "r-1", "vacuum", VACUUM, 1)
    requester.execute(
        "INSERT INTO maintenance_requests(request_id, kind, request_json, state, "
        "requested_at_ms, requester_pid, answer_json) VALUES "
        "(CAST(x'ff' AS TEXT), 'delete', '{}', 'pending', 0, 1, '[1]')"
    )
    damaged, good = open_requests(writer.connection, 8)
    assert good.request_id == "r-1"
    assert good.damaged is None
    assert damaged.damaged is not None
    assert "the row is damaged" in damaged.damaged
    assert damaged.rowid is not None
    failed = MaintenanceAnswer(failed=True, error=damaged.damaged)
    assert finish_request(
        writer.connection, damaged.request_id, failed, from_state="pending", rowid=damaged.rowid
    )
    assert [stored.request_id for stored in open_requests(writer.connection, 8)] == ["r-1"]
