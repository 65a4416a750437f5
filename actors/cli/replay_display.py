"""``relaystore replay``: journals into the store, saying how it goes.

Guarantees:

* The sources are gathered first
  (:func:`~relaystore.actors.journal.sources.gather_sources`): the files of one session
  given one by one are read in ordinal order as one source, whatever order the shell
  gave them in.
* One progress display on stderr across every journal (on a terminal, once the replay
  has run a second; ``--progress`` always, ``--no-progress`` never): sessions done of
  total, events read of the events the journals hold past the store's frontiers, the
  rate and the time left.
* Each session's summary line is printed on stderr as soon as its journal is done (with
  ``--json``, also one JSON line on stdout); the totals come last.
* Ctrl-C prints one line saying how far the replay got and exits 130, no traceback:
  its counts are exactly what was committed (the batches handed to the store before it
  are waited for and counted); what was committed stays (a batch is committed whole or not at all), and replaying
  again resumes at each session's frontier. While the store is open, Ctrl-C is noted and
  acted on at the next batch boundary (a fraction of a second), never in the middle of
  a call into the store, whose actors it could leave waiting for ever; a second Ctrl-C
  interrupts at once.

Must not: read a journal or apply it (:mod:`..replay` and :mod:`..journal` do); the
store, the replay and tqdm are imported inside ``replay_command``, so ``--help``
loads no runtime.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from ...domain.wording import plural
from .output import is_tty, print_line

if TYPE_CHECKING:
    from ..journal import JournalSource
    from ..replay import ReplayReport

__all__ = ["replay_command"]

_QUIET_SECONDS = 1.0
"""On a terminal, the display appears once the replay has run this long (a quick replay
prints its summary lines only)."""


@dataclass
class _ReplayTotals:
    """Everything replayed so far, for the totals line and the line on Ctrl-C."""

    sessions: int
    sessions_done: int = 0
    stored: int = 0
    read: int = 0
    applied: int = 0
    already: int = 0
    written: int = 0
    reading: str | None = None
    """The session whose journal is being read."""
    left: dict[str, int] = field(default_factory=dict)
    """Sources still to read, per session."""

    def add(self, report: ReplayReport) -> None:
        self.read += report.read
        self.applied += report.applied
        self.already += report.already_applied
        self.written += report.written
        self.left[report.session_id] -= 1
        if not self.left[report.session_id]:
            self.sessions_done += 1
            self.stored += report.frontier is not None


class _Display:
    """The one progress bar over all journals (tqdm on stderr), or nothing."""

    def __init__(self, wanted: bool | None, sources: list[JournalSource], sessions: int) -> None:
        enabled = wanted is True or (wanted is None and is_tty(sys.stderr))
        self._estimates = [source.last_ordinal or 0 for source in sources]
        self._sessions = sessions
        self._current = 0
        self._seen = 0  # events of the current source already counted
        self.bar: Any = None
        if enabled:
            from tqdm import tqdm

            total = sum(self._estimates)
            self.bar = tqdm(
                desc=self._label(0),
                total=total or None,
                unit="ev",
                file=sys.stderr,
                dynamic_ncols=True,
                delay=0 if wanted else _QUIET_SECONDS,
            )

    def _label(self, done: int) -> str:
        return f"{done}/{plural(self._sessions, 'session')}"

    def _shown(self) -> bool:
        """Whether the bar is on screen: tqdm draws it at an update once its quiet period
        is over. Until then nothing may redraw it (a refresh ignores the quiet period, and
        a bar drawn that way is left without its final newline when it closes)."""
        bar = self.bar
        return bar is not None and bool(bar.last_print_t >= bar.start_t + bar.delay)

    def start(self, index: int, report: ReplayReport) -> None:
        """A source begins: its events past the store's frontier replace its estimate."""
        self._current, self._seen = index, 0
        if self.bar is None or report.expected is None:
            return
        total = (self.bar.total or 0) - self._estimates[index] + report.expected
        self._estimates[index] = report.expected
        self.bar.total = total or None
        if self._shown():
            self.bar.refresh()

    def advance(self, report: ReplayReport) -> None:
        if self.bar is not None:
            self.bar.update(report.read - self._seen)
            self._seen = report.read

    def finished(self, done: int) -> None:
        if self.bar is not None:
            self.bar.set_description_str(self._label(done), refresh=self._shown())

    def say(self, line: str) -> None:
        """A line on stderr that the bar does not garble."""
        if self._shown():
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class _Interrupted(Exception):
    """Ctrl-C, acted on at a batch boundary."""


class _CtrlC:
    """Notes Ctrl-C while it is installed (main thread only); :meth:`check` acts on it."""

    def __init__(self) -> None:
        self.asked = False
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        self._previous = signal.signal(signal.SIGINT, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt  # asked twice: at once
        self.asked = True

    def check(self) -> None:
        if self.asked:
            raise _Interrupted


def replay_command(args: argparse.Namespace, paths: list[str]) -> int:
    """Run ``replay`` over ``paths`` (worker roots already expanded); the exit status."""
    from ..journal import gather_sources

    started = time.monotonic()
    sources = gather_sources(paths, session_id=args.session)
    sessions: dict[str, int] = {}
    for source in sources:
        sessions[source.session_id] = sessions.get(source.session_id, 0) + 1
    tally = _ReplayTotals(sessions=len(sessions), left=dict(sessions))
    display = _Display(args.progress, sources, len(sessions))
    try:
        _replay_all(args, sources, tally, display)
    except (KeyboardInterrupt, _Interrupted):
        display.close()
        where = f", in the middle of session {tally.reading}" if tally.reading else ""
        print(
            f"relaystore: interrupted after {tally.sessions_done} of "
            f"{plural(tally.sessions, 'session')} ({plural(tally.read, 'event')} read, "
            f"{tally.applied} applied{where}); what was committed stays: replay again to "
            "resume",
            file=sys.stderr,
            flush=True,
        )
        return 130
    finally:
        display.close()
    elapsed = max(time.monotonic() - started, 1e-9)
    print(
        f"replayed {plural(tally.read, 'event')}: {tally.applied} applied, "
        f"{tally.already} already applied, {plural(tally.written, 'API event')} written "
        f"({tally.read / elapsed:,.0f} events/s, {plural(tally.stored, 'session')})",
        file=sys.stderr,
    )
    return 0


def _replay_all(
    args: argparse.Namespace, sources: list[JournalSource], tally: _ReplayTotals, display: _Display
) -> None:
    from ..replay import replay_source
    from ..store import EventStore

    running: list[ReplayReport] = []  # the current journal's report, once it started
    with _CtrlC() as ctrl_c, EventStore.open(args.db, projection=args.projection) as store:

        def advance(report: ReplayReport) -> None:
            display.advance(report)
            ctrl_c.check()

        for index, source in enumerate(sources):
            ctrl_c.check()
            tally.reading = source.session_id
            running.clear()

            def start(report: ReplayReport, index: int = index) -> None:
                running.append(report)
                display.start(index, report)

            try:
                report = replay_source(
                    store,
                    source,
                    workspace=args.workspace,
                    on_start=start,
                    on_batch=advance,
                    from_first=args.from_first,
                )
            except (KeyboardInterrupt, _Interrupted):
                for current in running:  # what this journal did before the interrupt
                    tally.read += current.read
                    tally.applied += current.applied
                raise
            tally.reading = None
            tally.add(report)
            display.finished(tally.sessions_done)
            _report_session(report, display, as_json=args.json)


def _report_session(report: ReplayReport, display: _Display, *, as_json: bool) -> None:
    """The session's lines, as soon as its journal is done."""
    session_id = report.session_id
    for tail in report.torn_tails:
        display.say(
            f"relaystore: warning: {tail.path}:{tail.line}: torn final line "
            f"({plural(tail.byte_count, 'byte')} without a newline) was not applied"
        )
    if report.frontier is None:  # nothing to replay into a session the store lacks
        display.say(f"session {session_id}: empty journal, nothing replayed (no session created)")
    else:
        display.say(
            f"session {session_id}: {report.read} read, {report.applied} applied, "
            f"{report.already_applied} already applied, "
            f"{plural(report.written, 'API event')} written, frontier "
            f"{report.frontier.ordinal} ({report.frontier.digest[:12]})"
        )
    if report.behind is not None:
        display.say(
            f"relaystore: warning: session {session_id}: {report.behind.describe()} "
            "(upgrade relaystore; the session then catches up from its relay log)"
        )
    if as_json:
        frontier = report.frontier
        print_line(
            {
                "session_id": session_id,
                "read": report.read,
                "applied": report.applied,
                "already_applied": report.already_applied,
                "written": report.written,
                "frontier": None
                if frontier is None
                else {"ordinal": frontier.ordinal, "digest": frontier.digest},
                "held": report.held,
                "behind": None if report.behind is None else report.behind.describe(),
                "torn_tails": [
                    {"file": str(tail.path), "line": tail.line, "bytes": tail.byte_count}
                    for tail in report.torn_tails
                ],
            }
        )
