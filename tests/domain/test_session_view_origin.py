"""``ApiSession`` as the origin writes it now: golden replies, byte for byte.

Written from the origin's source, not from relaystore's output:

* the shape and field order: ``ApiSession`` in
  ``mj-controller/src/server/api/types.rs`` @e1ec72d (``background_tasks`` first, always
  written; ``assessment`` and ``storage_problem`` skipped when none; ``subagents`` always
  written; ``at``/``branch``/``base`` skipped when none; ``checkout`` gone, as @04067804);
* ``at``/``branch``/``base``: ``SessionRecord::start_selection`` in ``mj-core/src/state.rs``
  @d12c1fd (``at`` the checkout's commit, ``branch`` the checkout's or the launch
  branch, ``base`` the launch base or ``at``);
* ``subagents``: ``session.subagents.clone().unwrap_or_default()`` with
  ``SubagentPolicy``'s default ``Native`` (``viewer_types.rs`` @02290ee,
  ``mj-core/src/subagent.rs``);
* ``error``/``has_error``: the viewer row's ``launch_error`` (raw ``last_error`` for
  ``Error | Stopped``, else ``public_error()``) and ``has_error = last_error.is_some()``
  (``viewer_types.rs`` @02290ee; ``is_public_lifecycle_error`` in ``state.rs`` @d12c1fd).
"""

from __future__ import annotations

import msgspec
import pytest

from relaystore.domain.read_replies import SessionFacts
from relaystore.domain.sessions.records import (
    AllModelsSubagents,
    SessionRecord,
    SessionState,
    SingleModelSubagents,
)
from relaystore.domain.sessions.views import api_session
from relaystore.domain.wire import encode
from relaystore.testing import example_session

COMMIT = "0123456789abcdef0123456789abcdef01234567"

_HEAD = '{"background_tasks":[],'
_IDENTITY = (
    '"id":"session-1","workspace_id":"default","title":"test session",'
    '"harness_kind":"codex","profile_id":"codex","target_id":"local",'
    '"bundle_id":"project-1",'
)
_TIMES = '"created_at":"2026-08-12T00:00:00Z","updated_at":"2026-08-12T01:00:00Z",'
_TAIL = '"config_options":[]}'


def _view(record: SessionRecord) -> bytes:
    facts = msgspec.json.decode(encode(record), type=SessionFacts)
    return encode(
        api_session(
            facts,
            workspace_id=record.workspace_id,
            execution=None,
            session_title=None,
            configuration={},
            pending_elicitations=[],
            queued_prompts=0,
            activity=None,
        )
    )


def _golden(*, policy: str, selection: str = "", state: str, errors: str) -> bytes:
    return (
        _HEAD
        + f'"subagents":{policy},'
        + selection
        + _IDENTITY
        + state
        + '"chat_phase":"idle","is_idle":true,'
        + errors
        + _TIMES
        + _TAIL
    ).encode()


_STOPPED = '"state":"Stopped","lifecycle":"suspended",'
_RUNNING = '"state":"Running","lifecycle":"live",'
_NO_ERROR = '"has_error":false,'


def test_a_plain_record_names_native_delegation_and_no_starting_selection() -> None:
    assert _view(example_session()) == _golden(
        policy='{"mode":"native"}', state=_STOPPED, errors=_NO_ERROR
    )


@pytest.mark.parametrize(
    ("policy", "wire"),
    [
        (AllModelsSubagents(), '{"mode":"all_models"}'),
        (
            SingleModelSubagents(model="luna"),
            '{"mode":"single_model","model":"luna","effort":null}',
        ),
        (
            SingleModelSubagents(model="luna", effort="high"),
            '{"mode":"single_model","model":"luna","effort":"high"}',
        ),
        (True, '{"mode":"all_models"}'),
        (False, '{"mode":"native"}'),
    ],
)
def test_subagents_is_the_records_policy(policy: object, wire: str) -> None:
    record = msgspec.structs.replace(example_session(), subagents=policy)
    assert _view(record) == _golden(policy=wire, state=_STOPPED, errors=_NO_ERROR)


@pytest.mark.parametrize(
    ("checkout", "base", "branch", "selection"),
    [
        # `at` alone: base reads as at.
        (
            {"repository_id": "repo", "commit": COMMIT},
            None,
            None,
            f'"at":"{COMMIT}","base":"{COMMIT}",',
        ),
        # `at` with a new branch, and another base named.
        (
            {"repository_id": "repo", "commit": COMMIT, "branch": "feature"},
            "main",
            None,
            f'"at":"{COMMIT}","branch":"feature","base":"main",',
        ),
        # No checkout: an existing branch in a new workspace, with a base.
        (None, "origin/main", "topic", '"branch":"topic","base":"origin/main",'),
        # Only a base (a raw managed worktree's starting revision).
        (None, "HEAD~2", None, '"base":"HEAD~2",'),
    ],
)
def test_the_starting_selection_in_place_of_checkout(
    checkout: object, base: str | None, branch: str | None, selection: str
) -> None:
    record = msgspec.structs.replace(
        example_session(), checkout=checkout, launch_base=base, launch_branch=branch
    )
    assert _view(record) == _golden(
        policy='{"mode":"native"}', selection=selection, state=_STOPPED, errors=_NO_ERROR
    )


RAW = "provisioning failed: ssh user@host.example: /home/u/.codex denied"


@pytest.mark.parametrize(
    ("state", "label", "last_error", "errors"),
    [
        # Stopped and error publish the raw text (a failed resume, a failed launch).
        (SessionState.STOPPED, _STOPPED, RAW, f'"has_error":true,"error":"{RAW}",'),
        (
            SessionState.ERROR,
            '"state":"Error","lifecycle":"failed",',
            RAW,
            f'"has_error":true,"error":"{RAW}",',
        ),
        # A live session keeps its raw error chain private, but says it has one.
        (SessionState.RUNNING, _RUNNING, RAW, '"has_error":true,'),
        (
            SessionState.DESTROYED_WITH_DATA_LOSS,
            '"state":"DestroyedWithDataLoss","lifecycle":"failed",',
            RAW,
            '"has_error":true,',
        ),
        # The lifecycle sentences are published whatever the state.
        *(
            (
                SessionState.RUNNING,
                _RUNNING,
                f"{prefix}: the checkpoint failed",
                f'"has_error":true,"error":"{prefix}: the checkpoint failed",',
            )
            for prefix in (
                "the suspension did not finish",
                "the destruction did not finish",
                "the close did not finish",
                "the move did not finish",
            )
        ),
        # The error state without a recorded error: nothing to say, and no error.
        (SessionState.ERROR, '"state":"Error","lifecycle":"failed",', None, _NO_ERROR),
    ],
)
def test_error_as_the_origin_publishes_it(
    state: SessionState, label: str, last_error: str | None, errors: str
) -> None:
    record = msgspec.structs.replace(example_session(), state=state, last_error=last_error)
    assert _view(record) == _golden(policy='{"mode":"native"}', state=label, errors=errors)


def test_every_optional_field_sits_where_the_origin_writes_it() -> None:
    """``types.rs`` @e1ec72d's order with every field set: ``background_tasks``,
    ``assessment``, ``subagents``, ``at``, ``branch``, ``base``, ``background_work``, the
    identity, ``activity_state``, ``has_error``, ``error``, ``storage_problem``, the
    times, the detail's outcome, ``config_options``, ``pending_elicitations``."""
    from relaystore.domain.read_replies import ApiSession, BackgroundTask

    session = ApiSession(
        background_tasks=[BackgroundTask(id="t", command="sleep", started_at_ms=1, can_stop=True)],
        assessment={"verdict": "ok"},
        subagents=AllModelsSubagents(),
        at=COMMIT,
        branch="b",
        base="main",
        background_work={"known": True, "tasks": []},
        id="s",
        workspace_id="w",
        title="t",
        harness_kind="codex",
        profile_id="p",
        target_id="local",
        bundle_id="b1",
        state="Running",
        lifecycle="live",
        chat_phase="idle",
        is_idle=True,
        has_error=True,
        error="the move did not finish: no room",
        storage_problem="the disk is full",
        created_at="c",
        updated_at="u",
    )
    assert encode(session) == (
        b'{"background_tasks":[{"id":"t","command":"sleep","started_at_ms":1,"can_stop":true}],'
        b'"assessment":{"verdict":"ok"},"subagents":{"mode":"all_models"},'
        b'"at":"' + COMMIT.encode() + b'","branch":"b","base":"main",'
        b'"background_work":{"known":true,"tasks":[]},"id":"s","workspace_id":"w","title":"t",'
        b'"harness_kind":"codex","profile_id":"p","target_id":"local","bundle_id":"b1",'
        b'"state":"Running","lifecycle":"live","chat_phase":"idle","is_idle":true,'
        b'"has_error":true,"error":"the move did not finish: no room",'
        b'"storage_problem":"the disk is full","created_at":"c","updated_at":"u",'
        b'"config_options":[]}'
    )
