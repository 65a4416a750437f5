"""Is a child process worth it for replay? Projection in a second process vs one thread.

    python benchmarks/process_projection.py [--events 50000] [--rounds 3]

Issue 14 asks whether the machine's second core should project (a child process; under
the GIL a second Python thread only adds contention). This script measures, in one run
and on the same generated journal, three ways to read, project and commit it into a
fresh store at ``synchronous=FULL``:

* ``thread``: the product path, ``relaystore replay``'s ``replay_source`` (reading a batch
  ahead in a thread, a projector actor pipelining pages to the writer actor);
* ``inline``: the same work in one thread with no actors (read, decode, project, fold a
  page, ``commit_page``): what the actors cost on top;
* ``process``: the parent reads raw lines and commits pages; a child process decodes,
  checks, projects and folds them into pages and ships each page back pickled
  (``multiprocessing`` pipes; pages are a dataclass of msgspec structs). The parent
  keeps at most ``DEPTH`` batches of lines in flight, so both processes stay busy;
* ``process-decoded``: the same, but the parent reads and decodes the events (with the
  journal reader, as replay does) and ships them pickled; the child only projects.

It prints events/s for each, the ratio of each to ``thread``, and each process's CPU
seconds, so the bound of the ``process`` prototype (the child's projection, or the
parent's commits) can be read off. A prototype only: no seeding, no error locations.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from suite.journal import write_journal  # noqa: E402

from relaystore.actors.journal import JournalReader, resolve_source  # noqa: E402
from relaystore.actors.projector import PAGE_SIZE  # noqa: E402
from relaystore.actors.replay import minimal_record, replay_source  # noqa: E402
from relaystore.actors.store import EventStore  # noqa: E402
from relaystore.domain.materialized import MaterializedSession  # noqa: E402
from relaystore.domain.projection import PageDelta, SessionProjection  # noqa: E402
from relaystore.domain.relay import RelayEvent, decode_relay_event  # noqa: E402
from relaystore.storage.connection import open_writer  # noqa: E402
from relaystore.storage.projection import commit_page  # noqa: E402
from relaystore.storage.sessions import save_session  # noqa: E402

SESSION = "bench-session"
LINES_PER_BATCH = 4 * PAGE_SIZE
DEPTH = 3


def _batches(path: Path) -> list[list[bytes]]:
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    return [lines[i : i + LINES_PER_BATCH] for i in range(0, len(lines), LINES_PER_BATCH)]


def _project(
    projection: SessionProjection, lines: list[bytes] | list[RelayEvent]
) -> list[PageDelta]:
    pages: list[PageDelta] = []
    page = PageDelta.starting_at(SESSION, projection.frontier)
    for line in lines:
        event = line if isinstance(line, RelayEvent) else decode_relay_event(line)
        mutation = projection.apply(event)
        if mutation is None:
            continue
        page.add(event, mutation, applied_at_end=True)
        if page.applied == PAGE_SIZE:
            pages.append(page)
            page = PageDelta.starting_at(SESSION, projection.frontier)
    if page.applied:
        pages.append(page)
    return pages


def run_thread(journal: Path, store_path: Path) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    with EventStore.open(store_path, synchronous="FULL") as store:
        report = replay_source(store, resolve_source(journal, session_id=SESSION))
    return report.applied / (time.perf_counter() - started), time.process_time() - cpu


def run_inline(journal: Path, store_path: Path) -> tuple[float, float]:
    batches = _batches(journal)
    started, cpu = time.perf_counter(), time.process_time()
    writer = open_writer(store_path, synchronous="FULL")
    save_session(writer.connection, minimal_record(SESSION, at="2026-01-01T00:00:00Z"))
    projection = SessionProjection(MaterializedSession.empty(SESSION))
    applied = 0
    for lines in batches:
        for page in _project(projection, lines):
            applied += commit_page(writer.connection, SESSION, page)[1]
    writer.close()
    return applied / (time.perf_counter() - started), time.process_time() - cpu


def _child(conn: Connection) -> None:
    projection = SessionProjection(MaterializedSession.empty(SESSION))
    cpu = time.process_time()
    while True:
        lines = conn.recv()
        if lines is None:
            conn.send_bytes(pickle.dumps(time.process_time() - cpu))
            return
        conn.send_bytes(pickle.dumps(_project(projection, lines), pickle.HIGHEST_PROTOCOL))


def _decoded_batches(journal: Path) -> Iterator[list[RelayEvent]]:
    batch: list[RelayEvent] = []
    for event, _ in JournalReader(resolve_source(journal, session_id=SESSION)):
        batch.append(event)
        if len(batch) == LINES_PER_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def run_process(journal: Path, store_path: Path, *, decoded: bool) -> tuple[float, float, float]:
    batches: list[Any] = [] if decoded else _batches(journal)
    context = multiprocessing.get_context("spawn")
    parent, child_end = context.Pipe()
    child = context.Process(target=_child, args=(child_end,), daemon=True)
    child.start()
    parent.send([])  # warm up: the child has imported everything before the clock starts
    parent.recv_bytes()
    started, cpu = time.perf_counter(), time.process_time()
    writer = open_writer(store_path, synchronous="FULL")
    save_session(writer.connection, minimal_record(SESSION, at="2026-01-01T00:00:00Z"))
    applied = sent = received = 0
    reading = _decoded_batches(journal) if decoded else iter(batches)
    exhausted = False
    while not exhausted or received < sent:
        while not exhausted and sent - received < DEPTH:
            batch = next(reading, None)
            if batch is None:
                exhausted = True
                break
            parent.send(batch)
            sent += 1
        pages: list[PageDelta] = pickle.loads(parent.recv_bytes())
        received += 1
        for page in pages:
            applied += commit_page(writer.connection, SESSION, page)[1]
    writer.close()
    rate = applied / (time.perf_counter() - started)
    parent_cpu = time.process_time() - cpu
    parent.send(None)
    child_cpu: float = pickle.loads(parent.recv_bytes())
    child.join()
    return rate, parent_cpu, child_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relaystore-process-") as scratch:
        folder = Path(scratch)
        journal = folder / "journal.jsonl"
        write_journal(journal, args.events, seed=7)
        rates: dict[str, list[float]] = {
            "thread": [],
            "inline": [],
            "process": [],
            "process-decoded": [],
        }
        cpus: dict[str, list[float]] = {
            "thread": [],
            "inline": [],
            "parent": [],
            "child": [],
            "parent-decoded": [],
            "child-decoded": [],
        }
        for r in range(args.rounds):
            rate, cpu = run_thread(journal, folder / f"thread-{r}.sqlite3")
            rates["thread"].append(rate)
            cpus["thread"].append(cpu)
            rate, cpu = run_inline(journal, folder / f"inline-{r}.sqlite3")
            rates["inline"].append(rate)
            cpus["inline"].append(cpu)
            for decoded, name, suffix in (
                (False, "process", ""),
                (True, "process-decoded", "-decoded"),
            ):
                rate, parent_cpu, child_cpu = run_process(
                    journal, folder / f"{name}-{r}.sqlite3", decoded=decoded
                )
                rates[name].append(rate)
                cpus["parent" + suffix].append(parent_cpu)
                cpus["child" + suffix].append(child_cpu)
    base = statistics.median(rates["thread"])
    print(f"{args.events:,} events, median of {args.rounds} rounds (synchronous=FULL)")
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"  {name:8} {rate:9,.0f} events/s  ratio to thread {rate / base:.2f}")
    print(
        "  CPU s (median): "
        + ", ".join(f"{name} {statistics.median(values):.2f}" for name, values in cpus.items())
    )


if __name__ == "__main__":
    main()
