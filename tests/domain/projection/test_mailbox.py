"""Protocol 33's projection: mailbox deliveries, wakes, hand-back reminders, the
harness-turn cancel and the execution-mode restore, as the origin's ``observation.rs``
at 193f015 projects them (its golden transcript is pinned word for word)."""

from __future__ import annotations

import json

import pytest

from relaystore.domain.materialized import (
    ExecutionRunning,
    MaterializedSession,
    SystemBody,
    UserBody,
)
from relaystore.domain.outcomes import TurnOutcomeCompleted
from relaystore.domain.projection import SessionProjection
from relaystore.domain.projection.mailbox import (
    delivery_how,
    mailbox_delivery_notice,
    short_mailbox_text,
)
from relaystore.domain.projection.markers import HANDBACK_REMINDER_TEXT
from relaystore.domain.projection.text import provisional_session_title
from relaystore.domain.relay import (
    CancelCommand,
    CancelledOutcome,
    CancelTurnCommand,
    CommandStarted,
    DeliverMailboxEventCommand,
    HarnessTurnStarted,
    MailboxDeliveryPath,
    MailboxEvent,
    MailboxEventsDelivered,
    MailboxWakeCommand,
    RelayCommandKind,
)
from relaystore.testing import JournalBuilder
from tests.domain.journal_stories import replay

GOLDEN = """\
Session: session-mailbox
1: Mailbox event queued from github
2: Delivered 1 mailbox event by tool hook (PostToolUse): github — A review comment arrived.
3: Mailbox event queued from parent
4: Delivered 1 mailbox event with prompt: parent — Please check this detail.
5: Mailbox event queued from api
6: Delivered 1 mailbox event in a wake prompt: api — A new task is ready.
"""
"""The origin's ``mj-transcript/tests/golden/mailbox-delivery-transcript.txt`` at 193f015."""


def _project(
    journal: JournalBuilder, session_id: str = "s"
) -> tuple[MaterializedSession, list[bytes]]:
    return replay(MaterializedSession.empty(session_id), journal.events)


def _render(session: MaterializedSession) -> str:
    """The origin's ``rendered_materialized_transcript``: ``{position}: {text}`` lines."""
    lines = [f"Session: {session.session_id}"]
    for item in session.transcript:
        assert isinstance(item.body, SystemBody), item
        lines.append(f"{item.position}: {item.body.text}")
    return "\n".join(lines) + "\n"


def _event(key: str, source: str, text: str, at: int, wake: bool = False) -> MailboxEvent:
    return MailboxEvent(key=key, source=source, wake=wake, text=text, created_at_ms=at)


def test_the_origins_golden_mailbox_transcript() -> None:
    journal = JournalBuilder()
    github = _event("github:owner/repo#12:comment:345", "github", "A review comment arrived.", 100)
    parent = _event("parent:message:1", "parent", "Please check this detail.", 300)
    api = _event("api:urgent-1", "api", "A new task is ready.", 500, wake=True)
    journal.command(DeliverMailboxEventCommand.of(event=github), command_id="github-event")
    journal.add(
        MailboxEventsDelivered.of(
            event_keys=[github.key],
            path=MailboxDeliveryPath.TOOL_HOOK,
            hook_event="PostToolUse",
            events=[github],
            lease_id="hook-lease",
        )
    )
    journal.command(DeliverMailboxEventCommand.of(event=parent), command_id="parent-event")
    journal.mailbox_prompt_delivery([parent], "user-prompt")
    journal.command(DeliverMailboxEventCommand.of(event=api), command_id="api-event")
    journal.command(MailboxWakeCommand.of(events=[api]), command_id="api-wake")

    session, feed = _project(journal, "session-mailbox")

    assert _render(session) == GOLDEN
    assert feed == []  # queueing and delivering yield no API event
    (wake,) = session.queued_prompts
    assert (wake.command_id, wake.content, wake.accepted_ordinal) == ("api-wake", [], 6)
    assert session.session_title is None  # a wake never titles a session


def test_a_delivery_counts_its_keys_and_an_old_record_is_the_count_alone() -> None:
    journal = JournalBuilder()
    journal.add(
        MailboxEventsDelivered.of(
            event_keys=["a", "b"], path=MailboxDeliveryPath.TOOL_HOOK, hook_event="PostToolUse"
        )
    )
    journal.add(MailboxEventsDelivered.of(event_keys=["c"], path=MailboxDeliveryPath.TOOL_HOOK))
    session, _ = _project(journal)
    assert [item.body for item in session.transcript] == [
        SystemBody(text="Delivered 2 mailbox events by tool hook (PostToolUse)"),
        SystemBody(text="Delivered 1 mailbox event by tool hook"),
    ]


@pytest.mark.parametrize(
    ("value", "limit", "short"),
    [
        ("A review comment arrived.", 120, "A review comment arrived."),
        ("  first line  \nsecond line", 120, "first line"),
        ("windows\r\nline", 120, "windows"),
        ("bell\x07 and\ttab", 120, "bell andtab"),  # a tab is a control character too
        ("x" * 49, 48, "x" * 48 + "…"),
        ("x" * 48, 48, "x" * 48),
        ("", 48, "(empty)"),
        ("   \n text on line two", 48, "(empty)"),
        (
            "\x1c padded",
            48,
            " padded",
        ),  # U+001C is no white space to the origin: dropped after the trim
        ("é" * 5, 3, "ééé…"),  # characters, not bytes
    ],
)
def test_short_mailbox_text_is_the_origins(value: str, limit: int, short: str) -> None:
    assert short_mailbox_text(value, limit) == short


def test_delivery_notice_joins_summaries() -> None:
    events = [_event("k1", "github", "one\ntwo", 1), _event("k2", "", "x" * 130, 2)]
    notice = mailbox_delivery_notice(2, delivery_how(MailboxDeliveryPath.PROMPT, None), events)
    assert notice == f"Delivered 2 mailbox events with prompt: github — one; (empty) — {'x' * 120}…"
    assert delivery_how(MailboxDeliveryPath.WAKE, "ignored") == "in a wake prompt"


def test_a_lease_alone_changes_nothing_but_the_frontier() -> None:
    journal = JournalBuilder()
    event = journal.mailbox_event("CI finished.")
    journal.mailbox_hook_delivery(
        [event],
        returned=pytest.importorskip(
            "relaystore.domain.relay"
        ).MailboxHookLeaseReturnReason.WORKER_RESTART,
    )
    session, feed = _project(journal)
    assert session.transcript == []
    assert feed == []
    assert session.applied_event_ordinal == 2


def test_a_handback_reminder_is_a_prompt_turn_of_its_own() -> None:
    journal = JournalBuilder()
    journal.handback_reminder("prompt-1", 12)
    session, feed = _project(journal)
    (user,) = session.transcript
    assert user.stable_id == "user:handback-reminder-12"
    assert user.body == UserBody(content=[{"type": "text", "text": HANDBACK_REMINDER_TEXT}])
    assert session.session_title == provisional_session_title(HANDBACK_REMINDER_TEXT)
    assert [json.loads(line)["type"] for line in feed] == ["turn_started", "turn_ended"]
    outcome = session.last_turn_outcome
    assert outcome is not None
    assert (outcome.command_id, outcome.accepted_ordinal) == ("handback-reminder-12", 1)


def test_a_wake_turn_starts_with_an_empty_user_line() -> None:
    journal = JournalBuilder()
    journal.mailbox_wake([journal.mailbox_event("A new task is ready.", source="api")])
    session, _ = _project(journal)
    assert [item.stable_id for item in session.transcript] == ["system:1", "user:wake-1"]
    assert session.transcript[1].body == UserBody(content=[])
    assert session.last_turn_outcome is not None
    assert session.last_turn_outcome.command_id == "wake-1"


@pytest.mark.parametrize(
    "cancel", [CancelTurnCommand(), CancelCommand()], ids=["cancel_turn", "cancel"]
)
def test_a_cancel_of_a_turn_the_harness_started_ends_it_as_interrupted(cancel: object) -> None:
    journal = JournalBuilder()
    journal.add(HarnessTurnStarted.of(started_at_ms=30))
    assert isinstance(cancel, CancelTurnCommand | CancelCommand)
    journal.command(cancel, command_id="cancel-1")
    kind = (
        RelayCommandKind.CANCEL_TURN
        if isinstance(cancel, CancelTurnCommand)
        else RelayCommandKind.CANCEL
    )
    journal.complete("cancel-1", CancelledOutcome(), kind=kind)
    session, feed = _project(journal)
    line = session.transcript[-1]
    assert (line.stable_id, line.body, line.position) == (
        "system:turn-interrupted:cancel-1",
        SystemBody(text="Interrupted"),
        3,
    )
    outcome = session.last_turn_outcome
    assert outcome is not None
    assert (outcome.command_id, outcome.turn_start_position, outcome.accepted_ordinal) == (
        "harness-turn-1",
        1,
        None,
    )
    assert outcome.outcome == TurnOutcomeCompleted(stop_reason="Cancelled")
    assert [json.loads(line)["type"] for line in feed] == ["command_ended", "turn_ended"]
    assert json.loads(feed[-1])["data"]["turn"] == {
        "command_id": "harness-turn-1",
        "turn_start_position": 1,
        "completed_ordinal": 3,
        "completed_at_ms": journal.events[-1].recorded_at_ms,
        "outcome": {
            "kind": "cancelled",
            "reason": "requested_cancellation",
            "stop_reason": "Cancelled",
        },
    }
    # Execution stays running until the harness settles the turn.
    assert isinstance(session.execution, ExecutionRunning)


def _cancel_after(journal: JournalBuilder) -> tuple[MaterializedSession, list[bytes]]:
    journal.command(CancelTurnCommand(), command_id="cancel-9")
    journal.complete("cancel-9", CancelledOutcome(), kind=RelayCommandKind.CANCEL_TURN)
    return _project(journal)


def test_a_cancel_of_an_idle_session_leaves_no_line_and_no_outcome() -> None:
    session, _ = _cancel_after(JournalBuilder())
    assert session.transcript == []
    assert session.last_turn_outcome is None


def test_a_cancel_while_a_prompt_runs_leaves_the_prompts_completion_to_end_it() -> None:
    journal = JournalBuilder()
    journal.add(HarnessTurnStarted.of(started_at_ms=30))
    journal.start_prompt("hello")
    session, _ = _cancel_after(journal)
    assert all(
        not item.stable_id.startswith("system:turn-interrupted:") for item in session.transcript
    )
    assert session.last_turn_outcome is None


def test_a_second_stop_of_the_same_harness_turn_changes_nothing() -> None:
    journal = JournalBuilder()
    journal.harness_turn_cancelled(command_id="cancel-1")
    journal.events.pop()  # not settled: still running
    first, _ = _project(journal)
    second, feed = _cancel_after(journal)
    assert second.last_turn_outcome == first.last_turn_outcome
    assert [item.stable_id for item in second.transcript] == [
        item.stable_id for item in first.transcript
    ]
    assert not any(b'"turn_ended"' in line for line in feed[-1:])


def test_a_cancel_completed_for_another_kind_is_not_a_turn_stop() -> None:
    journal = JournalBuilder()
    journal.add(HarnessTurnStarted.of(started_at_ms=30))
    journal.command(CancelTurnCommand(), command_id="cancel-1")
    journal.complete("cancel-1", CancelledOutcome(), kind=None)
    session, _ = _project(journal)
    assert session.last_turn_outcome is None


def test_execution_mode_restoration_reports_success_and_failure_to_clients() -> None:
    journal = JournalBuilder()
    journal.restore_execution_mode(command_id="restore-mode")
    projection = SessionProjection(MaterializedSession.empty("s"))
    results = []
    for event in journal.events:
        mutation = projection.apply(event)
        assert mutation is not None
        results += mutation.config_results
    assert results == [("restore-mode", None)]
    refused = JournalBuilder()
    refused.restore_execution_mode(refused="auto mode refused", command_id="restore-mode")
    projection = SessionProjection(MaterializedSession.empty("s"))
    results = []
    for event in refused.events:
        mutation = projection.apply(event)
        assert mutation is not None
        results += mutation.config_results
    assert results == [("restore-mode", "auto mode refused")]
    assert projection.session.transcript[-1].body == SystemBody(text="auto mode refused")


def test_relay_local_records_leave_no_line() -> None:
    journal = JournalBuilder()
    journal.prompt_context()
    session, feed = _project(journal)
    assert session.transcript == []
    assert session.queued_prompts == []
    assert [json.loads(line)["data"]["command_kind"] for line in feed] == ["record_notice"] * 2


def test_a_started_wake_is_not_a_configuration_change() -> None:
    # A wake is a queue entry of the prompt kind: its start opens a turn.
    journal = JournalBuilder()
    journal.command(MailboxWakeCommand.of(events=[journal.mailbox_event("x")]), command_id="w")
    journal.add(CommandStarted.of(command_id="w", started_at_ms=5))
    session, _ = _project(journal)
    assert session.active_turn is not None
    assert session.active_turn.command_id == "w"
