"""The text of a user shell command's line as it runs and ends."""

from __future__ import annotations

from typing import Any

import pytest

from relaystore.domain.outcomes import (
    CommandResultKind,
    OutcomeReason,
)
from relaystore.domain.projection.text import (
    user_shell_result_text,
)
from relaystore.domain.relay import (
    RelayCommandKind,
    UserShellOutcome,
    UserShellStatus,
)
from tests.domain.projection.support import (
    Journal,
    command_ended,
    completed,
    shell_result,
)

# --- shell result text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "fields", "first_line"),
    [
        (UserShellStatus.EXITED, {"exit_code": 0}, "Shell · done · 12 ms"),
        (UserShellStatus.EXITED, {}, "Shell · finished · 12 ms"),
        (UserShellStatus.EXITED, {"exit_code": 3}, "Shell · failed (exit 3) · 12 ms"),
        (UserShellStatus.SIGNALED, {"signal": "SIGKILL"}, "Shell · signaled (SIGKILL) · 12 ms"),
        (UserShellStatus.SIGNALED, {}, "Shell · signaled (unknown signal) · 12 ms"),
        (UserShellStatus.TIMED_OUT, {}, "Shell · timed out · 12 ms"),
        (UserShellStatus.CANCELLED, {}, "Shell · cancelled · 12 ms"),
        (UserShellStatus.INTERRUPTED, {}, "Shell · interrupted · 12 ms"),
        (UserShellStatus.FAILED, {"error": "spawn failed"}, "Shell · failed · 12 ms"),
    ],
)
def test_shell_result_lines_name_how_the_command_ended(
    status: UserShellStatus, fields: dict[str, Any], first_line: str
) -> None:
    text = user_shell_result_text(shell_result(status, **fields))
    assert text.splitlines()[0] == first_line
    assert text.endswith("\n\nerror: spawn failed") == ("error" in fields)


@pytest.mark.parametrize(
    ("status", "fields", "outcome", "reason"),
    [
        (UserShellStatus.EXITED, {"exit_code": 0}, CommandResultKind.SUCCEEDED, None),
        (
            UserShellStatus.SIGNALED,
            {"signal": "SIGTERM"},
            CommandResultKind.FAILED,
            OutcomeReason.SIGNALED,
        ),
        (UserShellStatus.TIMED_OUT, {}, CommandResultKind.FAILED, OutcomeReason.TIMED_OUT),
        (
            UserShellStatus.CANCELLED,
            {},
            CommandResultKind.CANCELLED,
            OutcomeReason.REQUESTED_CANCELLATION,
        ),
        (UserShellStatus.INTERRUPTED, {}, CommandResultKind.FAILED, OutcomeReason.WORKER_RESTARTED),
        (
            UserShellStatus.FAILED,
            {"error": "spawn failed"},
            CommandResultKind.FAILED,
            OutcomeReason.COMMAND_FAILED,
        ),
    ],
)
def test_shell_completions_map_their_status_to_a_command_result(
    status: UserShellStatus,
    fields: dict[str, Any],
    outcome: CommandResultKind,
    reason: OutcomeReason | None,
) -> None:
    journal = Journal()
    mutation = journal.add(
        completed(
            "sh-1",
            UserShellOutcome.of(result=shell_result(status, **fields)),
            RelayCommandKind.RUN_USER_SHELL,
        )
    )
    ended = command_ended(mutation.api_events[0])
    assert (ended.outcome, ended.reason) == (outcome, reason)
    if status is UserShellStatus.FAILED:
        assert ended.message == "spawn failed"
    if reason is None:
        assert ended.message is None
