"""Building a session record by hand, from ``relaystore`` alone (issue 20, case 16).

Every enum a record needs is exported; a wrong value inside a record is refused naming
the nested field (never ``expected SessionRecord, got SessionRecord``); timestamps are
RFC 3339 date-times.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import relaystore
import relaystore.domain.sessions.provisioning
import relaystore.domain.sessions.records
import relaystore.domain.sessions.targets
from relaystore import (
    EventStore,
    HarnessKind,
    InvalidInput,
    LoadState,
    PublicationState,
    RecoverInterruptedCheckpoints,
    SaveLifecycleSession,
    SaveSession,
    SessionRecord,
    SessionState,
)
from relaystore.domain.sessions.provisioning import AdditionalMount, MountAccess
from relaystore.domain.sessions.records import CheckpointMetadata, PublicationAssessment
from relaystore.testing import example_session


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        yield store


def by_hand(**changes: Any) -> SessionRecord:
    """The record docs/facade.md builds by hand, with ``changes``."""
    fields: dict[str, Any] = {
        "id": "session-1",
        "title": "fix the flaky test",
        "harness_kind": HarnessKind.CODEX,
        "last_profile": "codex",
        "bundle_id": "project-1",
        "target_template_id": "local",
        "state": SessionState.STOPPED,
        "created_at": "2026-08-12T00:00:00Z",
        "updated_at": "2026-08-12T00:00:00Z",
    }
    fields.update(changes)
    return SessionRecord(**fields)


def test_every_enum_a_record_needs_is_exported() -> None:
    enums = {
        name: value
        for module in (
            relaystore.domain.sessions.records,
            relaystore.domain.sessions.provisioning,
            relaystore.domain.sessions.targets,
        )
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, enum.Enum)
    }
    enums["HarnessKind"] = HarnessKind
    missing = [name for name, kind in enums.items() if getattr(relaystore, name, None) is not kind]
    assert missing == []
    assert {"HarnessKind", "SessionState"} <= set(relaystore.__all__)


def test_a_record_built_by_hand_saves_and_loads(store: EventStore) -> None:
    record = by_hand(
        harness_kind=relaystore.HarnessKind.CLAUDE, created_at="2026-08-12T00:00:00.5+02:00"
    )
    store.ask(SaveSession(record=record))
    assert store.ask(LoadState()).sessions == {"session-1": record}


@pytest.mark.parametrize(
    ("changes", "where", "words"),
    [
        ({"harness_kind": "codex"}, "record.harness_kind", "expected HarnessKind, got str"),
        ({"state": "stopped"}, "record.state", "expected SessionState, got str"),
        ({"harness_kind": "nonsense"}, "record.harness_kind", "Invalid enum value 'nonsense'"),
        ({"title": 5}, "record.title", "Expected `str`, got `int`"),
        (
            {"additional_mounts": [{"source": "/a", "destination": "/b", "access": "ro"}]},
            "record.additional_mounts[0]",
            "expected AdditionalMount, got dict",
        ),
        (
            {
                "additional_mounts": [
                    AdditionalMount(source="/a", destination="/b", access="ro")  # type: ignore[arg-type]
                ]
            },
            "record.additional_mounts[0].access",
            "expected MountAccess, got str",
        ),
        (
            {
                "checkpoint": CheckpointMetadata(
                    archive_path="a.zip",
                    sha256="a" * 64,
                    created_at="2026-08-12T00:00:00Z",
                    event_frontier="6",  # type: ignore[arg-type]
                )
            },
            "record.checkpoint.event_frontier",
            "Expected `int`, got `str`",
        ),
    ],
)
def test_a_wrong_value_inside_a_record_names_the_nested_field(
    store: EventStore, changes: dict[str, Any], where: str, words: str
) -> None:
    for message in (
        SaveSession(record=by_hand(**changes)),
        SaveLifecycleSession(record=by_hand(**changes)),
    ):
        with pytest.raises(InvalidInput) as refused:
            store.ask(message)
        text = str(refused.value)
        assert text.startswith(f"{type(message).__name__}.{where}: "), text
        assert words in text
        assert "expected SessionRecord, got SessionRecord" not in text
    assert store.ask(LoadState()).sessions == {}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"created_at": "yesterday"}, "created_at"),
        ({"updated_at": "2026-13-01T00:00:00Z"}, "updated_at"),
        ({"updated_at": "2026-08-12"}, "updated_at"),
        ({"created_at": "2026-08-12T00:00:00"}, "created_at"),  # no offset: not RFC 3339
        (
            {
                "checkpoint": CheckpointMetadata(
                    archive_path="a.zip", sha256="a" * 64, created_at="soon", event_frontier=6
                )
            },
            "checkpoint.created_at",
        ),
        (
            {
                "publication": PublicationAssessment(
                    checkpoint_sha256="a" * 64,
                    state=PublicationState.PUBLISHED,
                    dirty=False,
                    stashed=False,
                    saved_commits=[],
                    destinations=[],
                    checked_at="last week",
                )
            },
            "publication.checked_at",
        ),
    ],
)
def test_a_timestamp_that_is_no_rfc_3339_time_is_refused_naming_it(
    store: EventStore, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput, match=rf"\({field}\)") as refused:
        store.ask(SaveSession(record=by_hand(**changes)))
    assert refused.value.session_id == "session-1"
    assert "RFC 3339" in str(refused.value)
    assert store.ask(LoadState()).sessions == {}


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-08-12T00:00:00Z",
        "2026-08-12T00:00:00.123456789+00:00",  # chrono's to_rfc3339, as the origin writes
        "2026-08-12t00:00:00-05:30",
        "2016-12-31T23:59:60Z",  # a leap second
    ],
)
def test_rfc_3339_timestamps_are_accepted(store: EventStore, stamp: str) -> None:
    store.ask(SaveSession(record=by_hand(created_at=stamp, updated_at=stamp)))
    assert store.ask(LoadState()).sessions["session-1"].created_at == stamp


def test_the_example_session_still_round_trips(store: EventStore) -> None:
    record = example_session()
    store.ask(SaveSession(record=record))
    stored = store.ask(LoadState()).sessions["session-1"]
    assert msgspec.json.encode(stored) == msgspec.json.encode(record)
    assert stored.additional_mounts[0].access is MountAccess.COW


def test_a_recovery_timestamp_that_is_no_rfc_3339_time_is_refused(store: EventStore) -> None:
    with pytest.raises(
        InvalidInput, match=r"^RecoverInterruptedCheckpoints\.updated_at: .*RFC 3339"
    ):
        store.ask(RecoverInterruptedCheckpoints(updated_at="after lunch"))
    with pytest.raises(InvalidInput, match="recovery timestamp is empty"):
        store.ask(RecoverInterruptedCheckpoints(updated_at=" "))
    assert store.ask(RecoverInterruptedCheckpoints(updated_at="2026-08-12T00:00:00Z")) == 0
