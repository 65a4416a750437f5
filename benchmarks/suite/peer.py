"""peer: relaystore's writer against the eventsourcing library's SQLite recorder.

The same events on both sides: the body of an ``activity_changed`` API event (what one
RecordActivities activity appends) as the stored event's state. Each side runs for a fixed
time with the same number of sender threads (1 and 4), each sender with its own
aggregates/sessions:

* one per call: eventsourcing ``SQLiteApplicationRecorder.insert_events([one event])``
  against relaystore ``ask(RecordActivities)`` with one changed activity;
* 100 per call: ``insert_events`` of 100 events (100 aggregates) against one
  ``RecordActivities`` with 100 changed activities (100 sessions).

eventsourcing (benchmark-only dependency) runs with its defaults: stdlib ``sqlite3``, file
database, WAL, ``synchronous`` left at SQLite's default (FULL, checked and recorded);
relaystore runs with ``synchronous=FULL`` and group commit on. Rounds alternate which side
goes first; medians of 3 rounds (1 with ``--quick``). Figures are events/s. Aim:
relaystore ahead (ratio > 1) in both.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from uuid import UUID, uuid4

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiActivityChanged, ApiActivityState
from relaystore.domain.messages import RecordActivities, SaveSession
from relaystore.storage.events import encode_event_body
from relaystore.testing import example_session
from suite.common import Context, Figure, drive, log, median

NAME = "peer"
SENDERS = (1, 4)
BATCHES = (1, 100)


def _states() -> list[ApiActivityState]:
    return [
        ApiActivityState(
            state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
        )
        for i in range(2)
    ]


def eventsourcing_rate(path: Path, senders: int, batch: int, seconds: float) -> tuple[float, int]:
    """Events/s of ``insert_events`` with ``batch`` events per call; and the synchronous level."""
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    datastore = SQLiteDatastore(str(path))
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    with datastore.transaction(commit=False) as cursor:
        cursor.execute("PRAGMA synchronous")
        synchronous = int(cursor.fetchone()[0])
    bodies = [encode_event_body(ApiActivityChanged.of(activity=s)).encode() for s in _states()]
    originators: list[list[UUID]] = [[uuid4() for _ in range(batch)] for _ in range(senders)]

    def send(sender: int, i: int) -> None:
        recorder.insert_events(
            [
                StoredEvent(
                    originator_id=originator,
                    originator_version=i + 1,
                    topic="activity_changed",
                    state=bodies[i % 2],
                )
                for originator in originators[sender]
            ]
        )

    try:
        rate = drive(senders, seconds, send) * batch
    finally:
        datastore.close()
    return rate, synchronous


def relaystore_rate(path: Path, senders: int, batch: int, seconds: float) -> float:
    """Events/s of RecordActivities with ``batch`` changed activities per message."""
    with EventStore.open(path, synchronous="FULL") as store:
        sessions = [[f"s{sender}-{k}" for k in range(batch)] for sender in range(senders)]
        for ids in sessions:
            for session_id in ids:
                store.ask(SaveSession(record=example_session(session_id, "bench")))
        states = _states()

        def send(sender: int, i: int) -> None:
            state = states[i % 2]
            store.ask(
                RecordActivities(
                    activities=[(session_id, state) for session_id in sessions[sender]],
                    recorded_at_ms=i,
                )
            )

        return drive(senders, seconds, send) * batch


def run(ctx: Context) -> list[Figure]:
    rounds = ctx.scale(3, 1)
    seconds = ctx.scale(15, 5) / 10
    configs = [(senders, batch) for batch in BATCHES for senders in SENDERS]
    ours: dict[tuple[int, int], list[float]] = {c: [] for c in configs}
    theirs: dict[tuple[int, int], list[float]] = {c: [] for c in configs}
    synchronous = -1
    for r in range(rounds):
        for senders, batch in configs:
            stem = ctx.scratch / f"peer-{r}-{senders}-{batch}"
            sides = ["eventsourcing", "relaystore"]
            if r % 2:
                sides.reverse()
            for side in sides:
                if side == "eventsourcing":
                    rate, synchronous = eventsourcing_rate(
                        stem.with_suffix(".es.db"), senders, batch, seconds
                    )
                    theirs[(senders, batch)].append(rate)
                else:
                    ours[(senders, batch)].append(
                        relaystore_rate(stem.with_suffix(".sqlite3"), senders, batch, seconds)
                    )
            log(
                f"peer round {r + 1}/{rounds}, {senders} sender(s) x {batch}/call: relaystore "
                f"{ours[(senders, batch)][-1]:,.0f} vs eventsourcing "
                f"{theirs[(senders, batch)][-1]:,.0f} events/s"
            )
    figures = []
    for senders, batch in configs:
        value, base = median(ours[(senders, batch)]), median(theirs[(senders, batch)])
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"{batch} event{'s' if batch > 1 else ''}/call, {senders} sender{'s' if senders > 1 else ''}",
                value=value,
                unit="events/s",
                baseline=f"eventsourcing {version('eventsourcing')} SQLite recorder",
                baseline_value=base,
                aim="ratio > 1",
                ok=value > base,
                details={
                    "rounds": ours[(senders, batch)],
                    "baseline_rounds": theirs[(senders, batch)],
                    "eventsourcing_synchronous": synchronous,
                    "seconds_per_run": seconds,
                },
            )
        )
    return figures
