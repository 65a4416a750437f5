"""The public test kit: ``relaystore.testing`` and ``relaystore.pytest_plugin``.

Every story is replayed through a real store and checked by the API events it yields;
worker roots go through the ``relaystore`` command line.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import relaystore.domain.sessions.records as domain_sessions
from relaystore.actors.store import EventStore
from relaystore.domain.api_events import (
    ApiCommandEnded,
    ApiEvent,
    ApiEventFilter,
    ApiInputRequired,
    ApiInputResolved,
    ApiTurnEnded,
    ApiTurnStarted,
)
from relaystore.domain.chain import GENESIS, Step, advance, check_own_digest
from relaystore.domain.errors import InvalidInput, RelayChainError
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    SaveSession,
)
from relaystore.domain.outcomes import (
    CommandResultKind,
    OutcomeReason,
    TurnResultKind,
)
from relaystore.domain.relay import (
    RELAY_EVENT_GENESIS_DIGEST,
    CommandStarted,
    Notice,
    RelayCursor,
    RelayEvent,
    decode_relay_event,
)
from relaystore.domain.wire import decode_json, encode
from relaystore.testing import (
    DEFAULT_START_MS,
    DEFAULT_STEP_MS,
    JournalBuilder,
    example_session,
)
from tests.actors.cli_support import cli

pytest_plugins = ["pytester"]

SESSION = "session-1"


def verify_chain(events: list[RelayEvent], frontier: RelayCursor = GENESIS) -> None:
    for event in events:
        assert advance(frontier, event) is Step.NEXT
        frontier = event.cursor


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "kit.sqlite3") as store:
        store.ask(SaveSession(record=example_session(SESSION)))
        yield store


def replay(store: EventStore, builder: JournalBuilder, session_id: str = SESSION) -> list[ApiEvent]:
    """Observe every event of ``builder`` and return the session's API events."""
    report = store.ask(ObserveRelayEvents(session_id=session_id, events=builder.events))
    assert (report.applied, report.frontier_ordinal) == (
        len(builder.events),
        builder.frontier.ordinal,
    )
    page = store.ask(LoadApiEvents(filter=ApiEventFilter(session_id=session_id), after_seq=0))
    return page.events


def kinds(events: list[ApiEvent]) -> list[str]:
    return [event.kind for event in events]


# -- the builder ----------------------------------------------------------------------------


def test_format_1_events_chain_from_genesis_and_verify() -> None:
    builder = JournalBuilder(format=1)
    events = builder.prompt_turn("What does step 1 do?", chunks=("It ", "counts."))
    assert events == builder.events
    assert [event.ordinal for event in events] == [1, 2, 3, 4, 5]
    assert {event.format for event in events} == {1}
    assert events[0].previous_digest == RELAY_EVENT_GENESIS_DIGEST
    for previous, event in itertools.pairwise(events):
        assert event.previous_digest == previous.digest
    verify_chain(events)
    assert builder.frontier == events[-1].cursor


def test_format_2_events_are_self_describing_and_verify() -> None:
    builder = JournalBuilder()
    builder.prompt_turn("hello")
    assert {event.format for event in builder.events} == {2}
    assert {event.previous_digest for event in builder.events} == {""}
    verify_chain(builder.events)


def test_a_journal_may_switch_format_mid_way_as_an_upgraded_worker_does() -> None:
    builder = JournalBuilder(format=1)
    builder.prompt_turn("before the upgrade")
    builder.format = 2
    builder.restart_mid_turn("after the upgrade")
    assert [event.format for event in builder.events] == [1] * 4 + [2] * 5
    verify_chain(builder.events)


def test_a_forged_event_does_not_verify() -> None:
    builder = JournalBuilder(format=1)
    builder.prompt_turn("hello")
    forged = msgspec.structs.replace(builder.events[1], recorded_at_ms=5)
    with pytest.raises(RelayChainError):
        advance(builder.events[0].cursor, forged)


def test_lines_decode_back_to_the_same_events() -> None:
    builder = JournalBuilder(format=1)
    builder.prompt_turn("hello")
    builder.shell_command("ls", stdout="a\n")
    lines = builder.lines()
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    assert [decode_relay_event(line) for line in lines] == builder.events
    assert builder.to_bytes() == b"".join(lines)


def test_the_clock_starts_steps_and_can_be_set_for_one_event() -> None:
    builder = JournalBuilder(start_ms=1_000, step_ms=10)
    first = builder.add(Notice.of(message="a"))
    second = builder.add(Notice.of(message="b"))
    third = builder.add(Notice.of(message="c"), at_ms=5_000)
    fourth = builder.add(Notice.of(message="d"))
    assert [e.recorded_at_ms for e in (first, second, third, fourth)] == [
        1_000,
        1_010,
        5_000,
        5_010,
    ]
    default = JournalBuilder().prompt_turn("x")
    assert [e.recorded_at_ms for e in default] == [
        DEFAULT_START_MS + DEFAULT_STEP_MS * index for index in range(4)
    ]
    queued, started = default[0].observation, default[1].observation
    assert queued.data.created_at_ms == default[0].recorded_at_ms  # type: ignore[union-attr]
    assert started.data.started_at_ms == default[1].recorded_at_ms  # type: ignore[union-attr]


def test_command_ids_are_kept_and_generated_per_prefix() -> None:
    builder = JournalBuilder()
    event = builder.add(CommandStarted.of(command_id="c1", started_at_ms=1), command_id="c1")
    assert event.command_id == "c1"
    assert builder.add(Notice.of(message="n")).command_id is None
    assert builder.prompt_turn("a")[0].command_id == "prompt-1"
    assert builder.prompt_turn("b")[0].command_id == "prompt-2"
    assert builder.prompt_turn("c", command_id="mine")[-1].command_id == "mine"
    assert builder.shell_command("ls")[0].command_id == "shell-1"


def test_the_same_calls_give_the_same_bytes() -> None:
    def build() -> bytes:
        builder = JournalBuilder(format=1)
        builder.prompt_turn("a")
        builder.question()
        builder.shell_command("ls", stdout="x")
        builder.restart_mid_turn("b")
        return builder.to_bytes()

    assert build() == build()


def test_a_builder_continues_after_a_frontier_as_a_pruned_journal_does() -> None:
    pruned = RelayCursor(ordinal=3327, digest="ab" * 32)
    builder = JournalBuilder(after=pruned)
    assert builder.frontier == pruned
    events = builder.prompt_turn("after the prune")
    assert events[0].ordinal == 3328
    check_own_digest(events[0])
    verify_chain(events, pruned)
    chained = JournalBuilder(format=1, after=pruned)
    first = chained.add(Notice.of(message="linked"))
    assert first.previous_digest == pruned.digest
    assert advance(pruned, first) is Step.NEXT


@pytest.mark.integration
def test_a_builder_continues_a_stored_session(store: EventStore) -> None:
    first = JournalBuilder(format=1)
    first.prompt_turn("one")
    report = store.ask(ObserveRelayEvents(session_id=SESSION, events=first.events))
    stored = RelayCursor(ordinal=report.frontier_ordinal, digest=report.frontier_digest)
    second = JournalBuilder(format=1, after=stored, start_ms=first.next_ms)
    second.prompt_turn("two", command_id="prompt-2")
    report = store.ask(ObserveRelayEvents(session_id=SESSION, events=second.events))
    assert (report.applied, report.already_applied, report.frontier_ordinal) == (4, 0, 8)
    page = store.ask(LoadApiEvents(after_seq=0))
    assert kinds(page.events) == ["turn_started", "turn_ended"] * 2


def test_a_malformed_frontier_is_refused() -> None:
    with pytest.raises(RelayChainError):
        JournalBuilder(after=RelayCursor(ordinal=0, digest="ab" * 32))
    with pytest.raises(RelayChainError):
        JournalBuilder(after=RelayCursor(ordinal=4, digest="not hex"))


def test_wire_shaped_observations_are_decoded_and_checked() -> None:
    typed = JournalBuilder().add(Notice.of(message="hi"))
    from_dict = JournalBuilder().add({"type": "notice", "data": {"message": "hi"}})
    from_text = JournalBuilder().add('{"type":"notice","data":{"message":"hi"}}')
    from_bytes = JournalBuilder().add(b'{"type":"notice","data":{"message":"hi"}}')
    assert typed == from_dict == from_text == from_bytes
    # Key order of the input does not matter: the worker's order is written.
    started = JournalBuilder().add(
        {"data": {"started_at_ms": 2, "command_id": "c1"}, "type": "command_started"}
    )
    assert started.observation == CommandStarted.of(command_id="c1", started_at_ms=2)
    assert (
        started.observation_json
        == b'{"type":"command_started","data":{"command_id":"c1","started_at_ms":2}}'
    )


@pytest.mark.parametrize(
    ("observation", "named"),
    [
        ({"type": "command_started", "data": {"command_id": 1, "started_at_ms": 2}}, "command_id"),
        ({"type": "command_started", "data": {"command_id": "c1"}}, "started_at_ms"),
        ({"type": "no_such_observation"}, "no_such_observation"),
        ({"type": "notice", "data": {"message": object()}}, "not plain JSON"),
        ('{"type": "notice", "data": {', "relay observation"),
        (42, "int"),
        (RelayCursor(ordinal=1, digest="ab" * 32), "RelayCursor is not a relay observation"),
    ],
)
def test_a_bad_observation_is_refused_naming_what_is_wrong(observation: object, named: str) -> None:
    builder = JournalBuilder()
    with pytest.raises(InvalidInput, match=named):
        builder.add(observation)  # type: ignore[arg-type]
    assert builder.events == []


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(InvalidInput, match="format 3"):
        JournalBuilder(format=3)
    builder = JournalBuilder()
    builder.format = 3  # a worker "upgrade" to a format that does not exist
    with pytest.raises(InvalidInput, match="format 3"):
        builder.add(Notice.of(message="x"))


# -- stories through a real store -------------------------------------------------------------


@pytest.mark.integration
def test_prompt_turn_yields_turn_started_and_a_completed_turn_ended(store: EventStore) -> None:
    builder = JournalBuilder()
    events = builder.prompt_turn("What does step 1 do?", chunks=("It ", "counts ", "steps."))
    assert len(events) == 6
    api = replay(store, builder)
    assert kinds(api) == ["turn_started", "turn_ended"]
    started, ended = api[0].event, api[1].event
    assert isinstance(started, ApiTurnStarted)
    assert (started.data.turn.command_id, started.data.turn.accepted_ordinal) == ("prompt-1", 1)
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.outcome.kind is TurnResultKind.COMPLETED
    assert ended.data.turn.completed_ordinal == 6
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    assert session.active_turn is None
    assert session.applied_event_digest == builder.frontier.digest


@pytest.mark.integration
def test_prompt_turn_with_a_failing_stop_reason_ends_failed(store: EventStore) -> None:
    builder = JournalBuilder(format=1)
    builder.prompt_turn("hello", chunks=(), stop_reason="provider_error")
    api = replay(store, builder)
    ended = api[-1].event
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.outcome.kind is TurnResultKind.FAILED
    assert ended.data.turn.outcome.stop_reason == "provider_error"


@pytest.mark.integration
def test_question_asked_and_answered_mid_turn(store: EventStore) -> None:
    builder = JournalBuilder()
    prompt_id = builder.start_prompt("Add a migration")[0].command_id
    asked = builder.question("Which directory?", field="directory", action="accept")
    assert prompt_id is not None
    builder.end_prompt(prompt_id)
    api = replay(store, builder)
    assert kinds(api) == ["turn_started", "input_required", "input_resolved", "turn_ended"]
    required, resolved = api[1].event, api[2].event
    assert isinstance(required, ApiInputRequired)
    assert required.data.turn_id == 1
    assert required.data.request is not None
    assert required.data.request.message == "Which directory?"
    assert [field.id for field in required.data.request.fields] == ["directory"]
    assert required.data.request == asked[0].observation.data.request  # type: ignore[union-attr]
    assert isinstance(resolved, ApiInputResolved)
    assert (resolved.data.turn_id, resolved.data.action) == (1, "accept")
    assert resolved.data.elicitation_id == "question-1"


@pytest.mark.integration
def test_question_outside_a_turn_and_left_unanswered(store: EventStore) -> None:
    builder = JournalBuilder()
    builder.question("Proceed?", action=None)
    api = replay(store, builder)
    assert kinds(api) == ["input_required"]
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    assert [request.id for request in session.pending_elicitations] == ["question-1"]
    builder.question("Really?", action="decline")
    report = store.ask(ObserveRelayEvents(session_id=SESSION, events=builder.events))
    assert (report.applied, report.already_applied) == (2, 1)
    api = store.ask(LoadApiEvents(after_seq=0)).events
    assert kinds(api) == ["input_required", "input_required", "input_resolved"]
    resolved = api[-1].event
    assert isinstance(resolved, ApiInputResolved)
    assert (resolved.data.elicitation_id, resolved.data.action) == ("question-2", "decline")


@pytest.mark.parametrize(
    ("exit_code", "outcome", "reason"),
    [
        (0, CommandResultKind.SUCCEEDED, None),
        (1, CommandResultKind.FAILED, OutcomeReason.NONZERO_EXIT),
    ],
)
@pytest.mark.integration
def test_shell_command_yields_command_ended(
    store: EventStore, exit_code: int, outcome: CommandResultKind, reason: OutcomeReason | None
) -> None:
    builder = JournalBuilder()
    events = builder.shell_command(
        "python -m pytest -q", stdout="F.\n", stderr="1 failed", exit_code=exit_code
    )
    assert len(events) == 4
    api = replay(store, builder)
    assert kinds(api) == ["command_ended"]
    ended = api[0].event
    assert isinstance(ended, ApiCommandEnded)
    assert (ended.data.command_id, ended.data.command_kind) == ("shell-1", "run_user_shell")
    assert ended.data.outcome is outcome
    assert ended.data.reason is reason


@pytest.mark.integration
def test_restart_mid_turn_interrupts_the_turn(store: EventStore) -> None:
    builder = JournalBuilder(format=1)
    builder.restart_mid_turn("Run the tests")
    api = replay(store, builder)
    assert kinds(api) == ["turn_started", "turn_ended"]
    ended = api[1].event
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.outcome.kind is TurnResultKind.INTERRUPTED
    assert ended.data.turn.outcome.reason is OutcomeReason.WORKER_RESTARTED


@pytest.mark.integration
def test_restart_mid_turn_without_the_interruption_leaves_the_turn_active(
    store: EventStore,
) -> None:
    builder = JournalBuilder()
    events = builder.restart_mid_turn("Run the tests", interrupt=False)
    assert events[-1].observation.__struct_config__.tag == "session_restarted"
    api = replay(store, builder)
    assert kinds(api) == ["turn_started"]
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    assert session.active_turn is not None
    assert session.active_turn.command_id == "prompt-1"


@pytest.mark.integration
def test_all_stories_in_one_journal(store: EventStore) -> None:
    builder = JournalBuilder(format=1)
    builder.prompt_turn("one")
    builder.question()
    builder.shell_command("ls", stdout="a\n")
    builder.restart_mid_turn("two")
    builder.prompt_turn("three")
    verify_chain(builder.events)
    assert kinds(replay(store, builder)) == [
        "turn_started",
        "turn_ended",
        "input_required",
        "input_resolved",
        "command_ended",
        "turn_started",
        "turn_ended",
        "turn_started",
        "turn_ended",
    ]


# -- files and worker roots -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["journal.jsonl", "nested/journal.jsonl.gz"])
def test_write_writes_plain_or_gzipped_journals(tmp_path: Path, name: str) -> None:
    builder = JournalBuilder()
    builder.prompt_turn("hello")
    path = builder.write(tmp_path / name)
    assert path == tmp_path / name
    data = path.read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    assert data == builder.to_bytes()


@pytest.mark.integration
def test_a_worker_root_verifies_and_replays_through_the_command_line(tmp_path: Path) -> None:
    builder = JournalBuilder(format=1)
    builder.prompt_turn("one")
    builder.question()
    builder.format = 2
    builder.shell_command("ls", stdout="a\n")
    builder.restart_mid_turn("two")
    root = builder.write_worker_root(tmp_path / "root", "session-kit", seal_every=4)
    journal = root / "relay-journal"
    assert sorted(path.name for path in journal.iterdir()) == [
        "active.jsonl",
        "segment-00000000000000000001-00000000000000000004.jsonl.gz",
        "segment-00000000000000000005-00000000000000000008.jsonl.gz",
        "segment-00000000000000000009-00000000000000000012.jsonl.gz",
    ]
    assert (journal / "active.jsonl").read_bytes() == b"".join(builder.lines()[12:])
    state = json.loads((root / "relay-state.json").read_text())
    assert state["session_id"] == "session-kit"
    assert (state["latest_ordinal"], state["latest_digest"]) == (15, builder.frontier.digest)
    assert not (root / "relay-seed.json").exists()

    db = tmp_path / "cli.sqlite3"
    verified = cli(db, "verify", str(root))
    assert verified.returncode == 0, verified.stderr
    assert "15 records, 15 valid digests, 0 problems" in verified.stdout
    replayed = cli(db, "replay", str(root))
    assert replayed.returncode == 0, replayed.stderr
    printed = cli(db, "events", "--session", "session-kit")
    assert printed.returncode == 0, printed.stderr
    feed = [decode_json(line, ApiEvent) for line in printed.stdout.splitlines()]
    assert kinds(feed) == [
        "turn_started",
        "turn_ended",
        "input_required",
        "input_resolved",
        "command_ended",
        "turn_started",
        "turn_ended",
    ]
    again = cli(db, "replay", str(root))  # resumes at the store's frontier: adds nothing
    assert again.returncode == 0, again.stderr
    assert cli(db, "events").stdout == printed.stdout


def test_an_unsealed_worker_root_holds_everything_in_active(tmp_path: Path) -> None:
    builder = JournalBuilder()
    builder.prompt_turn("one")
    root = builder.write_worker_root(tmp_path / "root", "session-2")
    assert [path.name for path in (root / "relay-journal").iterdir()] == ["active.jsonl"]
    assert (root / "relay-journal" / "active.jsonl").read_bytes() == builder.to_bytes()
    verified = cli(tmp_path / "db.sqlite3", "verify", str(root))
    assert verified.returncode == 0, verified.stderr


def test_a_continued_worker_root_can_name_its_seed(tmp_path: Path) -> None:
    start = RelayCursor(ordinal=41, digest="cd" * 32)
    builder = JournalBuilder(after=start)
    builder.prompt_turn("after a restore")
    root = builder.write_worker_root(tmp_path / "root", "session-3", seed=True)
    seed = json.loads((root / "relay-seed.json").read_text())
    assert seed == {"event_frontier": 41, "event_frontier_digest": "cd" * 32, "queued_prompts": []}
    state = json.loads((root / "relay-state.json").read_text())
    assert state["latest_ordinal"] == 45


def test_a_worker_root_needs_a_valid_session_id(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="session id"):
        JournalBuilder().write_worker_root(tmp_path / "root", "not a/valid id")


# -- example_session ----------------------------------------------------------------------------


def test_example_session_is_a_complete_valid_record() -> None:
    record = example_session("session-9", "bundle-9")
    assert (record.id, record.bundle_id, record.workspace_id) == (
        "session-9",
        "bundle-9",
        "default",
    )
    record.validate()
    assert decode_json(encode(record), type(record)) == record
    assert example_session() == example_session("session-1", "project-1")
    assert not hasattr(domain_sessions, "example_session")  # a test seam, not product API


# -- the pytest plugin ----------------------------------------------------------------------------

PLUGIN_TEST = """
from relaystore import (
    LoadApiEvents, ObserveRelayEvents, SaveSession, StoreClosed, EventStore,
)
from relaystore.testing import JournalBuilder, example_session
import pytest

opened = []


def test_uses_the_fixtures(relaystore_store, relaystore_journal, tmp_path):
    assert isinstance(relaystore_store, EventStore)
    assert isinstance(relaystore_journal, JournalBuilder)
    assert relaystore_journal.events == []
    assert relaystore_store.path.parent == tmp_path
    relaystore_store.ask(SaveSession(record=example_session("s1")))
    relaystore_journal.prompt_turn("hi")
    relaystore_store.ask(ObserveRelayEvents(session_id="s1", events=relaystore_journal.events))
    page = relaystore_store.ask(LoadApiEvents(after_seq=0))
    assert [event.kind for event in page.events] == ["turn_started", "turn_ended"]
    opened.append(relaystore_store)


def test_each_test_gets_a_fresh_store_and_the_last_one_was_closed(relaystore_store):
    assert relaystore_store.ask(LoadApiEvents(after_seq=0)).events == []
    with pytest.raises(StoreClosed):
        opened[0].ask(LoadApiEvents(after_seq=0))
"""


@pytest.mark.parametrize("enable", ["command line", "module"])
@pytest.mark.integration
def test_the_pytest_plugin_offers_a_fresh_store_and_journal(
    pytester: pytest.Pytester, enable: str
) -> None:
    if enable == "module":
        pytester.makepyfile('pytest_plugins = ["relaystore.pytest_plugin"]\n' + PLUGIN_TEST)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    else:
        pytester.makepyfile(PLUGIN_TEST)
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "relaystore.pytest_plugin"
        )
    result.assert_outcomes(passed=2)


@pytest.mark.integration
def test_the_pytest_plugin_is_opt_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_no_fixture(relaystore_store):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'relaystore_store' not found*"])
