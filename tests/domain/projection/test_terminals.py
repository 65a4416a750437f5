"""Terminal output: parked, attached to the tool that ran it, and re-attached."""

from __future__ import annotations

from relaystore.domain.materialized import (
    ToolBody,
    TranscriptRemove,
    TranscriptUpsert,
)
from relaystore.domain.relay import (
    TerminalOutput,
)
from tests.domain.projection.support import (
    TERMINAL,
    TOOL,
    Journal,
    fallback_call,
    item,
    update,
)

# --- terminals -----------------------------------------------------------------------------


def test_parked_terminal_output_moves_into_the_tool_call_that_names_it() -> None:
    journal = Journal()
    journal.add(TERMINAL)
    mutation = journal.add(TOOL)

    assert TranscriptRemove("terminal:t1") in mutation.transcript
    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:call-1"]
    body = item(journal.session, "tool:call-1").body
    assert isinstance(body, ToolBody)
    assert [(record.terminal_id, record.output) for record in body.terminal_outputs] == [
        ("t1", "done\n")
    ]


def test_a_raw_result_claims_its_one_parked_terminal() -> None:
    journal = Journal()
    journal.add(TerminalOutput.of(terminal_id="t9", output="hi\n", exit_code=0, truncated=False))
    journal.add(update("tool_call", toolCallId="k1", title="Bash", kind="execute"))
    journal.add(
        update(
            "tool_call_update",
            toolCallId="k1",
            status="completed",
            rawOutput={"exit_code": 0, "output": list(b"hi\n")},
        )
    )

    body = item(journal.session, "tool:k1").body
    assert isinstance(body, ToolBody)
    assert body.terminal_refs == ["t9"]
    assert [record.output for record in body.terminal_outputs] == ["hi\n"]
    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:k1"]


def test_identical_raw_results_leave_the_output_parked() -> None:
    journal = Journal()
    for terminal_id in ("t1", "t2"):
        journal.add(
            TerminalOutput.of(terminal_id=terminal_id, output="same", exit_code=0, truncated=False)
        )
    journal.add(
        update(
            "tool_call",
            toolCallId="k1",
            title="Bash",
            status="completed",
            rawOutput={"exit_code": 0, "output": "same"},
        )
    )
    assert {entry.stable_id for entry in journal.session.transcript} == {
        "terminal:t1",
        "terminal:t2",
        "tool:k1",
    }


def test_terminal_exit_completes_the_interim_fallback_call() -> None:
    journal = Journal()
    journal.add(fallback_call("t1"))
    journal.add(TerminalOutput.of(terminal_id="t1", output="boom", exit_code=1, truncated=False))

    body = item(journal.session, "tool:hel-terminal:t1").body
    assert isinstance(body, ToolBody)
    assert body.call["status"] == "failed"


def test_a_real_tool_call_replaces_the_fallback_and_adopts_its_start() -> None:
    journal = Journal()
    journal.add(fallback_call("t1"), at_ms=50)
    journal.add(
        TerminalOutput.of(terminal_id="t1", output="ok", exit_code=0, truncated=False), at_ms=60
    )
    journal.add(TOOL, at_ms=70)

    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:call-1"]
    tool = item(journal.session, "tool:call-1")
    assert (tool.position, tool.created_at_ms) == (1, 50)
    assert isinstance(tool.body, ToolBody)
    assert [record.output for record in tool.body.terminal_outputs] == ["ok"]


def test_a_fallback_call_for_a_terminal_a_real_tool_owns_is_dropped() -> None:
    journal = Journal()
    journal.add(TOOL)
    mutation = journal.add(fallback_call("t1"))
    assert [change for change in mutation.transcript if isinstance(change, TranscriptUpsert)] == []
    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:call-1"]
