"""Newer workers are never refused: a line of a kind this build does not know is kept in
the relay log, its session's projection waits before it, and catches up once the build
knows the kind (here injected through the projection's handler table,
``LINE_HANDLERS``): when the session's next events arrive, or on ``Reproject``."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from relaystore import EventStore
from relaystore.actors.audit import audit_session
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.domain.errors import InvalidInput, UnknownRelayKind
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    LoadStats,
    ObserveRelayEvents,
    Reproject,
)
from relaystore.domain.projection import observations
from relaystore.domain.projection.context import ProjectionContext, push_system
from relaystore.domain.projection.rebuild import rebuild_from
from relaystore.domain.reads import LoadSessionDetail
from relaystore.domain.relay import RelayEvent, RelayLine, encode_relay_event
from relaystore.domain.wire import encode
from relaystore.testing import JournalBuilder

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "forward"
KIND = ("observation", "mailbox_digest_sent")
FUTURE = b'{"type":"mailbox_digest_sent","data":{"count":3}}'


def _digest_sent(ctx: ProjectionContext, line: RelayLine) -> None:
    """What a newer build would do with the kind: one system line."""
    count = msgspec.json.decode(line.observation_json)["data"]["count"]
    push_system(ctx, f"Mailbox digest sent ({count} events)")


def _skip_ids(builder: JournalBuilder, turns: int) -> None:
    """Continue the ids of ``turns`` earlier turns (one builder per stretch of journal)."""
    for _ in range(turns):
        builder.next_id("prompt")
        builder.next_id("msg")


class Story:
    """A journal: a turn, a newer worker's line, another turn (and a third turn that
    arrives later)."""

    def __init__(self) -> None:
        self.before = JournalBuilder()
        self.before.prompt_turn("Hello")
        self.future = self.before.newer_line(FUTURE)
        self.after = JournalBuilder(after=self.future.cursor, start_ms=self.before.next_ms + 10)
        _skip_ids(self.after, 1)
        self.after.prompt_turn("After the newer line")
        self.later = JournalBuilder(after=self.after.frontier, start_ms=self.after.next_ms + 10)
        _skip_ids(self.later, 2)
        self.later.prompt_turn("Later still")

    @property
    def projected(self) -> int:
        return len(self.before.events)

    def journal(self, path: Path) -> Path:
        line = encode_relay_event(self.future) + b"\n"
        path.write_bytes(self.before.to_bytes() + line + self.after.to_bytes())
        return path

    def events(self, *, later: bool = False) -> list[RelayEvent | RelayLine]:
        tail = self.later.events if later else []
        return [*self.before.events, self.future, *self.after.events, *tail]


def _session(store: EventStore) -> MaterializedSession:
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    return session


def _feed(store: EventStore) -> list[tuple[int, bytes]]:
    page = store.ask(LoadApiEvents(after_seq=0, limit=1000))
    return [(event.seq, encode({"type": event.type, "data": event.data})) for event in page.events]


def _derived(events: list[RelayEvent | RelayLine]) -> tuple[MaterializedSession, list[bytes]]:
    rebuilt = rebuild_from(MaterializedSession.empty(SESSION), events)
    return rebuilt.projection.session, [encode(event) for _, _, event in rebuilt.page.api_events]


def _replayed_behind(tmp_path: Path, story: Story) -> Path:
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        report = replay_source(
            store, resolve_source(story.journal(tmp_path / "journal.jsonl"), session_id=SESSION)
        )
        assert report.held == 1 + len(story.after.events)
        assert report.behind is not None
        assert report.behind.ordinal == story.future.ordinal
        assert report.frontier == story.after.frontier
    return db


def test_a_newer_kind_replays_up_to_it_marks_the_session_behind_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    story = Story()
    db = _replayed_behind(tmp_path, story)
    expected, feed = _derived(list(story.before.events))
    with EventStore.open(db) as store:
        session = _session(store)
        # Exactly the projection of the lines before the newer one, nothing of after it.
        assert session.applied_event_ordinal == story.projected
        assert session.transcript == expected.transcript
        assert [body for _, body in _feed(store)] == feed
        behind = session.projection_behind
        assert behind is not None
        assert (behind.ordinal, behind.kind, behind.position) == (
            story.future.ordinal,
            "mailbox_digest_sent",
            "observation",
        )
        assert behind.kept == story.after.frontier
        assert session.kept_frontier == story.after.frontier
        # Visible where an operator looks.
        assert store.ask(LoadStats()).projection_behind == {SESSION: behind}
        detail = store.ask(LoadSessionDetail(session_id=SESSION))
        assert detail is not None
        assert detail.projection_behind == behind
        assert store.metrics().sessions_behind == 1
        # Re-delivered lines are already held; the next ones are kept behind too.
        report = store.ask(ObserveRelayEvents(session_id=SESSION, events=story.events()))
        assert (report.applied, report.already_applied) == (0, len(story.events()))
        report = store.ask(ObserveRelayEvents(session_id=SESSION, events=list(story.later.events)))
        assert (report.applied, report.held) == (len(story.later.events), len(story.later.events))
        assert store.metrics().relay_lines_held == len(story.later.events)
        assert _session(store).applied_event_ordinal == story.projected
        # The log holds the whole chain and the store still audits clean.
        assert audit_session(store, SESSION).divergence is None


def test_the_session_catches_up_when_its_next_events_arrive_once_the_kind_is_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = Story()
    db = _replayed_behind(tmp_path, story)
    with EventStore.open(db) as store:
        before = _feed(store)
    monkeypatch.setitem(observations.LINE_HANDLERS, KIND, _digest_sent)
    expected, derived_feed = _derived(story.events(later=True))
    assert expected.projection_behind is None

    # The newer build is this interpreter patched: its projectors' thread path.
    with EventStore.open(db, projection="thread") as store:
        assert store.metrics().sessions_behind == 1
        report = store.ask(ObserveRelayEvents(session_id=SESSION, events=list(story.later.events)))
        assert (report.applied, report.held, report.behind) == (len(story.later.events), 0, None)
        session = _session(store)
        assert session.projection_behind is None
        assert session.applied_event_ordinal == story.later.frontier.ordinal
        assert session.transcript == expected.transcript
        assert "Mailbox digest sent (3 events)" in [
            getattr(item.body, "text", None) for item in session.transcript
        ]
        feed = _feed(store)
        # Append-only: what was committed stays as it was, the caught-up events follow it.
        assert feed[: len(before)] == before
        assert sorted(body for _, body in feed) == sorted(derived_feed)
        assert store.metrics().sessions_behind == 0
        assert store.ask(LoadStats()).projection_behind == {}
        assert audit_session(store, SESSION).divergence is None


def test_reproject_catches_a_behind_session_up_and_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = Story()
    db = _replayed_behind(tmp_path, story)
    with EventStore.open(db) as store:
        # Still unknown: a reprojection keeps the session behind, changing nothing.
        unchanged = store.ask(Reproject(session_id=SESSION))
        assert unchanged.appended_by_kind == {}
        assert unchanged.behind is not None
        assert _session(store).projection_behind == unchanged.behind
    monkeypatch.setitem(observations.LINE_HANDLERS, KIND, _digest_sent)
    expected, _ = _derived(story.events())
    with EventStore.open(db, projection="thread") as store:  # the patched build's
        report = store.ask(Reproject(session_id=SESSION))
        assert report.behind is None
        assert report.caught_up_from == story.future.ordinal
        assert report.appended_by_kind.get("turn_started") == 1
        assert _session(store).transcript == expected.transcript


def test_a_store_without_the_relay_log_refuses_the_newer_line_keeping_what_came_before(
    tmp_path: Path,
) -> None:
    story = Story()
    journal = story.journal(tmp_path / "journal.jsonl")
    with EventStore.open(tmp_path / "store.sqlite3", relay_log=False) as store:
        with pytest.raises(UnknownRelayKind) as caught:
            replay_source(store, resolve_source(journal, session_id=SESSION))
        assert caught.value.line == story.future.ordinal
        assert caught.value.path == str(journal)
        session = _session(store)
        assert session.applied_event_ordinal == story.projected
        assert session.projection_behind is None
        # Handed over directly, the line is refused just the same and changes nothing.
        with pytest.raises(UnknownRelayKind):
            store.ask(ObserveRelayEvents(session_id=SESSION, events=story.events()))
        assert _session(store) == session


def test_a_relay_line_must_name_what_this_build_does_not_know(tmp_path: Path) -> None:
    story = Story()
    unnamed = msgspec.structs.replace(story.future, kind="")
    with (
        EventStore.open(tmp_path / "store.sqlite3") as store,
        pytest.raises(InvalidInput, match=r"events\[1\]\.kind"),
    ):
        store.ask(ObserveRelayEvents(session_id=SESSION, events=[story.before.events[0], unnamed]))


def test_a_seeded_session_is_rebuilt_from_its_seed_and_log(tmp_path: Path) -> None:
    head = JournalBuilder()
    head.prompt_turn("Before the checkpoint")
    journal = JournalBuilder(after=head.frontier, start_ms=head.next_ms)
    journal.prompt_turn("After the restore")
    root = journal.write_worker_root(tmp_path / "root", SESSION, seed=True)
    seed_file = root / "relay-seed.json"
    seed = json.loads(seed_file.read_text())
    queued = {"command_id": "queued-1", "content": [{"type": "text", "text": "next"}]}
    seed["queued_prompts"] = [{**queued, "queued_at_ms": 5}]
    seed_file.write_text(json.dumps(seed))
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        replay_source(store, resolve_source(root))
        stored = _session(store)
        assert stored.history_start is not None
        assert stored.history_start.source == "seed"
        report = store.ask(Reproject(session_id=SESSION))
        assert report.appended_by_kind == {}
        assert report.first_changed_position is None
        assert _session(store) == stored
        assert audit_session(store, SESSION).divergence is None
