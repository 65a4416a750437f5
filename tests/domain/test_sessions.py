"""Session records: wire bytes, legacy spellings, unknown fields and validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from relaystore.domain.errors import InvalidInput
from relaystore.domain.ids import validate_id
from relaystore.domain.runtime import HarnessKind
from relaystore.domain.sessions.provisioning import (
    AdditionalMount,
    AwsEc2Allocation,
    ContainerAllocation,
    LocalWorktreeTarget,
    ManagedCheckoutKind,
    ManagedWorktree,
    MountAccess,
    SshWorktreeTarget,
)
from relaystore.domain.sessions.records import (
    AllModelsSubagents,
    CheckpointMetadata,
    NativeSubagents,
    SessionRecord,
    SessionState,
    SingleModelSubagents,
    State,
)
from relaystore.domain.sessions.targets import (
    AppleContainerTarget,
    AwsConnection,
    AwsEc2Target,
    ExecutionPolicy,
    LocalBareTarget,
    LocalDockerTarget,
    LocalPodmanTarget,
    SshBareTarget,
    SshDockerTarget,
    SshPodmanTarget,
    TargetRuntimeSettings,
    VolumeStorage,
)
from relaystore.domain.wire import decode_json, encode
from relaystore.testing import checkpointed_session, example_session

# --- the fixture ---------------------------------------------------------------------------


def session(session_id: str = "session-1", bundle: str = "project-1") -> SessionRecord:
    """The origin's storage-test fixture ``session(id, bundle)``, field for field."""
    return SessionRecord(
        id=session_id,
        workspace_id="default",
        title="test session",
        harness_kind=HarnessKind.CODEX,
        last_profile="codex",
        bundle_id=bundle,
        target_template_id="local",
        resource_allocation=ContainerAllocation(cpus=8, memory_bytes=32 * 1024 * 1024 * 1024),
        additional_mounts=[
            AdditionalMount(source="/host/cache", destination="/mnt/cache", access=MountAccess.COW)
        ],
        state=SessionState.STOPPED,
        target=LocalPodmanTarget(container_id="container-1"),
        native_session_id="native-1",
        acp_session_title="Agent title",
        created_at="2026-08-12T00:00:00Z",
        updated_at="2026-08-12T01:00:00Z",
        viewed_through_event_ordinal=7,
        last_error=None,
        last_checkpoint_error="temporary recovery failure",
        checkpoint=CheckpointMetadata(
            archive_path="sessions/test.hel.zip",
            sha256="a" * 64,
            created_at="2026-08-12T01:00:00Z",
            event_frontier=6,
        ),
    )


FIXTURE_BYTES = (
    b'{"id":"session-1","workspace_id":"default","title":"test session","harness_kind":"codex",'
    b'"last_profile":"codex","bundle_id":"project-1","subagents":null,"target_template_id":"local",'
    b'"resource_allocation":{"kind":"container","cpus":8,"memory_bytes":34359738368},'
    b'"additional_mounts":[{"source":"/host/cache","destination":"/mnt/cache","access":"cow"}],'
    b'"state":"stopped","target":{"kind":"local-podman","container_id":"container-1",'
    b'"workspace_storage":{"kind":"container-layer"}},"native_session_id":"native-1",'
    b'"acp_session_title":"Agent title","created_at":"2026-08-12T00:00:00Z",'
    b'"updated_at":"2026-08-12T01:00:00Z","viewed_through_event_ordinal":7,'
    b'"last_checkpoint_error":"temporary recovery failure","checkpoint":'
    b'{"archive_path":"sessions/test.hel.zip","sha256":"' + b"a" * 64 + b'",'
    b'"created_at":"2026-08-12T01:00:00Z","event_frontier":6}}'
)


def _record(data: bytes) -> SessionRecord:
    return decode_json(data, SessionRecord, what="session record")


def _wire(record: SessionRecord) -> dict[str, Any]:
    value: dict[str, Any] = msgspec.json.decode(encode(record))
    return value


def _with(**changes: Any) -> bytes:
    """The fixture's wire object with keys replaced (``None`` removes a key)."""
    value = msgspec.json.decode(FIXTURE_BYTES)
    for key, new in changes.items():
        if new is None:
            value.pop(key, None)
        else:
            value[key] = new
    return msgspec.json.encode(value)


def test_the_checkpointed_example_is_the_fixture() -> None:
    assert checkpointed_session() == session()
    assert checkpointed_session("s-2", "b-2") == session("s-2", "b-2")


def test_the_public_example_is_a_plain_session() -> None:
    """The README's first example saves ``example_session()``: a session of its own,
    not one that claims a checkpoint archive nobody wrote or a recovery that failed."""
    plain = example_session("s-2", "b-2")
    plain.validate("s-2")
    assert plain.checkpoint is None
    assert plain.last_checkpoint_error is None
    assert plain.last_error is None
    assert plain.viewed_through_event_ordinal == 0
    fixture = session("s-2", "b-2")
    assert (
        msgspec.structs.replace(
            fixture, checkpoint=None, last_checkpoint_error=None, viewed_through_event_ordinal=0
        )
        == plain
    )


def test_the_fixture_is_valid() -> None:
    session().validate()
    session().validate("session-1")


def test_the_fixture_encodes_to_the_origin_bytes() -> None:
    assert encode(session()) == FIXTURE_BYTES


def test_the_fixture_round_trips_both_ways() -> None:
    assert _record(encode(session())) == session()
    assert encode(_record(FIXTURE_BYTES)) == FIXTURE_BYTES


def test_a_fully_populated_record_round_trips() -> None:
    record = session()
    record.project_directory = "/srv/project-1/.mj/clones/session-1/app"
    record.managed_worktree = ManagedWorktree(
        kind=ManagedCheckoutKind.CLONE,
        source_project_directory="/srv/project-1/app",
        source_repository="/srv/project-1",
        worktree_root="/srv/project-1/.mj/clones/session-1",
        branch="main",
        target=SshWorktreeTarget(destination="builder", ssh_args=["-p", "2222"]),
        base_commit="1" * 40,
    )
    record.create_managed_worktree = True
    record.launch_base = "origin/main"
    record.launch_branch = "main"
    record.checkout = {"repository": "x", "commit": "1" * 40, "nested": {"z": 1, "a": [None]}}
    record.project = {"bundle_id": "project-1", "repositories": [{"path": "app"}]}
    record.review = {"mode": "always"}
    record.subagents = SingleModelSubagents(model="gpt", effort=None)
    record.resource_allocation = AwsEc2Allocation(
        instance_type="m7i.large", vcpus=2, memory_bytes=8 << 30
    )
    record.container_cpus = "4"
    record.container_memory = "8g"
    record.container_workspace = "/workspace/session-1"
    record.archived = True
    record.target = SshPodmanTarget(
        host="builder", container_id="c", workspace_storage=VolumeStorage(name="v")
    )
    record.target_runtime = TargetRuntimeSettings(
        kind="aws-ec2",
        connection=AwsConnection(profile="p", region="r", ssh_user="u", ssh_args=[]),
        execution_policy=ExecutionPolicy.UNCONSTRAINED,
        environment={"Z": "1", "A": "2"},
    )
    record.session_title_override = "Renamed"
    record.draft_input = "half a thought"
    record.last_error = "boom"
    record.validate()
    data = encode(record)
    assert _record(data) == record
    assert encode(_record(data)) == data
    wire = _wire(record)
    assert list(wire["target_runtime"]["environment"]) == ["A", "Z"]
    assert wire["target_runtime"]["connection"]["identity_file"] is None
    assert wire["subagents"] == {"mode": "single_model", "model": "gpt", "effort": None}
    assert wire["managed_worktree"]["kind"] == "clone"


# --- skip rules ----------------------------------------------------------------------------


def test_fields_serde_always_writes_are_written_at_their_defaults() -> None:
    record = session()
    record.viewed_through_event_ordinal = 0
    wire = _wire(record)
    assert wire["workspace_id"] == "default"
    assert wire["subagents"] is None
    assert wire["viewed_through_event_ordinal"] == 0


def test_fields_serde_always_writes_default_when_missing_on_read() -> None:
    record = _record(_with(workspace_id=None, subagents=None, viewed_through_event_ordinal=None))
    assert record.workspace_id == "default"
    assert record.subagents is None
    assert record.viewed_through_event_ordinal == 0


@pytest.mark.parametrize(
    ("field", "empty", "filled"),
    [
        ("draft_input", "", "typing"),
        ("archived", False, True),
        ("additional_mounts", [], [AdditionalMount(source="/a", destination="/b")]),
        ("last_error", None, "failed"),
        ("project_directory", None, "/srv/p"),
    ],
)
def test_skipped_fields_are_written_only_when_set(field: str, empty: Any, filled: Any) -> None:
    record = session()
    setattr(record, field, empty)
    assert field not in _wire(record)
    setattr(record, field, filled)
    assert field in _wire(record)


def test_a_worktree_kind_is_left_out_and_a_clone_kind_written() -> None:
    worktree = ManagedWorktree(
        source_project_directory="/r",
        source_repository="/r",
        worktree_root="/r/.mj/worktrees/session-1",
        branch="mj/session-1",
        target=LocalWorktreeTarget(),
    )
    assert b'"kind":"worktree"' not in encode(worktree)
    assert encode(worktree).startswith(b'{"source_project_directory"')
    worktree.kind = ManagedCheckoutKind.CLONE
    assert encode(worktree).startswith(b'{"kind":"clone",')


# --- SessionState --------------------------------------------------------------------------


def test_session_states_use_kebab_case() -> None:
    assert [state.value for state in SessionState] == [
        "provisioning",
        "startup-cleanup",
        "running",
        "disconnected",
        "checkpointing",
        "closing",
        "destroying",
        "stopped",
        "parked",
        "lost",
        "error",
        "destroyed-with-data-loss",
    ]


def test_archived_is_read_as_stopped_and_never_written() -> None:
    assert SessionState("archived") is SessionState.STOPPED
    assert msgspec.json.decode(b'"archived"', type=SessionState) is SessionState.STOPPED
    record = _record(_with(state="archived"))
    assert record.state is SessionState.STOPPED
    assert encode(record) == FIXTURE_BYTES


def test_an_unknown_state_is_refused() -> None:
    with pytest.raises(InvalidInput, match="Invalid enum value 'sleeping'"):
        _record(_with(state="sleeping"))


@pytest.mark.parametrize(
    ("state", "lifecycle", "active", "live"),
    [
        (SessionState.PROVISIONING, False, True, True),
        (SessionState.RUNNING, False, True, True),
        (SessionState.DISCONNECTED, False, True, True),
        (SessionState.CHECKPOINTING, True, True, True),
        (SessionState.CLOSING, True, True, True),
        (SessionState.DESTROYING, True, True, True),
        (SessionState.STOPPED, False, False, False),
        (SessionState.PARKED, False, True, False),
        (SessionState.LOST, False, False, False),
        (SessionState.ERROR, False, True, False),
        (SessionState.DESTROYED_WITH_DATA_LOSS, False, False, False),
    ],
)
def test_state_classification(
    state: SessionState, lifecycle: bool, active: bool, live: bool
) -> None:
    assert state.is_lifecycle_operation is lifecycle
    assert state.is_active is active
    assert state.has_live_worker is live


# --- legacy spellings ----------------------------------------------------------------------


def test_the_old_subagents_key_is_read_and_written_under_the_new_name() -> None:
    record = _record(_with(subagents=None, mjolnir_subagents={"mode": "all_models"}))
    assert record.subagents == AllModelsSubagents()
    assert _wire(record)["subagents"] == {"mode": "all_models"}
    assert "mjolnir_subagents" not in _wire(record)


@pytest.mark.parametrize(
    ("stored", "policy"), [(True, AllModelsSubagents()), (False, NativeSubagents())]
)
@pytest.mark.parametrize("key", ["subagents", "mjolnir_subagents"])
def test_a_boolean_subagent_policy_is_read_as_a_policy(
    key: str, stored: bool, policy: object
) -> None:
    record = _record(_with(**{"subagents": None, key: stored}))
    assert record.subagents == policy
    assert record.subagent_policy == policy


def test_a_policy_given_under_both_names_is_refused() -> None:
    data = _with(subagents={"mode": "none"}, mjolnir_subagents={"mode": "native"})
    with pytest.raises(InvalidInput, match="duplicate field `subagents`"):
        _record(data)


def test_the_old_ordinal_key_is_read_and_written_under_the_new_name() -> None:
    record = _record(_with(viewed_through_event_ordinal=None, detached_after_event_ordinal=7))
    assert record == session()
    assert encode(record) == FIXTURE_BYTES


def test_an_ordinal_given_under_both_names_is_refused() -> None:
    with pytest.raises(InvalidInput, match="duplicate field `viewed_through_event_ordinal`"):
        _record(_with(detached_after_event_ordinal=3))


@pytest.mark.parametrize(
    ("mount", "access"),
    [
        ({"source": "/a", "destination": "/b", "read_only": True}, MountAccess.RO),
        ({"source": "/a", "destination": "/b", "read_only": False}, MountAccess.COW),
        ({"source": "/a", "destination": "/b"}, MountAccess.COW),
        ({"source": "/a", "destination": "/b", "access": "rw"}, MountAccess.RW),
        ({"source": "/a", "destination": "/b", "access": "ro", "read_only": True}, MountAccess.RO),
    ],
)
def test_a_legacy_read_only_mount_is_read_as_an_access_mode(
    mount: dict[str, Any], access: MountAccess
) -> None:
    record = _record(_with(additional_mounts=[mount]))
    assert record.additional_mounts[0].access is access
    assert _wire(record)["additional_mounts"] == [
        {"source": "/a", "destination": "/b", "access": access.value}
    ]


def test_a_mount_whose_access_contradicts_read_only_is_refused() -> None:
    mount = {"source": "/a", "destination": "/b", "access": "rw", "read_only": True}
    with pytest.raises(InvalidInput, match="contradicts legacy read_only=true"):
        _record(_with(additional_mounts=[mount]))


# --- unknown fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (_with(surprise=1), "`surprise`"),
        (
            _with(
                checkpoint={
                    "archive_path": "a",
                    "sha256": "b",
                    "created_at": "c",
                    "event_frontier": 1,
                    "extra": 1,
                }
            ),
            "`extra` - at `$.checkpoint`",
        ),
        (
            _with(
                additional_mounts=[{"source": "/a", "destination": "/b", "access": "ro", "mode": 1}]
            ),
            "`mode` - at `$.additional_mounts[0]`",
        ),
        (
            _with(build_cache={"host": "h", "directory": "/d", "size": "1"}),
            "`size` - at `$.build_cache`",
        ),
        (
            _with(
                managed_worktree={
                    "source_project_directory": "/r",
                    "source_repository": "/r",
                    "worktree_root": "/r/.mj/worktrees/session-1",
                    "branch": "mj/session-1",
                    "target": {"kind": "local"},
                    "owner": "x",
                }
            ),
            "`owner` - at `$.managed_worktree`",
        ),
        (_with(subagents={"mode": "native", "limit": 3}), "`limit` - at `$.subagents`"),
    ],
)
def test_unknown_fields_are_refused_where_the_origin_denies_them(data: bytes, where: str) -> None:
    with pytest.raises(InvalidInput, match="invalid session record") as raised:
        _record(data)
    assert f"Object contains unknown field {where}" in str(raised.value)


def test_unknown_fields_are_ignored_where_the_origin_allows_them() -> None:
    target = {"kind": "local-podman", "container_id": "container-1", "labels": {"x": 1}}
    record = _record(_with(target=target))
    assert record == session()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("viewed_through_event_ordinal", -1),
        ("resource_allocation", {"kind": "container", "cpus": -1, "memory_bytes": 1}),
    ],
)
def test_negative_unsigned_values_are_refused(field: str, value: Any) -> None:
    with pytest.raises(InvalidInput, match="Expected `int` >= 0"):
        _record(_with(**{field: value}))


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", ".", "..", "a" * 65, "a/b", "a b", "é", "id\n"])
@pytest.mark.parametrize("kind", ["session", "workspace", "profile", "bundle", "target template"])
def test_validate_id_refuses_bad_ids(kind: str, value: str) -> None:
    with pytest.raises(InvalidInput, match=f"invalid {kind} id"):
        validate_id(kind, value)


@pytest.mark.parametrize("value", ["a", "A.b-c_9", "a" * 64, "...", ".hidden"])
def test_validate_id_accepts_good_ids(value: str) -> None:
    validate_id("session", value)


def test_an_invalid_session_id_is_refused_without_a_session_context() -> None:
    with pytest.raises(InvalidInput, match=r'invalid session id "bad/id"') as raised:
        session(session_id="bad/id").validate()
    assert raised.value.session_id is None


def _managed(kind: ManagedCheckoutKind = ManagedCheckoutKind.WORKTREE) -> ManagedWorktree:
    folder = "worktrees" if kind is ManagedCheckoutKind.WORKTREE else "clones"
    return ManagedWorktree(
        kind=kind,
        source_project_directory="/srv/repo/app",
        source_repository="/srv/repo",
        worktree_root=f"/srv/repo/.mj/{folder}/session-1",
        branch="mj/session-1" if kind is ManagedCheckoutKind.WORKTREE else "main",
        target=LocalWorktreeTarget(),
    )


def _set(**changes: Any) -> Callable[[SessionRecord], None]:
    def change(record: SessionRecord) -> None:
        for key, value in changes.items():
            setattr(record, key, value)

    return change


def _worktree(
    project: str = "/srv/repo/.mj/worktrees/session-1/app", **changes: Any
) -> Callable[[SessionRecord], None]:
    def change(record: SessionRecord) -> None:
        worktree = _managed()
        for key, value in changes.items():
            setattr(worktree, key, value)
        record.managed_worktree = worktree
        record.project_directory = project

    return change


def _checkpoint(**changes: Any) -> Callable[[SessionRecord], None]:
    def change(record: SessionRecord) -> None:
        assert record.checkpoint is not None
        for key, value in changes.items():
            setattr(record.checkpoint, key, value)

    return change


REFUSALS: list[tuple[str, Callable[[SessionRecord], None], str]] = [
    ("workspace id", _set(workspace_id="no spaces"), 'invalid workspace id "no spaces"'),
    ("profile id", _set(last_profile=""), 'invalid profile id ""'),
    ("bundle id", _set(bundle_id=".."), 'invalid bundle id ".."'),
    ("template id", _set(target_template_id="t" * 65), "invalid target template id"),
    ("relative project", _set(project_directory="srv/p"), "unsafe project directory"),
    ("parent project", _set(project_directory="/srv/../etc"), "unsafe project directory"),
    (
        "worktree relative path",
        _worktree(source_repository="srv/repo"),
        "managed worktree source repository must be an absolute safe path",
    ),
    (
        "worktree outside repo",
        _worktree(source_project_directory="/elsewhere/app"),
        "managed worktree source directory is outside its repository",
    ),
    (
        "worktree root",
        _worktree(worktree_root="/srv/repo/.mj/worktrees/other"),
        "managed worktree root does not match the session-owned path",
    ),
    (
        "worktree branch",
        _worktree(branch="main"),
        "managed worktree branch does not match the session id",
    ),
    (
        "clone branch",
        _worktree(
            project="/srv/repo/.mj/clones/session-1/app",
            kind=ManagedCheckoutKind.CLONE,
            worktree_root="/srv/repo/.mj/clones/session-1",
            branch=" ",
        ),
        "managed clone has no starting branch",
    ),
    (
        "worktree project mismatch",
        _worktree(project="/srv/repo/.mj/worktrees/session-1"),
        "session project directory does not match its managed worktree",
    ),
    (
        "worktree without project",
        lambda record: setattr(record, "managed_worktree", _managed()),
        "session project directory does not match its managed worktree",
    ),
    (
        "worktree ssh destination",
        _worktree(target=SshWorktreeTarget(destination=" ")),
        "managed SSH worktree has an empty destination",
    ),
    (
        "zero cpus",
        _set(resource_allocation=ContainerAllocation(cpus=0, memory_bytes=1)),
        "container resource allocation must have non-zero CPU and memory",
    ),
    (
        "zero memory",
        _set(resource_allocation=ContainerAllocation(cpus=1, memory_bytes=0)),
        "container resource allocation must have non-zero CPU and memory",
    ),
    (
        "ec2 type",
        _set(resource_allocation=AwsEc2Allocation(instance_type=" ", vcpus=1, memory_bytes=1)),
        "EC2 resource allocation must have an instance type, CPU, and memory",
    ),
    (
        "ec2 vcpus",
        _set(resource_allocation=AwsEc2Allocation(instance_type="m", vcpus=0, memory_bytes=1)),
        "EC2 resource allocation must have an instance type, CPU, and memory",
    ),
    (
        "mount source",
        _set(additional_mounts=[AdditionalMount(source="host/cache", destination="/mnt/c")]),
        'additional mount source must be an absolute directory path, not "host/cache"',
    ),
    (
        "mount destination",
        _set(additional_mounts=[AdditionalMount(source="/c", destination="mnt/c")]),
        "additional mount destination must be a safe absolute container path",
    ),
    (
        "mount destination parent",
        _set(additional_mounts=[AdditionalMount(source="/c", destination="/mnt/../etc")]),
        "additional mount destination must be a safe absolute container path",
    ),
    (
        "mount duplicate",
        _set(
            additional_mounts=[
                AdditionalMount(source="/a", destination="/mnt/c"),
                AdditionalMount(source="/b", destination="/mnt//c/"),
            ]
        ),
        'additional mount destination "/mnt//c/" is configured more than once',
    ),
    (
        "mount duplicate root",
        _set(
            additional_mounts=[
                AdditionalMount(source="/a", destination="/mnt/c"),
                AdditionalMount(source="/b", destination="//mnt/./c"),
            ]
        ),
        'additional mount destination "//mnt/./c" is configured more than once',
    ),
    ("title", _set(title="  "), "empty title"),
    ("acp title", _set(acp_session_title=" "), "empty display title (acp_session_title)"),
    (
        "override title",
        _set(session_title_override=""),
        "empty display title (session_title_override)",
    ),
    ("created_at", _set(created_at=""), "empty timestamp (created_at)"),
    ("updated_at", _set(updated_at="\t"), "empty timestamp (updated_at)"),
    (
        "bare relative",
        _set(target=LocalBareTarget(worker_root="workers/session-1")),
        "local bare worker root must be an absolute safe path ending in the session id",
    ),
    (
        "bare other id",
        _set(target=LocalBareTarget(worker_root="/workers/session-2")),
        "local bare worker root must be an absolute safe path ending in the session id",
    ),
    (
        "bare parent",
        _set(target=LocalBareTarget(worker_root="/workers/../session-1")),
        "local bare worker root must be an absolute safe path ending in the session id",
    ),
    (
        "podman container",
        _set(target=LocalPodmanTarget(container_id=" ")),
        "target locator has an empty container id",
    ),
    (
        "docker container",
        _set(target=LocalDockerTarget(container_id="")),
        "target locator has an empty container id",
    ),
    (
        "apple container",
        _set(target=AppleContainerTarget(container_id="")),
        "target locator has an empty container id",
    ),
    (
        "ssh podman container",
        _set(target=SshPodmanTarget(host="h", container_id="")),
        "target locator has an empty container id",
    ),
    (
        "ssh docker container",
        _set(target=SshDockerTarget(host="h", container_id="")),
        "target locator has an empty container id",
    ),
    (
        "aws instance",
        _set(target=AwsEc2Target(instance_id=" ")),
        "target locator has an empty AWS instance id",
    ),
    (
        "ssh bare host",
        _set(target=SshBareTarget(host=" ", workspace="/w/session-1")),
        "bare SSH target locator has an empty host",
    ),
    (
        "ssh bare workspace",
        _set(target=SshBareTarget(host="h", workspace="/w/other")),
        "bare SSH target locator must be a safe path ending in the session id",
    ),
    (
        "ssh bare empty workspace",
        _set(target=SshBareTarget(host="h", workspace="")),
        "bare SSH target locator must be a safe path ending in the session id",
    ),
    (
        "ssh bare parent",
        _set(target=SshBareTarget(host="h", workspace="../session-1")),
        "bare SSH target locator must be a safe path ending in the session id",
    ),
    (
        "ssh podman host",
        _set(target=SshPodmanTarget(host="", container_id="c")),
        "SSH Podman target locator has an empty host",
    ),
    (
        "ssh docker host",
        _set(target=SshDockerTarget(host="", container_id="c")),
        "SSH Docker target locator has an empty host",
    ),
    ("checkpoint path", _checkpoint(archive_path=""), "checkpoint archive path is empty"),
    (
        "checkpoint digest case",
        _checkpoint(sha256="A" * 64),
        "checkpoint SHA-256 must be 64 lowercase hexadecimal characters",
    ),
    (
        "checkpoint digest length",
        _checkpoint(sha256="a" * 63),
        "checkpoint SHA-256 must be 64 lowercase hexadecimal characters",
    ),
    (
        "checkpoint digest alphabet",
        _checkpoint(sha256="g" * 64),
        "checkpoint SHA-256 must be 64 lowercase hexadecimal characters",
    ),
    (
        "checkpoint timestamp",
        _checkpoint(created_at=" "),
        "checkpoint timestamp (created_at) is empty",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"),
    [pytest.param(change, message, id=name) for name, change, message in REFUSALS],
)
def test_validation_refuses(change: Callable[[SessionRecord], None], message: str) -> None:
    record = session()
    change(record)
    with pytest.raises(InvalidInput) as raised:
        record.validate()
    assert message in str(raised.value)
    assert str(raised.value).startswith("session session-1: ")
    assert raised.value.session_id == "session-1"


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_worktree(), id="worktree"),
        pytest.param(
            _worktree(
                project="/srv/repo/.mj/clones/session-1/app",
                kind=ManagedCheckoutKind.CLONE,
                worktree_root="/srv/repo/.mj/clones/session-1",
                branch="main",
                target=SshWorktreeTarget(destination="builder"),
            ),
            id="clone",
        ),
        pytest.param(_worktree(project="/srv//repo/.mj/worktrees/session-1/./app/"), id="slashes"),
        pytest.param(_set(target=LocalBareTarget(worker_root="/w/session-1/")), id="bare"),
        pytest.param(_set(target=SshBareTarget(host="h", workspace="w/session-1")), id="ssh-bare"),
        pytest.param(_set(target=AwsEc2Target(instance_id="i-1")), id="aws"),
        pytest.param(_set(target=None, resource_allocation=None, checkpoint=None), id="minimal"),
        pytest.param(_set(project_directory="/srv/p", additional_mounts=[]), id="project"),
        pytest.param(_checkpoint(sha256="0123456789abcdef" * 4), id="digest"),
    ],
)
def test_validation_accepts(change: Callable[[SessionRecord], None]) -> None:
    record = session()
    change(record)
    record.validate()


def test_state_validation_requires_the_key_to_be_the_id() -> None:
    State(sessions={"session-1": session(), "session-2": session("session-2")}).validate()
    with pytest.raises(InvalidInput) as raised:
        State(sessions={"other": session()}).validate()
    assert 'session map key "other" does not match record id "session-1"' in str(raised.value)
    assert raised.value.session_id == "session-1"


def test_state_validation_reports_the_failing_record() -> None:
    broken = session("session-2")
    broken.title = ""
    with pytest.raises(InvalidInput, match="session session-2: empty title"):
        State(sessions={"session-1": session(), "session-2": broken}).validate()


def test_state_round_trips_and_leaves_out_no_sessions() -> None:
    state = State(sessions={"session-1": session()})
    data = encode(state)
    assert data == b'{"sessions":{"session-1":' + FIXTURE_BYTES + b"}}"
    assert decode_json(data, State) == state
    assert encode(State()) == b"{}"


# --- property: canonical serde bytes survive decode and re-encode ------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
U64S = st.integers(min_value=0, max_value=2**64 - 1)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
JSON_OBJECTS = st.dictionaries(TEXT, JSON_VALUES, max_size=4)

ALWAYS: Callable[[Any], bool] = lambda _: False  # noqa: E731
IF_NONE: Callable[[Any], bool] = lambda value: value is None  # noqa: E731
IF_EMPTY: Callable[[Any], bool] = lambda value: not value  # noqa: E731


def obj(
    *fields: tuple[str, st.SearchStrategy[Any], Callable[[Any], bool]],
) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object with ``fields`` in order, each left out when its skip rule says so."""
    return st.tuples(*(strategy for _, strategy, _ in fields)).map(
        lambda values: {
            name: value
            for (name, _, skip), value in zip(fields, values, strict=True)
            if not skip(value)
        }
    )


def tagged(
    tag_field: str, tag: str, *fields: tuple[str, st.SearchStrategy[Any], Callable[[Any], bool]]
) -> st.SearchStrategy[dict[str, Any]]:
    return obj((tag_field, st.just(tag), ALWAYS), *fields)


def opt(strategy: st.SearchStrategy[Any]) -> tuple[st.SearchStrategy[Any], Callable[[Any], bool]]:
    return st.none() | strategy, IF_NONE


def field(
    name: str, strategy: st.SearchStrategy[Any], skip: Callable[[Any], bool] = ALWAYS
) -> tuple[str, st.SearchStrategy[Any], Callable[[Any], bool]]:
    return (name, strategy, skip)


def optional(
    name: str, strategy: st.SearchStrategy[Any]
) -> tuple[str, st.SearchStrategy[Any], Callable[[Any], bool]]:
    return (name, *opt(strategy))


WORKSPACE_STORAGE = (
    tagged("kind", "container-layer")
    | tagged("kind", "volume", field("name", TEXT))
    | tagged(
        "kind",
        "host-path",
        field("path", TEXT),
        field("helper", st.lists(TEXT, max_size=2)),
        field("resource", TEXT),
    )
)
TARGETS = st.one_of(
    tagged("kind", "local-bare", field("worker_root", TEXT)),
    tagged(
        "kind",
        "local-podman",
        field("container_id", TEXT),
        field("workspace_storage", WORKSPACE_STORAGE),
        optional("borrowed_from", TEXT),
    ),
    tagged("kind", "local-docker", field("container_id", TEXT), optional("borrowed_from", TEXT)),
    tagged("kind", "apple-container", field("container_id", TEXT), optional("borrowed_from", TEXT)),
    tagged("kind", "aws-ec2", field("instance_id", TEXT), optional("address", TEXT)),
    tagged(
        "kind",
        "ssh-bare",
        field("host", TEXT),
        field("workspace", TEXT),
        optional("worker_id", TEXT),
    ),
    tagged(
        "kind",
        "ssh-podman",
        field("host", TEXT),
        field("container_id", TEXT),
        field("workspace_storage", WORKSPACE_STORAGE),
        optional("borrowed_from", TEXT),
    ),
    tagged(
        "kind",
        "ssh-docker",
        field("host", TEXT),
        field("container_id", TEXT),
        optional("borrowed_from", TEXT),
    ),
)
MANAGED_WORKTREES = obj(
    field("kind", st.sampled_from(["worktree", "clone"]), lambda kind: kind == "worktree"),
    field("source_project_directory", TEXT),
    field("source_repository", TEXT),
    field("worktree_root", TEXT),
    field("branch", TEXT),
    field(
        "target",
        tagged("kind", "local")
        | tagged(
            "kind",
            "ssh",
            field("destination", TEXT),
            field("ssh_args", st.lists(TEXT, max_size=2), IF_EMPTY),
        ),
    ),
    optional("base_commit", TEXT),
)
PUBLICATIONS = obj(
    field("checkpoint_sha256", TEXT),
    field("state", st.sampled_from(["published", "unpublished", "unknown"])),
    field("dirty", st.booleans()),
    field("stashed", st.booleans()),
    field("saved_commits", st.lists(TEXT, max_size=2)),
    field("destinations", st.lists(TEXT, max_size=2)),
    field("checked_at", TEXT),
    field("reason", st.none() | TEXT),
)
POLICIES = st.one_of(
    tagged("mode", "native"),
    tagged("mode", "all_models"),
    tagged("mode", "single_model", field("model", TEXT), field("effort", st.none() | TEXT)),
    tagged("mode", "none"),
)
ALLOCATIONS = tagged(
    "kind", "container", field("cpus", U64S), field("memory_bytes", U64S)
) | tagged(
    "kind",
    "aws-ec2",
    field("instance_type", TEXT),
    field("vcpus", U64S),
    field("memory_bytes", U64S),
)
MOUNTS = obj(
    field("source", TEXT),
    field("destination", TEXT),
    field("access", st.sampled_from(["ro", "cow", "rw"])),
)
BUILD_CACHES = obj(
    field("host", TEXT),
    field("directory", TEXT),
    optional("max_size", TEXT),
    optional("target_root", TEXT),
)
CONNECTIONS = st.one_of(
    tagged("kind", "local"),
    tagged("kind", "ssh", field("ssh", JSON_OBJECTS)),
    tagged(
        "kind",
        "aws",
        field("profile", TEXT),
        field("region", TEXT),
        field("ssh_user", TEXT),
        field("identity_file", st.none() | TEXT),
        field("ssh_args", st.lists(TEXT, max_size=2)),
    ),
)
RUNTIMES = obj(
    field("kind", TEXT),
    field("connection", CONNECTIONS),
    field("execution_policy", st.sampled_from(["configured_approvals", "unconstrained"])),
    field(
        "environment",
        st.dictionaries(TEXT, TEXT, max_size=3).map(lambda env: dict(sorted(env.items()))),
    ),
)
CHECKPOINTS = obj(
    field("archive_path", TEXT),
    field("sha256", TEXT),
    field("created_at", TEXT),
    field("event_frontier", U64S),
)
RECORDS = obj(
    field("id", TEXT),
    field("workspace_id", TEXT),
    field("title", TEXT),
    field("harness_kind", st.sampled_from([kind.value for kind in HarnessKind])),
    field("last_profile", TEXT),
    field("bundle_id", TEXT),
    optional("project", JSON_OBJECTS),
    optional("project_directory", TEXT),
    optional("managed_worktree", MANAGED_WORKTREES),
    optional("create_managed_worktree", st.booleans()),
    optional("launch_base", TEXT),
    optional("launch_branch", TEXT),
    optional("checkout", JSON_OBJECTS),
    optional("publication", PUBLICATIONS),
    field("subagents", st.none() | POLICIES),
    optional("review", JSON_OBJECTS),
    field("target_template_id", TEXT),
    optional("resource_allocation", ALLOCATIONS),
    field("additional_mounts", st.lists(MOUNTS, max_size=2), IF_EMPTY),
    optional("container_cpus", TEXT),
    optional("container_memory", TEXT),
    optional("container_workspace", TEXT),
    optional("build_cache", BUILD_CACHES),
    field("state", st.sampled_from([state.value for state in SessionState])),
    field("archived", st.booleans(), lambda archived: not archived),
    optional("target", TARGETS),
    optional("target_runtime", RUNTIMES),
    optional("native_session_id", TEXT),
    optional("acp_session_title", TEXT),
    optional("session_title_override", TEXT),
    field("created_at", TEXT),
    field("updated_at", TEXT),
    field("viewed_through_event_ordinal", U64S),
    field("draft_input", TEXT, IF_EMPTY),
    optional("last_error", TEXT),
    optional("last_checkpoint_error", TEXT),
    optional("checkpoint", CHECKPOINTS),
)


@settings(max_examples=200, deadline=None)
@given(RECORDS)
def test_canonical_serde_bytes_survive_decode_and_encode(value: dict[str, Any]) -> None:
    data = msgspec.json.encode(value)
    record = _record(data)
    assert encode(record) == data
    assert _record(encode(record)) == record


def test_a_newer_origins_start_options_are_read_and_kept() -> None:
    # A record written by the origin after 193f015 carries no_mailbox: it is read (not
    # refused as an unknown field) and written back as it was; false is left out.
    plain = encode(example_session())
    newer = plain.replace(b',"target_template_id"', b',"no_mailbox":true,"target_template_id"')
    record = decode_json(newer, SessionRecord)
    assert (record.no_mailbox, record.no_project_memory) == (True, False)
    assert encode(record) == newer
    assert decode_json(plain, SessionRecord).no_mailbox is False
    assert b"no_mailbox" not in plain
