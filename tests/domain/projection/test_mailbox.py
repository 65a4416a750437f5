"""The mailbox's projection: the external-events item as the origin's ``observation.rs`` at
0477819 projects it (its golden transcript is pinned word for word), and protocol 33's
wakes, hand-back reminders, the harness-turn cancel and the execution-mode restore."""

from __future__ import annotations

import json

import pytest

from relaystore.domain.mailbox import (
    GithubComment,
    GithubItemKind,
    GithubPullRequestLifecycle,
    GithubReview,
    GithubReviewComment,
    MailboxEventBody,
    MailboxPullRequestChange,
    NewGithubItem,
    ParentMessage,
    PlainText,
)
from relaystore.domain.materialized import (
    ExecutionRunning,
    MaterializedSession,
    SystemBody,
    UserBody,
)
from relaystore.domain.outcomes import TurnOutcomeCompleted
from relaystore.domain.projection import SessionProjection
from relaystore.domain.projection.mailbox import MAILBOX_EVENTS_ITEM_ID
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
    MailboxHookLeaseReturnReason,
    MailboxWakeCommand,
    RelayCommandKind,
)
from relaystore.testing import JournalBuilder
from tests.domain.journal_stories import replay

GOLDEN = """\
Session: session-mailbox
1: External events:
  - Comment on your PR #12 by alice: The first comment line.
  - Message from your parent agent: Please check this detail.
  - New PR #4623 Model Rust built-in macro values for CQ07
  - Comment on your PR #4623 by alice: Please check the \u2039macro\u203a case.
  - New issue #4624 Per-unit resolution summary: shared tables, driver and Go producer (Milestone 1)
  - Review on your PR #4623 by bob (changes requested): Could you revise the error path?
  - Review comment on your PR #4623 by carol: This assertion needs a case.
  - Your PR #4623 was merged by dana.
  - Your PR #4623 was closed without merging.
  - Your PR #4624 was merged.
  - Your PR #4623 was reopened.
  - Message from your parent agent: Please verify the edge case.
  - External event: A plain event from the CLI.
"""
"""The origin's ``mj-transcript/tests/golden/mailbox-delivery-transcript.txt`` at 0477819."""

_CQ07 = "Model Rust built-in macro values for CQ07"
PR = GithubItemKind.PULL_REQUEST


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


def _event(key: str, source: str, wake: bool, at: int, body: MailboxEventBody) -> MailboxEvent:
    return MailboxEvent(key=key, source=source, wake=wake, created_at_ms=at, body=body)


def _golden_events() -> list[MailboxEvent]:
    """The origin's ``golden_mailbox_delivery_transcript`` mixed events, in its order."""
    merged, closed = (
        MailboxPullRequestChange.MERGED,
        MailboxPullRequestChange.CLOSED_WITHOUT_MERGING,
    )
    reopened = MailboxPullRequestChange.REOPENED
    return [
        _event(
            "github:repo#4623:interest:session",
            "github",
            False,
            500,
            NewGithubItem(kind=PR, number=4623, title=_CQ07),
        ),
        _event(
            "github:repo#4623:comment:1",
            "github",
            True,
            502,
            GithubComment(
                item_kind=PR,
                number=4623,
                title=_CQ07,
                author="alice",
                body="Please check the <macro> case.\nMore detail.",
            ),
        ),
        _event(
            "github:repo#4624:interest:session",
            "github",
            False,
            501,
            NewGithubItem(
                kind=GithubItemKind.ISSUE,
                number=4624,
                title="Per-unit resolution summary: shared tables, driver and Go producer "
                "(Milestone 1)",
            ),
        ),
        _event(
            "github:repo#4623:review:2",
            "github",
            True,
            503,
            GithubReview(
                item_kind=PR,
                number=4623,
                title=_CQ07,
                author="bob",
                body="Could you revise the error path?",
                review_state="changes_requested",
            ),
        ),
        _event(
            "github:repo#4623:review-comment:3",
            "github",
            True,
            504,
            GithubReviewComment(
                item_kind=PR,
                number=4623,
                title=_CQ07,
                author="carol",
                body="This assertion needs a case.",
            ),
        ),
        _event(
            "github:repo#4623:merged",
            "github",
            True,
            505,
            GithubPullRequestLifecycle(change=merged, number=4623, title=_CQ07, actor="dana"),
        ),
        _event(
            "github:repo#4623:closed",
            "github",
            True,
            506,
            GithubPullRequestLifecycle(change=closed, number=4623, title=_CQ07, actor="erin"),
        ),
        _event(
            "github:repo#4624:merged-unknown",
            "github",
            True,
            506,
            GithubPullRequestLifecycle(
                change=merged, number=4624, title="PR without a known merger", actor=""
            ),
        ),
        _event(
            "github:repo#4623:reopened",
            "github",
            True,
            507,
            GithubPullRequestLifecycle(change=reopened, number=4623, title=_CQ07, actor="frank"),
        ),
        _event(
            "parent:message:2",
            "parent",
            True,
            508,
            ParentMessage(text="Please verify the edge case."),
        ),
        _event("api:plain-1", "api", True, 509, PlainText(text="A plain event from the CLI.")),
    ]


def test_the_origins_golden_mailbox_transcript() -> None:
    journal = JournalBuilder()
    github = _event(
        "github:owner/repo#12:comment:345",
        "github",
        False,
        100,
        GithubComment(
            item_kind=PR,
            number=12,
            title="Mailbox delivery",
            author="alice",
            body="The first comment line.\nThe second line is omitted from the notice.",
        ),
    )
    parent = _event(
        "parent:message:1", "parent", False, 300, ParentMessage(text="Please check this detail.")
    )
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
    events = _golden_events()
    for index, event in enumerate(events):
        journal.command(
            DeliverMailboxEventCommand.of(event=event), command_id=f"mixed-event-{index}"
        )
    journal.command(MailboxWakeCommand.of(events=events), command_id="mixed-event-wake")

    session, feed = _project(journal, "session-mailbox")

    assert _render(session) == GOLDEN
    (item,) = session.transcript
    assert item.stable_id == MAILBOX_EVENTS_ITEM_ID
    # Created by the first event, changed by the last one queued.
    assert item.created_at_ms == journal.events[0].recorded_at_ms
    assert item.last_changed_at_ms == journal.events[-2].recorded_at_ms
    assert feed == []  # queueing and delivering yield no API event
    (wake,) = session.queued_prompts
    assert (wake.command_id, wake.content, wake.accepted_ordinal) == (
        "mixed-event-wake",
        [],
        len(journal.events),
    )
    assert session.session_title is None  # a wake never titles a session


def test_a_protocol_33_text_event_is_a_plain_external_event() -> None:
    journal = JournalBuilder()
    journal.deliver_mailbox_event(journal.mailbox_event("  CI <finished>\nsecond line"))
    session, _ = _project(journal)
    (item,) = session.transcript
    assert item.body == SystemBody(
        text="External events:\n  - External event: CI \u2039finished\u203a"
    )


def test_deliveries_and_wakes_write_no_line() -> None:
    journal = JournalBuilder()
    journal.add(
        MailboxEventsDelivered.of(
            event_keys=["a", "b"], path=MailboxDeliveryPath.TOOL_HOOK, hook_event="PostToolUse"
        )
    )
    journal.add(MailboxEventsDelivered.of(event_keys=["c"], path=MailboxDeliveryPath.WAKE))
    journal.mailbox_prompt_delivery([journal.mailbox_event("x")], "p")
    session, feed = _project(journal)
    assert session.transcript == []
    assert feed == []


def test_a_lease_alone_changes_nothing_but_the_frontier() -> None:
    journal = JournalBuilder()
    event = journal.mailbox_event("CI finished.")
    journal.mailbox_hook_delivery(
        [event],
        returned=MailboxHookLeaseReturnReason.WORKER_RESTART,
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
    assert [item.stable_id for item in session.transcript] == ["user:wake-1"]
    assert session.transcript[0].body == UserBody(content=[])
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
