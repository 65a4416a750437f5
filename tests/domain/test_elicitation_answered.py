"""Who answered a question and what: the boundary checks, the mask, the text, and the
one-answer-per-question rule (:mod:`relaystore.domain.elicitation.answered`)."""

from __future__ import annotations

import msgspec
import pytest

from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.elicitation.answered import (
    MAX_ANSWERER_CHARS,
    RecordedAnswer,
    admit_answer,
    answer_text,
    checked_answer,
    masked_response,
)
from relaystore.domain.elicitation.forms import (
    ElicitationAccept,
    ElicitationCancel,
    ElicitationDecline,
)
from relaystore.domain.errors import InvalidInput
from relaystore.domain.messages import RecordElicitationAnswer
from relaystore.domain.validation import validate_message

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "pin": {
            "type": "string",
            "title": "PIN",
            "minLength": 4,
            "_meta": {"codex": {"isSecret": True}},
        },
        "go": {"type": "boolean", "title": "Go"},
    },
    "required": ["name", "pin"],
}
QUESTION = parse_acp_request(
    "q1", {"mode": "form", "sessionId": "n", "message": "Who?", "requestedSchema": SCHEMA}
)


def message(**changes: object) -> RecordElicitationAnswer:
    fields: dict[str, object] = {
        "session_id": "s1",
        "elicitation_id": "q1",
        "answered_by": "ada@example.com",
        "response": ElicitationAccept(content={"name": "Ada", "pin": "1234"}),
        "answered_at_ms": 10,
        **changes,
    }
    return RecordElicitationAnswer(**fields)  # type: ignore[arg-type]


def test_a_well_formed_record_passes_the_boundary() -> None:
    validate_message(message())


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"answered_by": ""}, "RecordElicitationAnswer.answered_by: who answered is empty"),
        ({"answered_by": "   "}, "RecordElicitationAnswer.answered_by: who answered is empty"),
        (
            {"answered_by": "x" * (MAX_ANSWERER_CHARS + 1)},
            "RecordElicitationAnswer.answered_by: who answered is 201 characters long",
        ),
        ({"answered_by": "ada\nadmin"}, "RecordElicitationAnswer.answered_by: who answered holds"),
        ({"answered_by": "ada\u202e"}, "RecordElicitationAnswer.answered_by: who answered holds"),
        ({"elicitation_id": ""}, "RecordElicitationAnswer.elicitation_id: the elicitation id"),
        ({"elicitation_id": "q" * 257}, "RecordElicitationAnswer.elicitation_id: the elicitation"),
        ({"session_id": "a/b"}, "RecordElicitationAnswer.session_id: invalid session id"),
        ({"answered_at_ms": -1}, "RecordElicitationAnswer.answered_at_ms"),
        ({"answered_by": 7}, "RecordElicitationAnswer.answered_by: Expected `str`"),
    ],
)
def test_the_boundary_refuses_a_bad_field_and_names_it(
    changes: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_message(message(**changes))
    assert str(refused.value).startswith(named)


def test_a_secret_answer_is_masked_and_never_in_the_text() -> None:
    recorded = checked_answer(
        "here",
        QUESTION,
        elicitation_id="q1",
        answered_by="ada",
        answered_at_ms=1,
        response=ElicitationAccept(content={"name": "Ada", "pin": "2468", "go": True}),
    )
    assert recorded.response == ElicitationAccept(content={"go": True, "name": "Ada", "pin": "***"})
    text = answer_text(recorded.response)
    assert text == "accepted: go = yes; name = Ada; pin = ***"
    assert "2468" not in text


def test_a_refused_secret_answer_names_the_field_not_the_value() -> None:
    with pytest.raises(InvalidInput) as refused:
        checked_answer(
            "RecordElicitationAnswer.response",
            QUESTION,
            elicitation_id="q1",
            answered_by="ada",
            answered_at_ms=1,
            response=ElicitationAccept(content={"name": "Ada", "pin": "987"}),
        )
    text = str(refused.value)
    assert text.startswith("RecordElicitationAnswer.response: 'PIN' (field 'pin') is too short")
    assert "987" not in text


def test_the_answer_is_checked_by_the_questions_own_rule() -> None:
    with pytest.raises(InvalidInput, match=r"'Name' \(field 'name'\) is required"):
        checked_answer(
            "w",
            QUESTION,
            elicitation_id="q1",
            answered_by="ada",
            answered_at_ms=1,
            response=ElicitationAccept(content={"pin": "1234"}),
        )


def test_decline_and_cancel_keep_no_content() -> None:
    assert masked_response(QUESTION, ElicitationDecline()) == ElicitationDecline()
    assert answer_text(ElicitationDecline()) == "declined"
    assert answer_text(ElicitationCancel()) == "cancelled"
    assert answer_text(ElicitationAccept()) == "accepted (no fields answered)"
    assert answer_text(ElicitationAccept(content={"tags": []})) == "accepted: tags = (none)"


def _recorded(by: str = "ada", at: int = 1, name: str = "Ada") -> RecordedAnswer:
    return RecordedAnswer(
        elicitation_id="q1",
        answered_by=by,
        answered_at_ms=at,
        response=ElicitationAccept(content={"name": name, "pin": "***"}),
    )


def test_one_answer_per_question_a_retry_changes_nothing_a_second_is_refused() -> None:
    assert admit_answer(None, _recorded()) is True
    assert admit_answer(_recorded(), _recorded()) is False  # the same record: a retry
    for other in (_recorded(by="bob"), _recorded(at=2), _recorded(name="Bea")):
        with pytest.raises(InvalidInput) as refused:
            admit_answer(_recorded(), other)
        assert "answered already, by 'ada' at 1 ms" in str(refused.value)


@pytest.mark.parametrize(
    ("row", "named"),
    [
        (("q1", "ada\x07", 1, '{"action":"decline"}'), "answers[0].answered_by"),
        (("", "ada", 1, '{"action":"decline"}'), "answers[0].elicitation_id"),
        (("q1", "ada", -5, '{"action":"decline"}'), "answers[0].answered_at_ms"),
        (("q1", "ada", 1, '{"action":"maybe"}'), "answers[0].response_json"),
    ],
)
def test_a_replica_refuses_a_published_answer_no_store_could_have_recorded(
    row: tuple[str, str, int, str], named: str
) -> None:
    from relaystore.domain.replication import AnswerRow, RecordState, check_record_ids

    state = RecordState(
        session_id="s1", workspace=None, context=None, session=None, answers=[AnswerRow(*row)]
    )
    check_record_ids("change 3", "s1", msgspec.structs.replace(state, answers=[]))
    with pytest.raises(InvalidInput) as refused:
        check_record_ids("change 3", "s1", state)
    assert str(refused.value).startswith(f"change 3: {named}")
