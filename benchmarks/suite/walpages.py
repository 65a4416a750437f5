"""wal: WAL pages one committed event writes, through the real store, against a bare insert.

Every page a transaction changes is one frame (a page and a 24-byte header) appended to
the ``-wal`` file at commit, and each of them is written (and, at ``synchronous=FULL``,
fsynced) again when a checkpoint copies it into the main file: pages a commit is what a
one-event commit costs the disk beyond its fsync.

How they are counted. A side connection empties the ``-wal`` (``PRAGMA
wal_checkpoint(TRUNCATE)``), then holds a read transaction on the emptied log, which
stops any checkpoint (automatic ones included) from copying frames back, so the log only
grows; after the round's commits the ``-wal``'s frames are read from the file: frames =
(size - 32) / (page size + 24), commits = frames carrying a commit mark, cross-checked
against ``PRAGMA wal_checkpoint``'s log size. Each frame's page number is mapped to the
b-tree that owns it (SQLite's ``dbstat``), so the figure says which tables and indexes
the pages belong to.

Measured, each on a fresh store at ``synchronous=FULL``, warmed first with the same
commits (so its b-trees have interior pages, as a store in use has; at ``synchronous=OFF``
to save time: the frames a commit writes do not depend on it), rounds interleaved (3 of
300 commits after 2,000 warm-up events; 2 of 60 after 200 with ``--quick``):

* ``EventStore.ask(RecordActivities)`` of one changed activity: one API event a commit
  (the issue 46 figure; aim: at most :data:`AIM` pages an event);
* ``RecordActivities`` of 8 sessions' changed activities in one message: 8 events a
  commit (what group commit shares: the pages per event when commits hold more);
* ``ObserveRelayEvents`` of one relay event of the realistic journal (:mod:`suite.journal`)
  a commit: what one streamed event costs when nothing batches it (no aim).

Baseline: a bare apsw ``BEGIN IMMEDIATE`` / ``INSERT`` of a ~100-byte row / ``COMMIT`` on
a plain WAL table (an ``INTEGER PRIMARY KEY`` and the body), counted the same way.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from relaystore.actors.journal import read_journal
from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.messages import ObserveRelayEvents, RecordActivities, SaveSession
from relaystore.testing import example_session
from suite.common import Context, Figure, log
from suite.journal import write_journal

NAME = "wal"
AIM = 2.0
"""Issue 46's aim: WAL pages written by one committed event."""

WAL_HEADER = 32
FRAME_HEADER = 24
GROUP = 8
"""Sessions whose activities one message of the group row carries."""

_STATES = [
    ApiActivityState(
        state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    for i in range(2)
]
_BODY = '{"kind":"activity_changed","activity":{"state":"running-0"}}' + " " * 40


@dataclass
class Pages:
    """What a count of commits appended to the ``-wal``."""

    frames: int = 0
    commits: int = 0
    events: int = 0
    """What the commits wrote: API events, or relay events observed."""
    owners: Counter[str] = field(default_factory=Counter)
    """Frames by the b-tree (table or index) that owns the page."""

    def add(self, other: Pages) -> None:
        self.frames += other.frames
        self.commits += other.commits
        self.events += other.events
        self.owners.update(other.owners)

    def per(self, count: int) -> float:
        return self.frames / count if count else float("nan")

    def by_owner(self, count: int) -> dict[str, float]:
        """Pages by owner per ``count`` (commits or events), largest first."""
        return {name: round(n / count, 3) for name, n in self.owners.most_common()}


def wal_frames(wal: Path) -> tuple[int, list[tuple[int, int]]]:
    """The page size of the ``-wal`` at ``wal`` (0: none or empty) and each of its whole
    frames: (page number, the database's size in pages on a commit's last frame, else 0)."""
    data = wal.read_bytes() if wal.exists() else b""
    if len(data) < WAL_HEADER:
        return 0, []
    (page_size,) = struct.unpack(">I", data[8:12])
    step = FRAME_HEADER + page_size
    return page_size, [
        struct.unpack(">II", data[at : at + 8])
        for at in range(WAL_HEADER, len(data) - step + 1, step)
    ]


def page_owners(db: apsw.Connection) -> dict[int, str]:
    """Page number -> the name of the b-tree that owns it (``dbstat``; free pages absent)."""
    return {int(page): str(name) for name, page in db.execute("SELECT name, pageno FROM dbstat")}


@contextmanager
def growing_wal(path: Path) -> Iterator[apsw.Connection]:
    """Empty the ``-wal`` of the database at ``path``, then pin it: a read transaction
    on the empty log, so no checkpoint copies frames back (it needs that reader gone)
    and the log only grows while the block runs. Yields the side connection."""
    side = apsw.Connection(str(path))
    try:
        side.set_busy_timeout(5000)
        busy, log_frames, _ = side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or log_frames:
            raise RuntimeError(f"could not empty the WAL of {path}: {busy=}, {log_frames=}")
        side.execute("BEGIN")
        side.execute("SELECT count(*) FROM sqlite_schema").fetchall()  # the snapshot starts
        try:
            yield side
        finally:
            side.execute("COMMIT")
    finally:
        side.close()


def count(path: Path, commit: Callable[[int], object], calls: int) -> Pages:
    """The frames ``calls`` calls of ``commit(i)`` append to the ``-wal`` of ``path``."""
    wal = Path(f"{path}-wal")
    with growing_wal(path):
        for i in range(calls):
            commit(i)
        page_size, frames = wal_frames(wal)
        size = wal.stat().st_size if wal.exists() else 0
        probe = apsw.Connection(str(path))  # a fresh snapshot: the newest pages
        try:
            owners = page_owners(probe)
            # PASSIVE copies nothing while the log is pinned; it reports the log's frames.
            _, logged, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            probe.close()
    whole = WAL_HEADER + len(frames) * (FRAME_HEADER + page_size) if frames else 0
    if logged != len(frames) or size != whole:
        raise RuntimeError(f"the WAL of {path}: {len(frames)} frames, {size} bytes, {logged=}")
    return Pages(
        frames=len(frames),
        commits=sum(1 for _, mark in frames if mark),
        owners=Counter(owners.get(page, "(freed)") for page, _ in frames),
    )


def _activities(store: EventStore, ids: list[str]) -> Callable[[int], object]:
    """A commit of one RecordActivities changing the activity of the sessions ``ids``."""

    def commit(i: int) -> object:
        activities = [(session_id, _STATES[i % 2]) for session_id in ids]  # always a change
        return store.ask(RecordActivities(activities=activities, recorded_at_ms=i))

    return commit


def measure_activities(path: Path, sessions: int, warmup: int, calls: int) -> Pages:
    """WAL frames of ``calls`` RecordActivities of ``sessions`` activities each, on a new
    store warmed (at ``synchronous=OFF``, to save time) with ``warmup`` such messages;
    its ``events`` are the API events they appended."""
    ids = [f"wal-{n}" for n in range(sessions)]
    with EventStore.open(path, synchronous="OFF") as store:
        for session_id in ids:
            store.ask(SaveSession(record=example_session(session_id, "bench")))
        commit = _activities(store, ids)
        for i in range(warmup):
            commit(i)
    with EventStore.open(path, synchronous="FULL") as store:
        commit = _activities(store, ids)
        before = store.latest_seq
        pages = count(path, lambda i: commit(warmup + i), calls)
        pages.events = store.latest_seq - before
    return pages


def measure_relay(path: Path, journal: Path, warmup: int, calls: int) -> Pages:
    """WAL frames of ``calls`` ObserveRelayEvents of one relay event each, the journal's
    events in order after the first ``warmup`` (observed at ``synchronous=OFF``, one a
    commit too)."""
    events = iter([event for event, _ in read_journal(journal)])
    session_id = "wal-relay"

    def commit_in(store: EventStore) -> Callable[[int], object]:
        return lambda _i: store.ask(
            ObserveRelayEvents(session_id=session_id, events=[next(events)])
        )

    with EventStore.open(path, synchronous="OFF") as store:
        store.ask(SaveSession(record=example_session(session_id, "bench")))
        commit = commit_in(store)
        for i in range(warmup):
            commit(i)
    with EventStore.open(path, synchronous="FULL") as store:
        pages = count(path, commit_in(store), calls)
    pages.events = calls
    return pages


def measure_bare(path: Path, warmup: int, calls: int) -> Pages:
    """WAL frames of ``calls`` bare one-row insert transactions at ``synchronous=FULL``
    (after ``warmup`` of them at ``OFF``)."""
    db = apsw.Connection(str(path))
    try:
        db.execute("PRAGMA journal_mode=WAL").fetchall()
        db.execute("PRAGMA synchronous=OFF")
        db.execute("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, body TEXT)")

        def commit(_i: int) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO events(body) VALUES (?)", (_BODY,))
            db.execute("COMMIT")

        for i in range(warmup):
            commit(i)
        db.execute("PRAGMA synchronous=FULL")
        pages = count(path, commit, calls)
    finally:
        db.close()
    pages.events = calls
    return pages


SIDES = ("one event", "8 events", "relay event", "bare")


def run(ctx: Context) -> list[Figure]:
    rounds = ctx.scale(3, 2)
    calls = ctx.scale(300, 60)
    warmup = ctx.scale(2_000, 200)
    journal = ctx.scratch / "wal-journal.jsonl"
    write_journal(journal, warmup + calls, seed=ctx.seed)
    totals = {side: Pages() for side in SIDES}
    per_round: dict[str, list[float]] = {side: [] for side in SIDES}
    for r in range(rounds):
        order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
        for side in order:
            path = ctx.scratch / f"wal-{r}-{side.replace(' ', '-')}.sqlite3"
            if side == "one event":
                pages = measure_activities(path, 1, warmup, calls)
            elif side == "8 events":
                pages = measure_activities(path, GROUP, warmup // GROUP, calls // 4)
            elif side == "relay event":
                pages = measure_relay(path, journal, warmup, calls)
            else:
                pages = measure_bare(path, warmup, calls)
            totals[side].add(pages)
            per_round[side].append(round(pages.per(pages.commits), 3))
        log(
            f"wal round {r + 1}/{rounds}: "
            + ", ".join(f"{side} {per_round[side][-1]:.2f}" for side in SIDES)
            + " pages/commit"
        )
    bare = totals["bare"]
    for side, pages in totals.items():
        log(
            f"wal {side}: {pages.frames} frames, {pages.commits} commits, {pages.events} "
            "events; pages a commit by b-tree: "
            + ", ".join(f"{k} {v:g}" for k, v in pages.by_owner(pages.commits).items())
        )

    def figure(side: str, name: str, unit: str, value: float, aim: float | None) -> Figure:
        pages = totals[side]
        return Figure(
            benchmark=NAME,
            name=name,
            value=value,
            unit=unit,
            baseline="bare apsw one-row INSERT a commit",
            baseline_value=bare.per(bare.commits),
            aim="" if aim is None else f"<= {aim:g} pages",
            ok=None if aim is None else value <= aim,
            details={
                "frames": pages.frames,
                "commits": pages.commits,
                "events": pages.events,
                "rounds_pages_per_commit": per_round[side],
                "pages_per_commit_by_btree": pages.by_owner(pages.commits),
                "baseline_pages_per_commit_by_btree": bare.by_owner(bare.commits),
                "warmup": warmup,
                "synchronous": "FULL",
            },
        )

    one, group, relay = totals["one event"], totals["8 events"], totals["relay event"]
    return [
        figure(
            "one event",
            "WAL pages a committed event: RecordActivities of 1 event a commit",
            "pages/event",
            one.per(one.events),
            AIM,
        ),
        figure(
            "8 events",
            f"WAL pages an event: RecordActivities of {GROUP} sessions' events a commit",
            "pages/event",
            group.per(group.events),
            None,
        ),
        figure(
            "relay event",
            "WAL pages a commit: ObserveRelayEvents of 1 relay event (realistic journal)",
            "pages/commit",
            relay.per(relay.commits),
            None,
        ),
    ]
