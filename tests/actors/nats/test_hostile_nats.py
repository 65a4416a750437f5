"""relaystore publish, tried as a careless operator would, against a real nats-server.

What an operator relies on: two publishers started on one store (by mistake, or a
restart that overlaps the old one) still leave the stream holding the store's feed,
each event once and in order (the ``Nats-Msg-Id`` of each event is its store and seq,
so the server drops the second copy); and a session whose id needs escaping in a
subject keeps its events apart from any other session's.

And restore and mirror, fed a hostile stream (a message deleted from the middle, forged
seqs and ids, garbage, a purge and a re-publish, a target that is not theirs): each
either holds exactly what the source committed or refuses in one line (exit 1) and
leaves the target's rows as they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.nats.test_nats_publish import (
    STREAM,
    Replays,
    assert_stream_is_the_feed,
    new_store,
    roots,
    stop,
    wait_for_line,
)
from tests.actors.nats_support import (
    NatsServer,
    attempt,
    events_lines,
    journal_root,
    latest_seq,
    publisher,
    run,
    running_server,
    store_id,
    wait_until_published,
)
from tests.actors.replica_support import (
    delete_message,
    make_store,
    publish_raw,
    purge_stream,
    raw_messages,
    rows,
    session_ids,
)

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    with running_server(tmp_path) as server:
        yield server


def test_two_publishers_on_one_store_publish_each_event_once(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    db = new_store(tmp_path, "twice")
    first = publisher(db, nats_server.url)
    wait_for_line(first, b"after seq")
    second = publisher(db, nats_server.url)
    try:
        wait_for_line(second, b"after seq")
        with Replays(db, roots(tmp_path, "twice", 4, 200)):
            pass
        wait_until_published(
            nats_server.url, STREAM, f"relaystore.{store_id(db)}.>", latest_seq(db)
        )
    finally:
        logs = [stop(process) for process in (first, second)]
    assert assert_stream_is_the_feed(nats_server.url, db) == 20 * 2 + 4 * 200 * 2
    assert all("Traceback" not in log for log in logs), logs


# -- restore and mirror from a hostile stream ------------------------------------------------


def _refused(db: Path, *args: str) -> str:
    """``relaystore ARGS`` refused in one line on stderr, exit 1; that line."""
    result = attempt(db, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


def _published(tmp_path: Path, url: str, name: str, *extra: str) -> tuple[Path, str]:
    source = make_store(tmp_path / name, "store", turns=0)
    run(source, "publish", "--nats", url, "--once", *extra)
    return source, store_id(source)


def test_restore_refuses_a_target_holding_other_sessions(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Before: exit 0, and the source's events at seqs the target held were dropped."""
    _, sid = _published(tmp_path, nats_server.url, "a")
    target = tmp_path / "b" / "store.sqlite3"
    target.parent.mkdir()
    run(target, "replay", str(journal_root(tmp_path / "roots", "mine", 20)))
    before = rows(target)
    line = _refused(target, "restore", "--nats", nats_server.url, "--store", sid)
    assert f"refusing to restore store {sid}" in line
    assert "1 session and 40 API events not restored" in line
    assert rows(target) == before


def test_restore_refuses_an_event_deleted_from_the_stream(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Before: exit 0, a store lacking the seq, under the source's id."""
    source, sid = _published(tmp_path, nats_server.url, "a")
    target = tmp_path / "b" / "store.sqlite3"
    target.parent.mkdir()
    done = run(target, "restore", "--nats", nats_server.url, "--store", sid).stdout.decode()
    first = latest_seq(source)
    run(source, "replay", str(journal_root(tmp_path / "roots", "later", 10)))
    run(source, "publish", "--nats", nats_server.url, "--once")
    later = [
        m
        for m in raw_messages(nats_server.url, STREAM, f"relaystore.{sid}.*.*")
        if int(m.headers["Relaystore-Seq"]) > first
    ]
    hole = later[len(later) // 2]
    delete_message(nats_server.url, STREAM, hole.position)
    before = rows(target)
    line = _refused(target, "restore", "--nats", nats_server.url, "--store", sid)
    assert f"API event seq {hole.headers['Relaystore-Seq']} of store {sid} is missing" in line
    assert rows(target) == before
    assert "run again" not in done  # said only when there is more to do


def test_restore_refuses_a_hole_in_a_span_that_also_deletes_a_session(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Before: exit 0, a store lacking the seq: a span deleting a session took any hole
    for that session's events. The publisher now says which seqs it did not send (the
    deleted session's, as gaps), so any other missing seq is a hole."""
    source = make_store(tmp_path / "a", "store", turns=5, extra="gone")
    run(source, "replay", str(journal_root(tmp_path / "roots", "kept", 5)))
    run(source, "delete", "gone")
    run(source, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(source)
    gaps = raw_messages(nats_server.url, STREAM, f"relaystore.{sid}.gap")
    assert gaps, "the deleted session's seqs are said as gaps"
    kept = raw_messages(nats_server.url, STREAM, f"relaystore.{sid}.*.kept")
    hole = kept[len(kept) // 2]
    delete_message(nats_server.url, STREAM, hole.position)
    target = tmp_path / "b" / "store.sqlite3"
    target.parent.mkdir()
    line = _refused(target, "restore", "--nats", nats_server.url, "--store", sid)
    assert f"API event seq {hole.headers['Relaystore-Seq']} of store {sid} is missing" in line
    assert session_ids(target) == []


def test_restore_refuses_a_missing_change_a_forged_id_and_garbage(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Each on a stream of its own, restored into a new store: refused, nothing held.
    An event forged past its marker's seq is left out: the restore equals the source."""
    source = make_store(tmp_path / "a", "store", turns=0)
    sid = store_id(source)
    cases = ("gone", "forged", "garbage", "ahead", "badlog")
    for name in cases:
        run(
            source,
            "publish",
            "--nats",
            nats_server.url,
            "--once",
            "--stream",
            name.upper(),
            "--subject-prefix",
            name,
        )
    messages = raw_messages(nats_server.url, "GONE", f"gone.{sid}.>")
    changes = [m for m in messages if m.headers.get("Relaystore-Kind") in ("record", "log")]
    gone = changes[len(changes) // 2]
    delete_message(nats_server.url, "GONE", gone.position)
    marker = messages[-1].headers
    change, seq = int(marker["Relaystore-Change"]), int(marker["Relaystore-Seq"])
    mark = {
        "Relaystore-Store": sid,
        "Relaystore-Change": str(change),
        "Relaystore-Seq": str(seq),
        "Relaystore-Kind": "commit",
    }
    forged = {
        "Relaystore-Store": sid,
        "Relaystore-Change": str(change + 1),
        "Relaystore-Kind": "record",
        "Relaystore-Session": "../etc",
    }
    record = {"session_id": "../etc", "workspace": None, "context": None, "session": None}
    publish_raw(
        nats_server.url,
        [
            (f"forged.{sid}.default.~~~etc.record", json.dumps(record).encode(), forged),
            (f"forged.{sid}.commit", b"", {**mark, "Relaystore-Change": str(change + 1)}),
        ],
    )
    event = {"Relaystore-Store": sid, "Relaystore-Seq": str(seq + 1)}
    publish_raw(
        nats_server.url,
        [
            (f"garbage.{sid}.default.x", b"\xff not json", event),
            (f"garbage.{sid}.commit", b"", {**mark, "Relaystore-Seq": str(seq + 1)}),
        ],
    )
    last = json.loads(events_lines(source)[-1])
    ahead = {**last, "seq": 1_000_000}
    publish_raw(
        nats_server.url,
        [
            (
                f"ahead.{sid}.default.{last['session_id']}",
                json.dumps(ahead, separators=(",", ":")).encode(),
                {"Relaystore-Store": sid, "Relaystore-Seq": "1000000"},
            ),
            (f"ahead.{sid}.commit", b"", mark),
        ],
    )
    session = session_ids(source)[0]
    page = {
        "Relaystore-Store": sid,
        "Relaystore-Change": str(change + 1),
        "Relaystore-Kind": "log",
        "Relaystore-Session": session,
        "Relaystore-First-Ordinal": "1000000",
        "Relaystore-Last-Ordinal": "1000001",
        "Relaystore-Raw-Bytes": "7",
    }
    publish_raw(
        nats_server.url,
        [
            (f"badlog.{sid}.default.{session}.log", b"garbage", page),
            (f"badlog.{sid}.commit", b"", {**mark, "Relaystore-Change": str(change + 1)}),
        ],
    )
    # A forged log page (not compressed, past a hole): refused in one line, nothing held.
    target = tmp_path / "badlog" / "store.sqlite3"
    target.parent.mkdir()
    line = _refused(
        target,
        "restore",
        "--nats",
        nats_server.url,
        "--store",
        sid,
        "--stream",
        "BADLOG",
        "--subject-prefix",
        "badlog",
    )
    assert f"cannot restore session {session}" in line
    assert session_ids(target) == []  # applied with the span before it, in one transaction
    assert events_lines(target) == []
    expected = {
        "gone": f"change {gone.headers['Relaystore-Change']} of store {sid} is missing",
        "forged": "invalid session id",
        "garbage": "does not decode",
    }
    for name, says in expected.items():
        target = tmp_path / name / "store.sqlite3"
        target.parent.mkdir()
        line = _refused(
            target,
            "restore",
            "--nats",
            nats_server.url,
            "--store",
            sid,
            "--stream",
            name.upper(),
            "--subject-prefix",
            name,
        )
        assert says in line
        assert session_ids(target) == []
        assert events_lines(target) == []
    mirror = tmp_path / "mirror" / "mirror.sqlite3"  # a mirror checks as a restore does
    mirror.parent.mkdir()
    line = _refused(
        mirror, "mirror", "--nats", nats_server.url, "--stream", "GONE", "--subject-prefix", "gone"
    )
    assert expected["gone"] in line
    assert session_ids(mirror) == []
    target = tmp_path / "ahead" / "store.sqlite3"
    target.parent.mkdir()
    said = run(
        target,
        "restore",
        "--nats",
        nats_server.url,
        "--store",
        sid,
        "--stream",
        "AHEAD",
        "--subject-prefix",
        "ahead",
    ).stdout.decode()
    assert "1 message past the last commit marker wait" in said
    assert events_lines(target) == events_lines(source)
    assert session_ids(target) == session_ids(source)


def test_a_mirror_holds_each_event_once_after_a_purge_and_a_republish(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Before: the mirror held every event twice, and said nothing."""
    source, sid = _published(tmp_path, nats_server.url, "a")
    mirror = tmp_path / "m" / "mirror.sqlite3"
    mirror.parent.mkdir()
    run(mirror, "mirror", "--nats", nats_server.url)
    assert events_lines(mirror) == events_lines(source)
    held = raw_messages(nats_server.url, STREAM, f"relaystore.{sid}.>")
    purge_stream(nats_server.url, STREAM)
    # Published again past the duplicate window: the same messages, no Nats-Msg-Id.
    publish_raw(
        nats_server.url,
        [
            (m.subject, m.data, {k: v for k, v in m.headers.items() if k != "Nats-Msg-Id"})
            for m in held
        ],
    )
    before = rows(mirror)
    said = run(mirror, "mirror", "--nats", nats_server.url).stdout.decode()
    assert "0 API events" in said
    assert "run again" not in said
    moved = [row for row in rows(mirror) if row not in before]  # its stream position only
    assert all(row.startswith('INSERT INTO "replica_sources"') for row in moved), moved
    assert len(rows(mirror)) == len(before)
    # And it goes on from there: the source's next events, once each.
    run(source, "replay", str(journal_root(tmp_path / "roots", "later", 5)))
    run(source, "publish", "--nats", nats_server.url, "--once")
    run(mirror, "mirror", "--nats", nats_server.url)
    assert events_lines(mirror) == events_lines(source)
