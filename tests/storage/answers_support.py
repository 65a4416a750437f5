"""Questions for the answer tests: a session's pending question written as the projection
would hold it, or asked by an ``input_required`` event of its feed.

A support module, not a test module.
"""

from __future__ import annotations

import apsw

from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.wire import encode

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "pin": {"type": "string", "title": "PIN", "_meta": {"codex": {"isSecret": True}}},
    },
    "required": ["name", "pin"],
}
"""A question with a plain field (``name``) and a secret one (``pin``)."""


def question(request_id: str = "q1") -> ElicitationRequest:
    """The question :data:`SCHEMA` asks, as ``request_id``."""
    return parse_acp_request(
        request_id,
        {"mode": "form", "sessionId": "n", "message": "Who?", "requestedSchema": SCHEMA},
    )


def pend(connection: apsw.Connection, session_id: str, *requests: ElicitationRequest) -> None:
    """Make ``requests`` the session's pending questions (its projection's list)."""
    connection.execute(
        "UPDATE materialized_sessions SET pending_elicitations_json = ? WHERE session_id = ?",
        (encode(list(requests)).decode(), session_id),
    )


def ask_in_feed(connection: apsw.Connection, session_id: str, request: ElicitationRequest) -> None:
    """An ``input_required`` event of the session's feed asking ``request`` (the question
    resolved since: not pending)."""
    body = b'{"type":"input_required","data":{"request":' + encode(request) + b',"turn_id":null}}'
    connection.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES (?, 1, ?)",
        (session_id, body.decode()),
    )
