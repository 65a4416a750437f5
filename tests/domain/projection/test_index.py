"""The transcript index stays equal to a freshly built one."""

from __future__ import annotations

from relaystore.domain.materialized import (
    UserBody,
)
from relaystore.domain.projection.index import TranscriptIndex
from relaystore.domain.projection.markers import CONTINUATION_PROMPT
from relaystore.domain.projection.text import (
    provisional_session_title,
)
from relaystore.domain.relay import (
    RELAY_EVENT_GENESIS_DIGEST,
    CommandQueued,
    RelayCursor,
    RelayObservation,
    ResumeAfterQuotaCommand,
    TerminalOutput,
)
from tests.domain.projection.support import (
    STREAMING,
    TERMINAL,
    TOOL,
    Journal,
    chunk,
    fallback_call,
    finished,
    item,
    started,
    turn_ended,
    update,
)

# --- the index stays equal to a fresh one ---------------------------------------------------


def test_the_incremental_index_equals_an_index_built_from_scratch() -> None:
    journal = Journal()
    observations: list[RelayObservation] = [
        *STREAMING,
        chunk("t", "t1", kind="agent_thought_chunk"),
        TOOL,
        update("plan", entries=[]),
        TERMINAL,
        fallback_call("t2"),
        TerminalOutput.of(terminal_id="t2", output="x", exit_code=0, truncated=False),
        update(
            "tool_call",
            toolCallId="c9",
            title="x",
            content=[{"type": "terminal", "terminalId": "t2"}],
        ),
        finished(),
    ]
    for observation in observations:
        journal.add(observation)
        assert journal.projection.index == TranscriptIndex.build(journal.session.transcript)


def test_resume_after_quota_runs_as_a_turn_with_the_continuation_text() -> None:
    journal = Journal()
    journal.add(
        CommandQueued.of(
            command_id="resume-1",
            command=ResumeAfterQuotaCommand.of(
                expected=RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST),
                completed_command_id="prompt-0",
            ),
            created_at_ms=1,
        )
    )
    journal.add(started("resume-1"))
    journal.add(finished("resume-1"))

    assert journal.kinds == ["turn_started", "turn_ended"]
    assert turn_ended(journal.api_events[1]).accepted_ordinal == 1
    assert item(journal.session, "user:resume-1").body == UserBody(
        content=[{"type": "text", "text": CONTINUATION_PROMPT}]
    )
    assert journal.session.session_title == provisional_session_title(CONTINUATION_PROMPT)
