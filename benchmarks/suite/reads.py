"""reads: a 100-event page at 1M events (100k with ``--quick``) while the writer is busy.

The store is :mod:`suite.bigstore`'s (300 sessions, 3 workspaces), opened with
``EventStore.open``. A background thread asks ``RecordActivities`` (one changed activity)
continuously for the whole measurement, so the writer commits all the time. Pages are
read at random cursors (early enough that every page is full) without a filter, with a
workspace filter and with a session filter:

* relaystore: ``store.ask(LoadApiEvents(filter, after_seq, limit=100))``, through a
  reader actor: the product path, typed ``ApiEvent`` s out;
* relaystore raw: ``store.ask(LoadRawApiEvents(...))``, the same page as the bytes
  ``relaystore events`` and the SSE stream print (nothing decoded), through a reader
  actor;
* relaystore raw from a thread of its own (an embedder's worker thread): the same ask
  timed in that thread, where an idle reader answers it in the asking thread (the read
  fast path: no hop);
* diagnostics: ``storage.paging.load_api_events`` and ``load_raw_api_events`` called
  directly on their own reader connection (the same work without the actor hop);
* baseline: a bare apsw ``SELECT`` of the same rows (tuples, nothing decoded) on a plain
  read-only connection.

Every path reads each cursor, in rotating order (so the page cache and the machine's
noise favour none). Aims: relaystore's median within 2x of the bare median and its p99
under 5 ms; the raw page's median within 1.5x of the bare median (issue 14).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import apsw

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiActivityState, ApiEventFilter
from relaystore.domain.messages import LoadApiEvents, LoadRawApiEvents, RecordActivities
from relaystore.storage.connection import open_reader
from relaystore.storage.paging import load_api_events, load_raw_api_events
from suite.bigstore import big_store
from suite.common import Context, Figure, log, median, percentile

NAME = "reads"
PAGE = 100
WARMUP = 50
P99_AIM_US = 5000.0
MEDIAN_AIM = 2.0
RAW_MEDIAN_AIM = 1.5
RAW_DIRECT_AIM = 1.2
"""The raw page without the actor hop: the performance issue's aim (its moonshot 1.0)."""

# The statements storage.paging runs, returning plain tuples.
BARE = {
    "none": "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e"
    " WHERE e.seq > ? ORDER BY e.seq LIMIT ?",
    "workspace": (
        "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e"
        " CROSS JOIN session_contexts w ON w.session_id = e.session_id"
        " WHERE w.workspace_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?"
    ),
    "session": (
        "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e"
        " WHERE e.session_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?"
    ),
}


class BusyWriter:
    """A thread asking RecordActivities (always a change) until stopped."""

    def __init__(self, store: EventStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        states = [
            ApiActivityState(
                state=f"busy-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
            )
            for i in range(2)
        ]
        try:
            while not self._stop.is_set():
                activity = (self.session_id, states[self.sent % 2])
                self.store.ask(RecordActivities(activities=[activity], recorded_at_ms=self.sent))
                self.sent += 1
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def __enter__(self) -> BusyWriter:
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = time.perf_counter() - self.started
        if self.error is not None:
            raise self.error


def _clock(call: Callable[[int], object], cursor: int) -> float:
    started = time.perf_counter_ns()
    call(cursor)
    return (time.perf_counter_ns() - started) / 1e3


def run(ctx: Context) -> list[Figure]:
    big = big_store(ctx)
    pages = ctx.scale(2000, 300)
    rng = random.Random(ctx.seed)
    session = big.session_ids[1]
    scenarios: list[tuple[str, ApiEventFilter, tuple[object, ...]]] = [
        ("none", ApiEventFilter(), ()),
        ("workspace", ApiEventFilter(workspace_id="team"), ("team",)),
        ("session", ApiEventFilter(session_id=session), (session,)),
    ]
    figures: list[Figure] = []
    bare_db = apsw.Connection(str(big.path), flags=apsw.SQLITE_OPEN_READONLY)
    direct_db = open_reader(big.path)
    try:
        with (
            EventStore.open(big.path) as store,
            BusyWriter(store, big.session_ids[0]) as busy,
            ThreadPoolExecutor(max_workers=1) as worker,
        ):
            for name, event_filter, bound in scenarios:
                spread = len(big.session_ids) if name == "session" else 4
                high = max(1, big.events - PAGE * spread)
                samples: dict[str, list[float]] = {
                    key: [] for key in ("ask", "direct", "raw", "raw_thread", "raw_direct", "bare")
                }
                sizes: set[int] = set()

                def asking(
                    message: type[LoadApiEvents] | type[LoadRawApiEvents],
                    event_filter: ApiEventFilter = event_filter,
                    sizes: set[int] = sizes,
                ) -> Callable[[int], None]:
                    def load_page(after: int) -> None:
                        request = message(filter=event_filter, after_seq=after, limit=PAGE)
                        sizes.add(len(store.ask(request).events))

                    return load_page

                ask, raw = asking(LoadApiEvents), asking(LoadRawApiEvents)

                def raw_thread(cursor: int, raw: Callable[[int], None] = raw) -> float:
                    """The raw ask timed in the worker thread (its own clock)."""
                    return worker.submit(_clock, raw, cursor).result()

                def direct(cursor: int, event_filter: ApiEventFilter = event_filter) -> None:
                    load_api_events(direct_db, event_filter, cursor, PAGE)

                def raw_direct(cursor: int, event_filter: ApiEventFilter = event_filter) -> None:
                    load_raw_api_events(direct_db, event_filter, cursor, PAGE)

                def bare(cursor: int, name: str = name, bound: tuple[object, ...] = bound) -> None:
                    bare_db.execute(BARE[name], (*bound, cursor, PAGE)).fetchall()

                paths: list[tuple[str, Callable[[int], object]]] = [
                    ("ask", ask),
                    ("direct", direct),
                    ("raw", raw),
                    ("raw_direct", raw_direct),
                    ("raw_thread", raw_thread),
                    ("bare", bare),
                ]
                for n in range(WARMUP + pages):
                    cursor = rng.randrange(0, high)
                    turn = n % len(paths)
                    order = paths[turn:] + paths[:turn]
                    for key, read in order:
                        took = raw_thread(cursor) if key == "raw_thread" else _clock(read, cursor)
                        if n >= WARMUP:
                            samples[key].append(took)
                stats = {k: (median(v), percentile(v, 0.99)) for k, v in samples.items()}
                log(
                    f"reads {name}: "
                    + ", ".join(f"{k} {v[0]:.0f}/{v[1]:.0f} us" for k, v in stats.items())
                    + " (median/p99)"
                )
                details = {
                    "pages": pages,
                    "store_events": big.events,
                    "page_sizes_seen": sorted(sizes),
                    **{f"{key}_p50_p99_us": value for key, value in stats.items()},
                }
                label = f"filter {name}"
                figures += [
                    Figure.against_bare(
                        NAME,
                        f"page median, {label}",
                        stats["ask"][0],
                        stats["bare"][0],
                        most=MEDIAN_AIM,
                        details=details,
                    ),
                    Figure(
                        benchmark=NAME,
                        name=f"page p99, {label}",
                        value=stats["ask"][1],
                        unit="us",
                        baseline="bare apsw SELECT p99",
                        baseline_value=stats["bare"][1],
                        aim=f"value < {P99_AIM_US:.0f} us",
                        ok=stats["ask"][1] < P99_AIM_US,
                    ),
                    Figure.against_bare(
                        NAME,
                        f"page median without actor hop, {label}",
                        stats["direct"][0],
                        stats["bare"][0],
                    ),
                    Figure.against_bare(
                        NAME,
                        f"raw page median, {label}",
                        stats["raw"][0],
                        stats["bare"][0],
                        most=RAW_MEDIAN_AIM,
                    ),
                    Figure.against_bare(
                        NAME,
                        f"raw page median from a thread of its own, {label}",
                        stats["raw_thread"][0],
                        stats["bare"][0],
                        most=RAW_MEDIAN_AIM,
                    ),
                    Figure.against_bare(
                        NAME,
                        f"raw page median without actor hop, {label}",
                        stats["raw_direct"][0],
                        stats["bare"][0],
                        most=RAW_DIRECT_AIM,
                    ),
                ]
        writer_rate = busy.sent / busy.seconds
        log(f"reads: the busy writer committed {writer_rate:,.0f} messages/s meanwhile")
        for figure in figures:
            if figure.details:
                figure.details["busy_writer_messages_per_s"] = writer_rate
    finally:
        bare_db.close()
        direct_db.close()
    return figures
