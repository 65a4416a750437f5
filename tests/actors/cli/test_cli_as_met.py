"""Frictions of the command line as a person meets them, where other tests covered them only
in part: ``events --follow -o text`` while another process writes, ``serve --access-log``
and ``--no-access-log`` from the command line, replay's progress display on a real
terminal (a pseudo-terminal) without ``--progress``, and what the README and the changelog
say of the test command's duration and of the version."""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
import tomllib
from pathlib import Path

import httpx
import pytest

from relaystore.testing import JournalBuilder
from tests.actors.cli.test_cli_service import Serving, token_of
from tests.actors.cli_support import (
    ENV,
    ROOT,
    TIMEOUT,
    LineReader,
    cli,
    command,
    events,
    ok,
    start,
    stop,
)

# -- events --follow -o text, while another process commits -----------------------------------

TEXT_LINE = re.compile(r"^(\d+)  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)  (\S+)  (\S+)(?:  (.*))?$")


def _clock(at_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(at_ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _worker_root(folder: Path, session_id: str, *prompts: str) -> Path:
    journal = JournalBuilder()
    for prompt in prompts:
        journal.prompt_turn(prompt)
    return journal.write_worker_root(folder / session_id, session_id)


@pytest.mark.integration
def test_events_follow_as_text_prints_a_readable_line_per_event_another_process_commits(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "store.sqlite3"
    ok(db, "replay", str(_worker_root(tmp_path, "first", "hello")))
    before = len(events(db))
    process = start(db, "events", "--follow", "-o", "text")
    spawned.append(process)
    assert process.stdout is not None
    reader = LineReader(process.stdout)
    deadline = time.monotonic() + TIMEOUT
    assert len(reader.take(before, deadline=deadline)) == before  # what was there

    # Another process commits while it follows: each event comes as one readable line.
    ok(db, "replay", str(_worker_root(tmp_path, "second", "one", "two")))
    wire = [json.loads(line) for line in events(db, "--after", str(before))]
    assert len(wire) == 4
    shown = reader.take(len(wire), deadline=deadline)
    assert len(shown) == len(wire), shown
    for line, event in zip(shown, wire, strict=True):
        match = TEXT_LINE.match(line)
        assert match is not None, line
        assert match.group(1, 2, 3, 4) == (
            str(event["seq"]),
            _clock(event["recorded_at_ms"]),
            "second",
            event["type"],
        )
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)

    # Ctrl-C stops it cleanly: status 130, no traceback, nothing more on stdout.
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=TIMEOUT) == 130
    reader.join()
    assert reader.lines.empty()
    assert process.stderr is not None
    assert "Traceback" not in process.stderr.read()


# -- serve --access-log, --no-access-log -------------------------------------------------------

ACCESS = re.compile(r'"(GET|POST|HEAD) (\S+) HTTP/1\.1" (\d{3})')


@pytest.fixture
def db(tmp_path: Path) -> Path:
    store = tmp_path / "store.sqlite3"
    ok(store, "replay", str(_worker_root(tmp_path, "session-1", "served")))
    return store


def _requests(lines: list[str]) -> list[tuple[str, str, int]]:
    """The requests the access log names, as (method, path, status)."""
    found = []
    for line in lines:
        match = ACCESS.search(line)
        if match is not None:
            found.append((match[1], match[2], int(match[3])))
    return found


@pytest.mark.integration
def test_serve_access_log_writes_one_line_per_request_on_stderr(
    db: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    server = Serving(spawned, command(db, "serve", "--port", "0", "--access-log"), cwd=db.parent)
    token = token_of(Path(f"{db}.api-token"))
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/api/v1/sessions", timeout=10).status_code == 401
    answer = httpx.get(f"{server.url}/api/v1/sessions/nobody", headers=token, timeout=10)
    assert answer.status_code == 404
    logged = server.stop()
    assert _requests(logged) == [
        ("GET", "/healthz", 200),
        ("GET", "/api/v1/sessions", 401),
        ("GET", "/api/v1/sessions/nobody", 404),
    ], logged
    request_lines = [line for line in logged if ACCESS.search(line)]
    assert all(line.startswith("relaystore: ") for line in request_lines), request_lines
    assert not any(token["Authorization"].split()[1] in line for line in logged)


@pytest.mark.integration
def test_no_access_log_on_the_command_line_overrides_the_config_file(
    db: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    config = tmp_path / "relaystore.toml"
    config.write_text(f"db = {json.dumps(str(db))}\n[serve]\nport = 0\naccess-log = true\n")
    bare = command(db, "serve", "--config", str(config))
    bare = [*bare[:3], *bare[5:]]  # no --db: the file names the store
    logged = {}
    for extra in ((), ("--no-access-log",)):
        server = Serving(spawned, [*bare, *extra], cwd=tmp_path)
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        logged[extra] = _requests(server.stop())
    assert logged[()] == [("GET", "/healthz", 200)]  # the file's access-log = true
    assert logged[("--no-access-log",)] == []


# -- replay's progress display on a terminal ----------------------------------------------------

SESSIONS = 8
TURNS = 1500
"""6,000 events a session, 48,000 in all: the replay runs well past the display's quiet
first second (about 3 s at 15,000 events a second on 2 cores; the bar needs more than 1)."""
BAR = re.compile(
    r"(\d+)/(\d+) sessions: +(\d+)%\|[^|\r\n]*\| *(\d+)/(\d+) "
    r"\[(\d\d:\d\d)<(\d\d:\d\d|\?), *([\d.]+|\?)ev/s\]"
)


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A folder of :data:`SESSIONS` worker roots; the events they hold in all."""
    folder = tmp_path_factory.mktemp("terminal") / "workers"
    total = 0
    for index in range(SESSIONS):
        journal = JournalBuilder()
        for turn in range(TURNS):
            journal.prompt_turn(f"turn {turn}")
        journal.write_worker_root(folder / f"s{index}", f"s{index}")
        total += len(journal.events)
    return folder, total


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal (master, slave) 160 columns wide, as a terminal window is."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    return master, slave


def _drain(master: int, process: subprocess.Popen[bytes]) -> bytes:
    """Everything the process writes to the terminal, until it ends and closes it."""
    out = bytearray()
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal closed it
                break
            if not chunk:
                break
            out += chunk
        elif process.poll() is not None and not select.select([master], [], [], 0.2)[0]:
            break
    return bytes(out)


def _replay_on(
    db: Path, folder: Path, *, stdout_tty: bool, stderr_tty: bool, extra: tuple[str, ...] = ()
) -> tuple[int, str, str]:
    """Replay ``folder`` with stdout and/or stderr on a pseudo-terminal; return the status,
    what the terminal showed, and what went to the pipes (stdout, then stderr)."""
    master, slave = _terminal()
    process = subprocess.Popen(
        command(db, "replay", str(folder), "--projection", "thread", *extra),
        cwd=db.parent,
        env={key: value for key, value in ENV.items() if key not in ("COLUMNS", "LINES")},
        stdin=subprocess.DEVNULL,
        stdout=slave if stdout_tty else subprocess.PIPE,
        stderr=slave if stderr_tty else subprocess.PIPE,
    )
    os.close(slave)
    piped: dict[int, bytes] = {}
    pumps = [
        threading.Thread(target=lambda n=n, s=stream: piped.__setitem__(n, s.read()), daemon=True)
        for n, stream in enumerate((process.stdout, process.stderr))
        if stream is not None
    ]
    try:
        for pump in pumps:
            pump.start()
        shown = _drain(master, process)
        status = process.wait(timeout=TIMEOUT)
        for pump in pumps:
            pump.join(timeout=TIMEOUT)
    finally:
        stop(process)
        os.close(master)
    rest = b"".join(piped[n] for n in sorted(piped)).decode("utf-8", "replace")
    return status, shown.decode("utf-8", "replace"), rest


@pytest.mark.integration
def test_on_a_terminal_replay_shows_one_progress_bar_without_being_asked(
    tmp_path: Path, workers: tuple[Path, int]
) -> None:
    folder, total = workers
    status, shown, _ = _replay_on(
        tmp_path / "store.sqlite3", folder, stdout_tty=True, stderr_tty=True
    )
    assert status == 0, shown
    assert "Traceback" not in shown
    # The bar redraws itself in place (carriage returns), one bar across every journal.
    assert "\r" in shown
    bars = list(BAR.finditer(shown))
    assert bars, shown
    for bar in bars:
        assert int(bar[2]) == SESSIONS  # sessions done of the total
        assert int(bar[5]) == total  # events of the events the journals hold
    final = bars[-1]
    assert (int(final[1]), int(final[3]), int(final[4])) == (SESSIONS, 100, total)
    assert final[7] == "00:00"  # nothing left
    assert float(final[8]) > 0  # a rate
    # While it ran, the bar showed fewer sessions done, a rate and the time left.
    during = [bar for bar in bars if int(bar[1]) < SESSIONS and bar[8] != "?"]
    assert during, shown
    assert all(re.fullmatch(r"\d\d:\d\d", bar[7]) for bar in during)
    # Each session's summary line still comes, and the totals last.
    assert len(re.findall(rf"session s\d: {4 * TURNS} read", shown)) == SESSIONS
    assert shown.rstrip().splitlines()[-1].startswith(f"replayed {total} events: {total} applied")


@pytest.mark.integration
def test_off_a_terminal_replay_shows_no_bar(tmp_path: Path, workers: tuple[Path, int]) -> None:
    folder, _ = workers
    # Both to pipes (a script, a log file): the summary lines only.
    piped = cli(tmp_path / "piped.sqlite3", "replay", str(folder), "--projection", "thread")
    assert piped.returncode == 0, piped.stderr
    assert BAR.search(piped.stderr) is None
    assert "\r" not in piped.stderr
    assert (
        len(re.findall(rf"^session s\d: {4 * TURNS} read", piped.stderr, re.MULTILINE)) == SESSIONS
    )
    # The display belongs to stderr: stderr to a pipe, stdout on a terminal, no bar anywhere.
    status, shown, err = _replay_on(
        tmp_path / "stdout-tty.sqlite3", folder, stdout_tty=True, stderr_tty=False
    )
    assert status == 0, err
    assert BAR.search(err) is None
    assert BAR.search(shown) is None
    assert "\r" not in err
    # stdout to a pipe (``| jq``) while stderr is the terminal: the JSON lines stay clean on
    # stdout, and the bar is on the terminal.
    status, shown, out = _replay_on(
        tmp_path / "stdout-piped.sqlite3",
        folder,
        stdout_tty=False,
        stderr_tty=True,
        extra=("--json",),
    )
    assert status == 0, shown
    lines = out.splitlines()
    assert [json.loads(line)["session_id"] for line in lines] == [
        f"s{index}" for index in range(SESSIONS)
    ]
    assert BAR.search(out) is None
    assert BAR.search(shown) is not None


@pytest.mark.integration
def test_a_quick_replay_on_a_terminal_prints_its_lines_only(tmp_path: Path) -> None:
    folder = tmp_path / "workers"
    for session_id in ("quick-a", "quick-b"):
        _worker_root(folder, session_id, "hello", "again")
    status, shown, _ = _replay_on(
        tmp_path / "store.sqlite3", folder, stdout_tty=True, stderr_tty=True
    )
    assert status == 0, shown
    bars = list(BAR.finditer(shown))
    if bars:  # a busy machine: the replay outlasted the quiet second, so the bar came
        assert all(bar[6] >= "00:01" for bar in bars), shown  # only after it
        assert len(re.findall(r"session quick-[ab]: ", shown)) == 2, shown
        assert shown.rstrip().splitlines()[-1].startswith("replayed 16 events: 16 applied")
        return
    # Done within the display's quiet first second: no bar, and every line whole (the
    # terminal turns each newline into a carriage return and a newline).
    assert "%|" not in shown
    lines = shown.split("\r\n")
    assert lines[-1] == ""
    assert [line.split(":")[0] for line in lines[:-2]] == ["session quick-a", "session quick-b"]
    assert lines[-2].startswith("replayed 16 events: 16 applied"), lines


# -- the README and the changelog ----------------------------------------------------------------

README = ROOT / "README.md"
CHANGELOG = ROOT / "CHANGELOG.md"
PYPROJECT = ROOT / "pyproject.toml"
VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def _version(text: str) -> tuple[int, ...]:
    match = VERSION.match(text)
    assert match is not None, text
    return tuple(int(part) for part in match.groups())


def test_the_readme_says_how_long_the_test_command_takes_and_the_pin_agrees() -> None:
    readme = README.read_text(encoding="utf-8")
    said = re.findall(r"takes about (\d+) minutes on (\d+) cores", " ".join(readme.split()))
    assert len(said) == 1, said  # stated once, in "Tests and benchmarks"
    minutes, cores = said[0]
    # The test extra's comment states the same figure (one must not drift from the other).
    pyproject = " ".join(PYPROJECT.read_text(encoding="utf-8").split())
    assert f"on {cores} cores in about {minutes} minutes" in pyproject


def test_the_changelogs_first_entry_is_this_version_or_the_next_and_the_readme_names_it() -> None:
    version = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
    entries = re.findall(
        r"^- (\d+\.\d+\.\d+)( \(unreleased\))? — ", CHANGELOG.read_text(encoding="utf-8"), re.M
    )
    assert entries, "CHANGELOG.md has no version entries"
    top, unreleased = entries[0]
    if unreleased:
        assert _version(top) > _version(version), (top, version)  # the next version
        assert _version(entries[1][0]) <= _version(version)  # the one before was released
    else:
        assert top == version
    assert len({entry for entry, _ in entries}) == len(entries)  # each version once
    assert [_version(e) for e, _ in entries] == sorted(
        (_version(e) for e, _ in entries), reverse=True
    )
    # The README's "Changes" section names that entry, and says so when it is unreleased.
    readme = README.read_text(encoding="utf-8")
    changes = readme.split("\n## Changes\n", 1)[1].split("\n## ", 1)[0]
    first = " ".join(changes.split(". ", 1)[0].split())
    assert top in first, first
    assert ("unreleased" in first) == bool(unreleased), first
