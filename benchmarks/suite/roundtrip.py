"""roundtrip: where one sender's ``ask`` spends its time, stage by stage, in one run.

One sender, one message at a time, so every figure is the time of one round trip (µs per
call; the median of the rounds). The stages, interleaved and repeated (5 rounds; 3 with
``--quick``) because the disk is noisy:

* ``queue hop``: a bare ``queue.Queue`` handoff to a thread and back (a reply queue):
  the floor for any thread hop in CPython;
* ``pykka ask``: ``ActorRef.ask`` to a trivial actor that returns the message;
* ``validate``: ``validate_message`` of the writer message alone (no store);
* ``batch OFF`` / ``batch FULL``: the writer's storage work alone, in the calling thread
  (no actor): a :class:`~relaystore.storage.batch.Batch` that performs one
  ``RecordActivities`` (one changed activity, one API event) and commits, on a writer
  connection at ``synchronous=OFF`` / ``FULL``;
* ``ask OFF`` / ``ask FULL``: ``EventStore.ask`` of the same message on a store opened
  at ``synchronous=OFF`` / ``FULL``, from a thread of its own as an embedder's worker
  asks (the whole path: validation, the writer's batch, commit, reply; a lone ask there
  runs its batch in the asking thread, the writer's fast path);
* ``ask OFF main``: the same from the main thread, which always hands over to the
  writer actor (two thread hops);
* ``observe thread`` / ``observe process``: ``EventStore.ask`` of an
  ``ObserveRelayEvents`` of one relay event at ``FULL``, projected in the projector's
  thread or (``projection="process"``) in a worker process: what a worker process
  adds to one small message;
* ``apsw OFF`` / ``apsw FULL``: a bare apsw ``BEGIN IMMEDIATE`` / ``INSERT`` of a
  ~100-byte row / ``COMMIT`` on a plain WAL table: what the peer library pays for one
  event, and its floor without fsync.

Each is a figure in µs per call with the baseline that explains it: the hop against
the transaction the peer pays; pykka against the bare hop; ``ask OFF`` against
``batch OFF`` (their difference is the facade's Python and the fast path's check);
``ask OFF main`` against ``ask OFF`` (what the hand-over adds); ``ask FULL``
against ``apsw FULL`` (the one-sender gap to the peer's floor); ``batch FULL`` against
``apsw FULL`` (what relaystore's transaction costs beyond the peer's); ``apsw FULL``
against ``apsw OFF`` (the fsync). One aim (:data:`AIMS`): ``batch OFF`` within 3x
``apsw OFF``; the rest explain the writer and peer figures.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pykka

from relaystore.actors.journal import read_journal
from relaystore.actors.store import EventStore
from relaystore.actors.writer import perform
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.messages import ObserveRelayEvents, RecordActivities, SaveSession
from relaystore.domain.relay import RelayEvent
from relaystore.domain.validation import validate_message
from relaystore.storage.batch import Batch
from relaystore.storage.connection import open_writer
from relaystore.testing import example_session
from suite.common import Context, Figure, log, median
from suite.journal import write_journal

NAME = "roundtrip"

STAGES = (
    "queue hop",
    "pykka ask",
    "validate",
    "batch OFF",
    "ask OFF",
    "ask OFF main",
    "apsw OFF",
    "batch FULL",
    "ask FULL",
    "apsw FULL",
    "observe thread",
    "observe process",
)

_STATES = [
    ApiActivityState(
        state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    for i in range(2)
]
_SESSION = "roundtrip-session"


EVENTS_PER_STAGE = 12_000
"""Relay events each ``observe`` stage may use (one per call; far more than a stage's
calls at the slowest measured ask)."""


def _events(ctx: Context, count: int) -> list[RelayEvent]:
    def build() -> list[RelayEvent]:
        path = ctx.scratch / f"roundtrip-{count}.jsonl"
        write_journal(path, count)
        return [event for event, _ in read_journal(path)]

    events: list[RelayEvent] = ctx.shared(f"roundtrip-events-{count}", build)
    return events


def _message(i: int) -> RecordActivities:
    """One changed activity (the states alternate), so every call appends one event."""
    return RecordActivities(activities=[(_SESSION, _STATES[i % 2])], recorded_at_ms=i)


def _per_call(seconds: float, call: Callable[[int], object]) -> float:
    """µs per ``call(i)``, calling in a loop for about ``seconds`` (after a short warm-up)."""
    for i in range(20):
        call(i)
    calls = 0
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        for _ in range(16):
            call(calls)
            calls += 1
        now = time.perf_counter()
        if now >= deadline:
            return (now - started) / calls * 1e6


def queue_hop(seconds: float) -> float:
    """A bare queue.Queue handoff to a thread and back through a reply queue."""
    requests: queue.Queue[Any] = queue.Queue(maxsize=256)
    replies: queue.Queue[Any] = queue.Queue()

    def serve() -> None:
        while True:
            item = requests.get()
            if item is None:
                return
            replies.put(item)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def call(i: int) -> object:
        requests.put(i)
        return replies.get()

    try:
        return _per_call(seconds, call)
    finally:
        requests.put(None)
        thread.join()


class _Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def pykka_ask(seconds: float) -> float:
    """``ActorRef.ask`` to an actor that answers with the message."""
    ref = _Echo.start()
    try:
        return _per_call(seconds, ref.ask)
    finally:
        ref.stop()


def validate(seconds: float) -> float:
    """``validate_message`` of the benchmark's writer message."""
    message = _message(0)
    return _per_call(seconds, lambda _i: validate_message(message))


def batch(path: Path, synchronous: str, seconds: float) -> float:
    """The writer's storage work alone: one Batch performing one RecordActivities, as
    the writer runs a batch of one message (``alone``: no savepoint)."""
    writer = open_writer(path, synchronous=synchronous)  # type: ignore[arg-type]
    try:
        with Batch(writer) as first:
            first.run(perform, SaveSession(record=example_session(_SESSION, "bench")))
            first.commit()

        def call(i: int) -> int:
            with Batch(writer) as transaction:
                _value, error = transaction.run(perform, _message(i), alone=True)
                if error is not None:
                    raise error
                return transaction.commit()

        return _per_call(seconds, call)
    finally:
        writer.close()


def ask(path: Path, synchronous: str, seconds: float, *, main: bool = False) -> float:
    """``EventStore.ask`` of one RecordActivities (the whole path), from a thread of its
    own, or (``main``) from this, the main, thread."""
    with EventStore.open(path, synchronous=synchronous) as store:  # type: ignore[arg-type]
        store.ask(SaveSession(record=example_session(_SESSION, "bench")))

        def asks() -> float:
            return _per_call(seconds, lambda i: store.ask(_message(i)))

        rate = asks() if main else _elsewhere(asks)
        if store.latest_seq == 0:
            raise RuntimeError("the roundtrip benchmark wrote no events")
        return rate


def _elsewhere(call: Callable[[], float]) -> float:
    """``call()`` in a thread of its own (not the main one); its result."""
    box: list[float] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)

    thread = threading.Thread(target=run, name="roundtrip-asker")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return box[0]


def observe(path: Path, projection: str, seconds: float, events: list[RelayEvent]) -> float:
    """``EventStore.ask`` of an ``ObserveRelayEvents`` of one event at FULL, projected in
    the projector's thread or in a worker process."""
    with EventStore.open(path, projection=projection) as store:  # type: ignore[arg-type]
        store.ask(SaveSession(record=example_session(_SESSION, "bench")))
        feed = iter(events)
        return _per_call(
            seconds,
            lambda _i: store.ask(ObserveRelayEvents(session_id=_SESSION, events=[next(feed)])),
        )


def bare_apsw(path: Path, synchronous: str, seconds: float) -> float:
    """BEGIN IMMEDIATE / INSERT / COMMIT on a plain WAL table."""
    db = apsw.Connection(str(path))
    try:
        db.execute("PRAGMA journal_mode=WAL").fetchall()
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, body TEXT)")
        body = '{"kind":"activity_changed","activity":{"state":"running-0"}}' + " " * 40

        def call(_i: int) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO events(body) VALUES (?)", (body,))
            db.execute("COMMIT")

        return _per_call(seconds, call)
    finally:
        db.close()


def measure(stage: str, stem: Path, seconds: float, events: list[RelayEvent]) -> float:
    """µs per call of one stage (its stores are files named after ``stem``)."""
    if stage.startswith("observe"):
        return observe(
            Path(f"{stem}-{stage.replace(' ', '-')}.sqlite3"), stage.split()[1], seconds, events
        )
    if stage == "queue hop":
        return queue_hop(seconds)
    if stage == "pykka ask":
        return pykka_ask(seconds)
    if stage == "validate":
        return validate(seconds)
    if stage == "ask OFF main":
        return ask(Path(f"{stem}-ask-OFF-main.sqlite3"), "OFF", seconds, main=True)
    kind, synchronous = stage.split()
    store = {"batch": batch, "ask": ask, "apsw": bare_apsw}[kind]
    return store(Path(f"{stem}-{kind}-{synchronous}.sqlite3"), synchronous, seconds)


AIMS = {"batch OFF": 3.0}
"""The aims of the rows that have one: one ``RecordActivities`` through the writer's
batch at ``synchronous=OFF`` within 3x a bare apsw insert transaction (the
performance issue's aim; its moonshot is 2x)."""


def run(ctx: Context) -> list[Figure]:
    rounds = ctx.scale(5, 3)
    seconds = ctx.scale(10, 3) / 10
    samples: dict[str, list[float]] = {stage: [] for stage in STAGES}
    events = _events(ctx, EVENTS_PER_STAGE)
    for r in range(rounds):
        stem = ctx.scratch / f"roundtrip-{r}"
        # Rotate the order each round so no stage always runs first or last.
        order = STAGES[r % len(STAGES) :] + STAGES[: r % len(STAGES)]
        for stage in order:
            samples[stage].append(measure(stage, stem, seconds, events))
        log(
            f"roundtrip round {r + 1}/{rounds}: "
            + ", ".join(f"{stage} {samples[stage][-1]:.1f}" for stage in STAGES)
            + " µs/call"
        )
    us = {stage: median(values) for stage, values in samples.items()}
    log(
        "roundtrip breakdown (µs/call, medians): "
        f"hop {us['queue hop']:.1f}, pykka {us['pykka ask']:.1f}, validate "
        f"{us['validate']:.1f}, hand-over + facade (ask OFF - batch OFF) "
        f"{us['ask OFF'] - us['batch OFF']:.1f}, from the main thread (ask OFF main - "
        f"batch OFF) {us['ask OFF main'] - us['batch OFF']:.1f}, relaystore txn beyond the peer's "
        f"(batch FULL - apsw FULL) {us['batch FULL'] - us['apsw FULL']:.1f}, fsync "
        f"(apsw FULL - apsw OFF) {us['apsw FULL'] - us['apsw OFF']:.1f}"
    )
    rows = [
        ("queue hop", "a bare queue.Queue hop to a thread and back", "apsw FULL"),
        ("pykka ask", "pykka ask to a trivial actor", "queue hop"),
        ("validate", "validate_message(RecordActivities)", "ask OFF"),
        ("ask OFF", "EventStore.ask(RecordActivities), synchronous=OFF", "batch OFF"),
        (
            "ask OFF main",
            "EventStore.ask(RecordActivities) from the main thread, synchronous=OFF",
            "ask OFF",
        ),
        ("batch OFF", "the writer's Batch alone (no actor), synchronous=OFF", "apsw OFF"),
        ("ask FULL", "EventStore.ask(RecordActivities), synchronous=FULL", "apsw FULL"),
        ("batch FULL", "the writer's Batch alone (no actor), synchronous=FULL", "apsw FULL"),
        ("apsw FULL", "bare apsw BEGIN IMMEDIATE/INSERT/COMMIT, synchronous=FULL", "apsw OFF"),
        (
            "observe process",
            'EventStore.ask(ObserveRelayEvents of 1 event), FULL, projection="process"',
            "observe thread",
        ),
        ("observe thread", "EventStore.ask(ObserveRelayEvents of 1 event), FULL", "ask FULL"),
    ]
    figures = []
    for stage, name, baseline in rows:
        aim = AIMS.get(stage)
        figures.append(
            Figure(
                benchmark=NAME,
                name=f"{stage}: {name}",
                value=us[stage],
                unit="µs/call",
                baseline=baseline,
                baseline_value=us[baseline],
                aim="" if aim is None else f"ratio <= {aim}",
                ok=None if aim is None else us[stage] / us[baseline] <= aim,
                details={
                    "rounds_us": samples[stage],
                    "baseline_rounds_us": samples[baseline],
                    "seconds_per_stage": seconds,
                    "medians_us": us,
                },
            )
        )
    return figures
