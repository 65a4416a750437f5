"""search: how fast the full-text search of transcript text answers, in a 100k-event store.

The store: the run's realistic journal (25k events; 5k with ``--quick``) replayed into
4 sessions, so it holds 100k relay events (20k) and their transcripts, indexed as they
were written (schema revision 13's triggers), through the same code as ``relaystore
replay``.

Queries, taken from the index's own vocabulary (``fts5vocab``): the most common word,
a word of median frequency, the word in the fewest items, a prefix (``wor*``-style: the common
word's first three letters), a two-word phrase from a stored item, the common word in
one session, and of one role. Each is asked ``ROUNDS`` times (``QUICK_ROUNDS``) through
``store.ask(SearchTranscripts(query, limit=50))`` (a page of 50 hits with snippets, on
the reader), interleaved with the baseline.

Baseline: a bare apsw ``SELECT rowid ... MATCH ? ORDER BY rowid DESC LIMIT 50`` on the
FTS5 table (the index alone: no join, no snippet, no actor hop) on a plain read-only
connection. The details add what the index saves: one ``LIKE '%word%'`` scan of every
item's stored text for the common and the rare word.

Figures: the median and p99 of each query. Aim: every median under 100 ms.

And what keeping the index costs the writer: replay events/s of one session's journal
into a fresh store (``synchronous=FULL``), against the same replay into a store whose
search triggers were dropped (no index kept), alternating, ``WRITE_ROUNDS`` rounds
(1 with ``--quick``), medians. Aim: ratio >= 0.9.
"""

from __future__ import annotations

import time
from pathlib import Path

import apsw

from relaystore.actors.store import EventStore
from relaystore.domain.search import SearchTranscripts
from suite.common import Context, Figure, log, median, percentile, replay_journal
from suite.replay import journal

NAME = "search"
AIM_MS = 100.0
SESSIONS = 4
ROUNDS = 40
QUICK_ROUNDS = 10
WRITE_ROUNDS = 3
WRITE_AIM = 0.9
_NO_INDEX = (
    "DROP TRIGGER transcript_search_added; DROP TRIGGER transcript_search_changed;"
    " DROP TRIGGER transcript_search_removed;"
)


def _store(ctx: Context, events: int) -> Path:
    """A store holding ``SESSIONS`` sessions of ``events`` relay events each."""
    stats = journal(ctx, events)
    path = ctx.scratch / f"search-{events * SESSIONS}.sqlite3"
    started = time.perf_counter()
    with EventStore.open(path, synchronous="OFF") as store:
        for n in range(SESSIONS):
            applied = replay_journal(store, stats.path, session_id=f"bench-{n}")
            if applied != stats.events:
                raise RuntimeError(f"replay applied {applied} of {stats.events} events")
    log(
        f"search: replayed {events * SESSIONS:,} events into {SESSIONS} sessions in "
        f"{time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:.0f} MB)"
    )
    return path


def _replay_rate(path: Path, journal_path: Path, events: int, *, index: bool) -> float:
    """Events/s of one replay of ``journal_path`` into a new store at ``path``."""
    EventStore.open(path).close()
    if not index:
        db = apsw.Connection(str(path))
        db.execute(_NO_INDEX)
        db.close()
    with EventStore.open(path, synchronous="FULL") as store:
        started = time.perf_counter()
        applied = replay_journal(store, journal_path)
        elapsed = time.perf_counter() - started
    if applied != events:
        raise RuntimeError(f"replay applied {applied} of {events} events")
    return events / elapsed


def _write_cost(ctx: Context, events: int) -> Figure:
    stats = journal(ctx, events)
    with_index: list[float] = []
    without: list[float] = []
    for n in range(ctx.scale(WRITE_ROUNDS, 1)):
        without.append(
            _replay_rate(ctx.scratch / f"search-off-{n}.sqlite3", stats.path, events, index=False)
        )
        with_index.append(
            _replay_rate(ctx.scratch / f"search-on-{n}.sqlite3", stats.path, events, index=True)
        )
        log(f"search: replay {with_index[-1]:,.0f} events/s indexed, {without[-1]:,.0f} not")
    value, bare = median(with_index), median(without)
    return Figure(
        benchmark=NAME,
        name=f"replay events/s keeping the search index, {events // 1000}k events",
        value=value,
        unit="events/s",
        baseline="the same replay, search triggers dropped",
        baseline_value=bare,
        aim=f"ratio >= {WRITE_AIM}",
        ok=value / bare >= WRITE_AIM,
        details={"indexed_runs": with_index, "unindexed_runs": without},
    )


def _queries(db: apsw.Connection) -> dict[str, tuple[str, str | None, str | None]]:
    """name -> (query, session, role), from the index's vocabulary."""
    db.execute("CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, transcript_search, row)")
    words = [
        (str(term), int(docs))  # type: ignore[arg-type]
        for term, docs in db.execute(
            "SELECT term, doc FROM temp.words WHERE term GLOB '[a-z][a-z][a-z]*' "
            "AND length(term) BETWEEN 4 AND 12 ORDER BY doc DESC, term"
        )
    ]
    common = words[0][0]
    middle = words[len(words) // 2][0]
    rare = words[-1][0]  # the fewest items (each session holds the same journal)
    text = str(
        db.execute(
            "SELECT view_text FROM materialized_transcript_items WHERE view_role = 'agent'"
            " AND length(view_text) > 40 ORDER BY rowid LIMIT 1"
        ).get
    )
    pair = " ".join(word for word in text.split() if word.isalpha() and word.isascii()).split()[:2]
    return {
        f"common word ({common})": (common, None, None),
        f"median word ({middle})": (middle, None, None),
        f"rare word ({rare})": (rare, None, None),
        f"prefix ({common[:3]}*)": (f"{common[:3]}*", None, None),
        f"phrase ({' '.join(pair)})": (f'"{" ".join(pair)}"', None, None),
        "common word, one session": (common, "bench-2", None),
        "common word, role user": (common, None, "user"),
    }


def _bare(db: apsw.Connection, query: str) -> float:
    started = time.perf_counter()
    db.execute(
        "SELECT rowid FROM transcript_search WHERE transcript_search MATCH ?"
        " ORDER BY rowid DESC LIMIT 50",
        (query,),
    ).fetchall()
    return (time.perf_counter() - started) * 1e3


def _scan(db: apsw.Connection, word: str) -> float:
    started = time.perf_counter()
    db.execute(
        "SELECT rowid FROM materialized_transcript_items WHERE view_text LIKE ? LIMIT 50",
        (f"%{word}%",),
    ).fetchall()
    return (time.perf_counter() - started) * 1e3


def run(ctx: Context) -> list[Figure]:
    per_session = ctx.scale(25_000, 5_000)
    rounds = ctx.scale(ROUNDS, QUICK_ROUNDS)
    path = _store(ctx, per_session)
    bare_db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    figures: list[Figure] = []
    try:
        items = int(bare_db.execute("SELECT count(*) FROM transcript_search_keys").get)  # type: ignore[arg-type]
        queries = _queries(bare_db)
        with EventStore.open(path, read_only=True) as store:
            for name, (query, session, role) in queries.items():
                message = SearchTranscripts(query=query, session_id=session, role=role, limit=50)
                ours: list[float] = []
                bare: list[float] = []
                hits = len(store.ask(message).hits)  # warm
                for _ in range(rounds):
                    bare.append(_bare(bare_db, query))
                    started = time.perf_counter()
                    store.ask(message)
                    ours.append((time.perf_counter() - started) * 1e3)
                log(
                    f"search {name}: median {median(ours):.2f} ms, p99 "
                    f"{percentile(ours, 0.99):.2f} ms ({hits} hits; bare index "
                    f"{median(bare):.2f} ms)"
                )
                figures.append(
                    Figure(
                        benchmark=NAME,
                        name=f"SearchTranscripts, {name}, {per_session * SESSIONS // 1000}k events",
                        value=median(ours),
                        unit="ms",
                        baseline="bare apsw FTS5 MATCH, 50 rowids",
                        baseline_value=median(bare),
                        aim=f"median < {AIM_MS:.0f} ms",
                        ok=median(ours) < AIM_MS,
                        details={
                            "p99_ms": percentile(ours, 0.99),
                            "hits": hits,
                            "items_indexed": items,
                            "runs_ms": ours,
                            "baseline_runs_ms": bare,
                        },
                    )
                )
        common, _, _ = next(iter(queries.values()))
        rare = list(queries.values())[2][0]
        scans = {word: _scan(bare_db, word) for word in (common, rare)}
        log(f"search: a LIKE scan instead of the index: {scans}")
        figures[0].details["like_scan_ms"] = scans
    finally:
        bare_db.close()
    figures.append(_write_cost(ctx, per_session))
    return figures
