"""pages: a transcript page of a long session, and the session list of a big store.

The store (built once, ``synchronous=OFF``): one session whose transcript holds
``ITEMS`` items (28,000; 2,800 with ``--quick``), projected from prompt turns (a user
message and a streamed answer of about 400 bytes each, so every agent item's seq is its
latest chunk, not its position), beside ``SESSIONS`` other sessions (1,000; 200 with
``--quick``) of one prompt turn each, in two workspaces.

Figures, each path timed at the same random cursors in rotating order:

* transcript page: ``store.ask(LoadTranscriptPage(session, after_seq, limit=100))``
  through a reader actor (typed items: seq, role, text and the decoded body), against a
  bare apsw ``SELECT`` of the same rows (tuples, nothing decoded) on a plain read-only
  connection. Aim: median ratio <= 1.5. For diagnosis also ``storage.reads.
  transcript.load_transcript_page`` called directly (no actor hop), and, on the rows the bare
  read returned, what decoding the 100 bodies and flattening their text cost alone:
  the two per-item costs a typed page cannot skip, which bound the ratio.
* raw transcript page: ``store.ask(LoadRawTranscriptPage(...))`` (what ``GET
  .../transcript`` answers: each body its stored JSON, checked, never decoded) and
  ``load_raw_transcript_page`` without the hop, against the same bare ``SELECT``. Aim:
  median ratio <= 1.5.
* session list: ``store.ask(ListSessions())`` of every session, against a bare ``SELECT``
  of the same joined rows. No aim: the figure shows what decoding the records costs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import msgspec

from relaystore.actors.store import EventStore
from relaystore.domain.materialized import TranscriptBody
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.domain.reads import ListSessions, LoadRawTranscriptPage, LoadTranscriptPage
from relaystore.domain.transcript_views import item_text
from relaystore.storage.connection import open_reader
from relaystore.storage.reads.transcript import load_raw_transcript_page, load_transcript_page
from relaystore.storage.stored_columns import decode_transcript_bodies
from relaystore.testing import JournalBuilder, example_session
from suite.common import Context, Figure, log, median, percentile

NAME = "pages"
PAGE = 100
WARMUP = 30
PAGE_AIM = 1.5
LONG = "long-session"

BARE_PAGE = (
    "SELECT stable_id, position, latest_content_event_ordinal, created_at_ms,"
    " last_changed_at_ms, body_json FROM materialized_transcript_items"
    " WHERE session_id = ? AND COALESCE(latest_content_event_ordinal, position) > ?"
    " ORDER BY COALESCE(latest_content_event_ordinal, position), stable_id LIMIT ?"
)
BARE_LIST = (
    "SELECT s.session_id, s.record_json, c.workspace_id, m.execution_state,"
    " m.running_started_at_ms, m.session_title, m.configuration_json,"
    " m.pending_elicitations_json, a.body,"
    " (SELECT count(*) FROM materialized_queued_prompts q WHERE q.session_id = s.session_id)"
    " FROM sessions s JOIN session_contexts c ON c.session_id = s.session_id"
    " LEFT JOIN materialized_sessions m ON m.session_id = s.session_id"
    " LEFT JOIN api_session_activity a ON a.session_id = s.session_id ORDER BY s.session_id"
)
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "build")


def _answer(rng: random.Random) -> tuple[str, ...]:
    """An answer of about 400 bytes in 8 streamed chunks."""
    return tuple(" ".join(rng.choices(_WORDS, k=9)) + " " for _ in range(8))


def _build(path: Path, items: int, sessions: int, seed: int) -> None:
    rng = random.Random(seed)
    started = time.perf_counter()
    with EventStore.open(path, synchronous="OFF", max_projectors=8) as store:
        store.ask(SaveSession(record=example_session(LONG, "bench")))
        journal = JournalBuilder()
        batch = []
        for turn in range(items // 2):  # a user message and an answer per turn
            batch += journal.prompt_turn(f"question {turn}: what next?", chunks=_answer(rng))
            if len(batch) >= 2048:
                store.ask(ObserveRelayEvents(session_id=LONG, events=batch))
                batch = []
        if batch:
            store.ask(ObserveRelayEvents(session_id=LONG, events=batch))
        for n in range(sessions):
            session_id = f"s-{n:04d}"
            record = example_session(session_id, "bench")
            if n % 2:
                record = msgspec.structs.replace(record, workspace_id="team")
            store.ask(SaveSession(record=record))
            events = JournalBuilder().prompt_turn(f"task {n}", chunks=_answer(rng))
            store.ask(ObserveRelayEvents(session_id=session_id, events=events))
    log(
        f"pages: built {items} items and {sessions} sessions in {time.perf_counter() - started:.1f} s"
    )


def _clock(call: Callable[[], object]) -> float:
    started = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - started) / 1e3


def run(ctx: Context) -> list[Figure]:
    items = ctx.scale(28_000, 2_800)
    sessions = ctx.scale(1_000, 200)
    pages = ctx.scale(1_000, 200)
    lists = ctx.scale(40, 10)
    path = ctx.scratch / "pages.sqlite3"
    _build(path, items, sessions, ctx.seed)
    rng = random.Random(ctx.seed)
    bare_db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    direct_db = open_reader(path)
    try:
        with EventStore.open(path, read_only=True) as store:
            latest = store.ask(LoadTranscriptPage(session_id=LONG, limit=1))
            assert latest is not None
            high = max(1, latest.latest_seq - 3 * PAGE)  # every page full
            samples: dict[str, list[float]] = {
                key: [] for key in ("ask", "direct", "raw", "raw_direct", "bare", "decode", "text")
            }
            sizes: set[int] = set()
            fetched: list[list[tuple[Any, ...]]] = []
            decoded: list[list[TranscriptBody]] = []
            for n in range(WARMUP + pages):
                cursor = rng.randrange(0, high)

                def ask(cursor: int = cursor) -> None:
                    page = store.ask(
                        LoadTranscriptPage(session_id=LONG, after_seq=cursor, limit=PAGE)
                    )
                    assert page is not None
                    sizes.add(len(page.items))

                def direct(cursor: int = cursor) -> None:
                    load_transcript_page(direct_db, LONG, cursor, PAGE)

                def raw(cursor: int = cursor) -> None:
                    page = store.ask(
                        LoadRawTranscriptPage(session_id=LONG, after_seq=cursor, limit=PAGE)
                    )
                    assert page is not None

                def raw_direct(cursor: int = cursor) -> None:
                    load_raw_transcript_page(direct_db, LONG, cursor, PAGE)

                def bare(cursor: int = cursor) -> None:
                    fetched.append(bare_db.execute(BARE_PAGE, (LONG, cursor, PAGE)).fetchall())

                def decode() -> None:  # what a typed body costs, on the rows bare read
                    decoded.append(decode_transcript_bodies(fetched[-1], LONG))

                def flatten() -> None:  # what the text costs, on those bodies
                    for body in decoded[-1]:
                        item_text(body)

                paths = [
                    ("ask", ask),
                    ("direct", direct),
                    ("raw", raw),
                    ("raw_direct", raw_direct),
                    ("bare", bare),
                ]
                turn = n % len(paths)
                for key, read in paths[turn:] + paths[:turn]:
                    took = _clock(read)
                    if n >= WARMUP:
                        samples[key].append(took)
                for key, read in (("decode", decode), ("text", flatten)):
                    took = _clock(read)
                    if n >= WARMUP:
                        samples[key].append(took)
                fetched.clear()
                decoded.clear()
            listing: dict[str, list[float]] = {"ask": [], "bare": []}
            listed: set[int] = set()
            for n in range(3 + lists):

                def list_ask() -> None:
                    listed.add(len(store.ask(ListSessions()).sessions))

                def list_bare() -> None:
                    bare_db.execute(BARE_LIST).fetchall()

                order = [("ask", list_ask), ("bare", list_bare)]
                for key, read in order if n % 2 else order[::-1]:
                    took = _clock(read)
                    if n >= 3:
                        listing[key].append(took)
    finally:
        bare_db.close()
        direct_db.close()
    stats = {k: (median(v), percentile(v, 0.99)) for k, v in samples.items()}
    list_stats = {k: median(v) for k, v in listing.items()}
    log(
        "pages transcript: "
        + ", ".join(f"{k} {v[0]:.0f}/{v[1]:.0f} us" for k, v in stats.items())
        + f" (median/p99); session list: ask {list_stats['ask'] / 1e3:.1f} ms,"
        f" bare {list_stats['bare'] / 1e3:.1f} ms"
    )
    details = {
        "items": items,
        "pages": pages,
        "page_sizes_seen": sorted(sizes),
        **{f"{key}_p50_p99_us": value for key, value in stats.items()},
    }
    return [
        Figure.against_bare(
            NAME,
            f"transcript page median ({PAGE} items of {items})",
            stats["ask"][0],
            stats["bare"][0],
            most=PAGE_AIM,
            details=details,
        ),
        Figure.against_bare(
            NAME, "transcript page median without actor hop", stats["direct"][0], stats["bare"][0]
        ),
        Figure.against_bare(
            NAME,
            f"raw transcript page median ({PAGE} items, bodies as stored: GET .../transcript)",
            stats["raw"][0],
            stats["bare"][0],
            most=PAGE_AIM,
        ),
        Figure.against_bare(
            NAME,
            "raw transcript page median without actor hop",
            stats["raw_direct"][0],
            stats["bare"][0],
        ),
        Figure.against_bare(
            NAME, "of which: decoding the page's bodies", stats["decode"][0], stats["bare"][0]
        ),
        Figure.against_bare(
            NAME, "of which: flattening the page's text", stats["text"][0], stats["bare"][0]
        ),
        Figure.against_bare(
            NAME,
            f"session list median ({sessions + 1} sessions)",
            list_stats["ask"],
            list_stats["bare"],
            details={"sessions_listed": sorted(listed), "rounds": lists},
        ),
    ]
