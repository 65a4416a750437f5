"""Harness runtime identity: the derived id, the receipt shape and expected-id checks."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from relaystore.domain.errors import InvalidInput
from relaystore.domain.runtime import (
    RUNTIME_ID_PREFIX,
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
    RuntimeReceipt,
    validate_expected_identity,
)
from relaystore.domain.wire import decode_json, encode
from tests.domain.strategies import dumps, runtime_identities, runtime_receipts

# Derived values published in origin-domain.md §4 for the seed's runtime.
FIRST_ID = "mj-runtime-v1:55e085ff68b9b6b8e189583b12475fb6e2dde6f5f3d27e88979ed826b0174bdc"
SECOND_ID = "mj-runtime-v1:4cd4c586c07520434d9baa78ebbfd739b12bf3979753b1d1aca37977af9da309"


def seed_identity(version: str) -> RuntimeIdentity:
    identity = RuntimeIdentity(
        harness=HarnessKind.CODEX,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        components=[RuntimeComponent(name="provider", version=version)],
    )
    identity.refresh_id()
    return identity


@pytest.mark.parametrize(("version", "expected"), [("first", FIRST_ID), ("second", SECOND_ID)])
def test_seed_runtime_ids_reproduce(version: str, expected: str) -> None:
    assert seed_identity(version).id == expected


def test_runtime_id_hashes_the_published_array() -> None:
    payload = b'[1,"codex","test-target","target_installation",[{"name":"provider","version":"first","sha256":null}]]'
    assert seed_identity("first").id == RUNTIME_ID_PREFIX + hashlib.sha256(payload).hexdigest()


def test_refresh_id_sorts_components_by_name_in_place_and_stably() -> None:
    identity = RuntimeIdentity(
        harness=HarnessKind.CLAUDE,
        platform="linux-x86_64",
        provenance=RuntimeProvenance.MANAGED_INSTALLATION,
        components=[
            RuntimeComponent(name="provider_sdk", version="2"),
            RuntimeComponent(name="acp_bridge", version="b"),
            RuntimeComponent(name="Zeta", version="upper sorts first"),
            RuntimeComponent(name="acp_bridge", version="a"),
        ],
    )
    identity.refresh_id()
    assert [(c.name, c.version) for c in identity.components] == [
        ("Zeta", "upper sorts first"),
        ("acp_bridge", "b"),
        ("acp_bridge", "a"),
        ("provider_sdk", "2"),
    ]


def test_component_order_does_not_change_the_id() -> None:
    parts = [RuntimeComponent(name=name, version=name.upper()) for name in ("c", "a", "b")]
    forward = RuntimeIdentity(
        harness=HarnessKind.KIMI,
        platform="p",
        provenance=RuntimeProvenance.MANAGED_INSTALLATION,
        components=list(parts),
    )
    backward = RuntimeIdentity(
        harness=HarnessKind.KIMI,
        platform="p",
        provenance=RuntimeProvenance.MANAGED_INSTALLATION,
        components=list(reversed(parts)),
    )
    forward.refresh_id()
    backward.refresh_id()
    assert forward.id == backward.id


def test_unavailable_runtime_has_no_id() -> None:
    identity = seed_identity("first")
    identity.unavailable_reason = "provider CLI missing"
    identity.refresh_id()
    assert identity.id is None


@pytest.mark.parametrize(
    "change",
    [
        {"harness": HarnessKind.GROK},
        {"platform": "darwin-aarch64"},
        {"provenance": RuntimeProvenance.MANAGED_INSTALLATION},
        {"components": [RuntimeComponent(name="provider", version="first", sha256="0" * 64)]},
    ],
    ids=["harness", "platform", "provenance", "component sha256"],
)
def test_every_hashed_field_changes_the_id(change: dict[str, Any]) -> None:
    changed = msgspec.structs.replace(seed_identity("first"), **change)
    changed.refresh_id()
    assert changed.id is not None
    assert changed.id != FIRST_ID


def test_a_stale_id_does_not_feed_the_new_id() -> None:
    identity = seed_identity("first")
    identity.id = "mj-runtime-v1:stale"
    identity.refresh_id()
    assert identity.id == FIRST_ID


def test_require_accepts_the_matching_id_and_refuses_others() -> None:
    identity = seed_identity("first")
    identity.require(FIRST_ID)
    with pytest.raises(InvalidInput, match="mismatch"):
        identity.require(SECOND_ID)


def test_require_refuses_an_unavailable_runtime_with_its_reason() -> None:
    identity = seed_identity("first")
    identity.unavailable_reason = "no bridge"
    identity.refresh_id()
    with pytest.raises(InvalidInput, match="unavailable: no bridge"):
        identity.require(FIRST_ID)


@pytest.mark.parametrize("value", [FIRST_ID, "x", "!" * 256, "~abc~"])
def test_expected_identity_of_printable_ascii_is_accepted(value: str) -> None:
    validate_expected_identity(value)


@pytest.mark.parametrize("value", ["", "a" * 257, "has space", "tab\there", "caf\u00e9", "del\x7f"])
def test_expected_identity_outside_printable_ascii_is_refused(value: str) -> None:
    with pytest.raises(InvalidInput, match="expected runtime identity"):
        validate_expected_identity(value)


# --- wire shapes -----------------------------------------------------------------------------


def test_identity_writes_every_field_including_nulls() -> None:
    identity = RuntimeIdentity(
        harness=HarnessKind.MUSE,
        platform="p",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        components=[RuntimeComponent(name="n")],
    )
    assert encode(identity) == (
        b'{"id":null,"harness":"muse","platform":"p","provenance":"target_installation",'
        b'"components":[{"name":"n","version":null,"sha256":null}],"unavailable_reason":null}'
    )


def test_receipt_writes_identity_fields_first_then_ordinal_and_time() -> None:
    identity = seed_identity("first")
    receipt = RuntimeReceipt.observed(identity, ordinal=4, at_ms=100)
    assert encode(receipt) == (
        b'{"id":"' + FIRST_ID.encode() + b'","harness":"codex","platform":"test-target",'
        b'"provenance":"target_installation","components":[{"name":"provider","version":"first",'
        b'"sha256":null}],"unavailable_reason":null,"event_ordinal":4,"observed_at_ms":100}'
    )
    assert receipt.identity == identity


def test_receipt_does_not_share_its_component_list_with_the_identity() -> None:
    identity = seed_identity("first")
    receipt = RuntimeReceipt.observed(identity, ordinal=1, at_ms=1)
    receipt.components.append(RuntimeComponent(name="extra"))
    assert len(identity.components) == 1
    assert len(receipt.identity.components) == 2
    assert receipt.identity.components is not receipt.components


def test_identities_do_not_share_a_default_component_list() -> None:
    first = RuntimeIdentity(
        harness=HarnessKind.CODEX, platform="p", provenance=RuntimeProvenance.MANAGED_INSTALLATION
    )
    second = RuntimeIdentity(
        harness=HarnessKind.CODEX, platform="p", provenance=RuntimeProvenance.MANAGED_INSTALLATION
    )
    first.components.append(RuntimeComponent(name="n"))
    assert second.components == []
    assert encode(second).count(b'"components":[]') == 1


def test_identity_decodes_with_missing_always_written_fields() -> None:
    decoded = decode_json(
        b'{"harness":"kimi","platform":"p","provenance":"managed_installation"}', RuntimeIdentity
    )
    assert decoded.id is None
    assert decoded.components == []
    assert decoded.unavailable_reason is None


def test_harness_kinds_are_written_in_kebab_case() -> None:
    assert {kind.value for kind in HarnessKind} >= {"codex", "claude", "kimi", "grok", "muse"}
    assert all(kind.value == kind.value.lower().replace("_", "-") for kind in HarnessKind)


def test_unknown_harness_is_refused() -> None:
    with pytest.raises(InvalidInput, match="harness"):
        decode_json(
            b'{"harness":"emacs","platform":"p","provenance":"managed_installation"}',
            RuntimeIdentity,
        )


# --- properties ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "kind"),
    [(runtime_identities, RuntimeIdentity), (runtime_receipts, RuntimeReceipt)],
    ids=["RuntimeIdentity", "RuntimeReceipt"],
)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_canonical_runtime_json_round_trips_to_identical_bytes(
    strategy: st.SearchStrategy[dict[str, Any]], kind: type, data: st.DataObject
) -> None:
    raw = dumps(data.draw(strategy))
    assert encode(decode_json(raw, kind)) == raw
    assert msgspec.json.encode(msgspec.json.decode(raw, type=kind)) == raw


@settings(max_examples=100, deadline=None)
@given(value=runtime_identities)
def test_refresh_id_hashes_the_sorted_identity_array(value: dict[str, Any]) -> None:
    identity = decode_json(dumps(value), RuntimeIdentity)
    identity.refresh_id()
    components = sorted(value["components"], key=lambda component: component["name"].encode())
    if value["unavailable_reason"] is not None:
        assert identity.id is None
        return
    payload = dumps([1, value["harness"], value["platform"], value["provenance"], components])
    assert identity.id == RUNTIME_ID_PREFIX + hashlib.sha256(payload).hexdigest()
    assert encode(identity.components) == dumps(components)
