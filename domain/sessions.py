"""Session records: the durable description of one logical session, and its validation.

Mirrors ``SessionState``, ``SessionRecord``, ``CheckpointMetadata`` and their nested types
from the origin's ``mj-core/src/state.rs`` (commit bbdef44b, the seed era), field for
field and in declaration order, so ``encode`` writes the bytes serde_json writes.

Guarantees:

* ``decode_json(encode(record), SessionRecord) == record`` for every record, and
  ``encode(decode_json(b, SessionRecord)) == b`` for every ``b`` in canonical serde form.
* Unknown keys are refused exactly where the origin says ``deny_unknown_fields``.
* Legacy spellings are read and never written: the state ``"archived"`` (now
  ``stopped``), the keys ``mjolnir_subagents`` and ``detached_after_event_ordinal``, a
  boolean sub-agent policy, and the ``read_only`` flag of an additional mount.
* :meth:`SessionRecord.validate` raises :class:`~relaystore.domain.errors.InvalidInput` naming the
  session and the field, with the origin's rules.

Decisions where the origin is not fully readable here:

* ``checkout`` (``remote_git::ExactCheckout``) and ``SshConnection`` (inside
  ``target_runtime.connection``) are carried as opaque JSON (:data:`~relaystore.domain.wire.JSON`):
  objects keep the key order they were read in, so they round-trip unchanged.
* ``AdditionalMount`` has the seed-era shape ``{source, destination, access}`` with
  ``access`` one of ``ro``/``cow``/``rw``, always written. A legacy ``read_only`` key is
  accepted when reading (``true`` is ``ro``, ``false`` is ``cow``), as the origin's design
  note describes.
"""

from __future__ import annotations

import enum
import json
from typing import Annotated, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from .digests import is_relay_digest
from .errors import InvalidInput
from .ids import validate_id
from .runtime import HarnessKind
from .text_formats import is_rfc3339_date_time
from .wire import JSON, Wire, emitted

__all__ = [
    "DEFAULT_WORKSPACE_ID",
    "AdditionalMount",
    "AllModelsSubagents",
    "AppleContainerTarget",
    "AwsConnection",
    "AwsEc2Allocation",
    "AwsEc2Target",
    "CheckpointMetadata",
    "ContainerAllocation",
    "ContainerLayerStorage",
    "ExecutionPolicy",
    "HostPathStorage",
    "LocalBareTarget",
    "LocalConnection",
    "LocalDockerTarget",
    "LocalPodmanTarget",
    "LocalWorktreeTarget",
    "ManagedCheckoutKind",
    "ManagedWorktree",
    "ManagedWorktreeTarget",
    "MountAccess",
    "NativeSubagents",
    "NoSubagents",
    "PodmanWorkspaceLocator",
    "PublicationAssessment",
    "PublicationState",
    "SessionBuildCache",
    "SessionRecord",
    "SessionResourceAllocation",
    "SessionState",
    "SingleModelSubagents",
    "SshBareTarget",
    "SshConnection",
    "SshDockerTarget",
    "SshPodmanTarget",
    "SshWorktreeTarget",
    "State",
    "SubagentPolicy",
    "TargetConnection",
    "TargetLocator",
    "TargetRuntimeSettings",
    "VolumeStorage",
    "validate_id",
    "validate_timestamp",
]

DEFAULT_WORKSPACE_ID = "default"
"""The workspace a record belongs to when it names none (wire constant)."""

U64 = Annotated[int, msgspec.Meta(ge=0)]
"""A Rust ``u64``: decoding refuses negatives (msgspec cannot bound an int above int64, so
values past 2**64-1 are not refused; the origin never writes them)."""


def _quoted(value: str) -> str:
    """``value`` quoted the way the origin's ``{:?}`` shows a string in a message."""
    return json.dumps(value, ensure_ascii=False)


def _is_absolute(path: str) -> bool:
    return path.startswith("/")


def _has_parent(path: str) -> bool:
    return ".." in path.split("/")


def _components(path: str) -> tuple[str, ...]:
    """Rust's ``Path::components`` of a Unix path, so paths compare as the origin compares them.

    A root is ``"/"`` (however many slashes), empty and interior ``.`` parts vanish, and a
    leading ``.`` of a relative path stays. ``"/mnt//c/"`` and ``"/mnt/c"`` are equal.
    """
    raw = path.split("/")
    parts = tuple(part for part in raw if part and part != ".")
    if path.startswith("/"):
        return ("/", *parts)
    if raw[0] == ".":
        return (".", *parts)
    return parts


def _path(components: tuple[str, ...]) -> str:
    if components[:1] == ("/",):
        return "/" + "/".join(components[1:])
    return "/".join(components)


def _ends_with(path: str, name: str) -> bool:
    parts = _components(path)
    return bool(parts) and parts[-1] == name


# --- SessionState --------------------------------------------------------------------------


class SessionState(enum.Enum):
    """Lifecycle state of a session (kebab-case on the wire).

    Reading the legacy spelling ``"archived"`` gives :attr:`STOPPED`; it is never written.
    """

    PROVISIONING = "provisioning"
    STARTUP_CLEANUP = "startup-cleanup"
    """Startup failed; teardown owns the target until its termination is confirmed."""
    RUNNING = "running"
    DISCONNECTED = "disconnected"
    CHECKPOINTING = "checkpointing"
    CLOSING = "closing"
    DESTROYING = "destroying"
    STOPPED = "stopped"
    PARKED = "parked"
    LOST = "lost"
    ERROR = "error"
    DESTROYED_WITH_DATA_LOSS = "destroyed-with-data-loss"

    @classmethod
    def _missing_(cls, value: object) -> SessionState | None:
        # msgspec and SessionState(...) both consult this for values not in the table.
        if value == "archived":
            return cls.STOPPED
        return None

    @property
    def is_lifecycle_operation(self) -> bool:
        """Checkpointing, closing or destroying: a second lifecycle operation must wait."""
        return self in _LIFECYCLE_OPERATIONS

    @property
    def is_active(self) -> bool:
        """Still on the dashboard: every state but stopped, lost and destroyed-with-data-loss."""
        return self in _ACTIVE

    @property
    def has_live_worker(self) -> bool:
        """A worker process tree may exist on the target (being started, running or torn down)."""
        return self in _LIVE_WORKER


_LIFECYCLE_OPERATIONS = frozenset(
    {SessionState.CHECKPOINTING, SessionState.CLOSING, SessionState.DESTROYING}
)
_LIVE_WORKER = frozenset(
    {
        SessionState.PROVISIONING,
        SessionState.STARTUP_CLEANUP,
        SessionState.RUNNING,
        SessionState.DISCONNECTED,
        SessionState.CHECKPOINTING,
        SessionState.CLOSING,
        SessionState.DESTROYING,
    }
)
_ACTIVE = _LIVE_WORKER | {SessionState.PARKED, SessionState.ERROR}


# --- checkpoint ----------------------------------------------------------------------------


class CheckpointMetadata(Wire, kw_only=True, forbid_unknown_fields=True):
    """The verified archive a session can resume from."""

    archive_path: str
    sha256: str
    """Lowercase hex SHA-256 of the archive."""
    created_at: str
    event_frontier: U64

    def validate(self) -> None:
        """Raise :class:`InvalidInput` unless the path, digest and timestamp are usable."""
        if not self.archive_path:
            raise InvalidInput("checkpoint archive path is empty; record where the archive lives")
        if not is_relay_digest(self.sha256):
            raise InvalidInput(
                f"checkpoint SHA-256 must be 64 lowercase hexadecimal characters, not {_quoted(self.sha256)}"
            )
        if not self.created_at.strip():
            raise InvalidInput(
                "checkpoint timestamp (created_at) is empty; record when it was made"
            )
        validate_timestamp("checkpoint.created_at", self.created_at)


def validate_timestamp(name: str, value: str) -> None:
    """Raise :class:`InvalidInput` naming ``name`` unless ``value`` is an RFC 3339
    date-time (the origin writes chrono's ``to_rfc3339``, for example
    ``2026-08-12T00:00:00.123456789+00:00``): every timestamp of a record or message."""
    if not is_rfc3339_date_time(value):
        raise InvalidInput(
            f"timestamp ({name}) {_quoted(value)} is not an RFC 3339 date-time; "
            "write one such as 2026-08-12T00:00:00Z"
        )


# --- managed worktree ----------------------------------------------------------------------


class ManagedCheckoutKind(enum.Enum):
    """How a session owns its checkout: a linked worktree (old records) or a clone."""

    WORKTREE = "worktree"
    CLONE = "clone"


class LocalWorktreeTarget(Wire, kw_only=True, tag_field="kind", tag="local"):
    """The managed checkout lives on this machine."""


class SshWorktreeTarget(Wire, kw_only=True, tag_field="kind", tag="ssh"):
    """The managed checkout lives on an SSH destination."""

    destination: str
    ssh_args: list[str] = msgspec.field(default_factory=list)


ManagedWorktreeTarget: TypeAlias = LocalWorktreeTarget | SshWorktreeTarget


class ManagedWorktree(Wire, kw_only=True, forbid_unknown_fields=True):
    """A Git checkout created and owned by the store's client for one session.

    ``kind`` is written only when it is ``clone``.
    """

    kind: ManagedCheckoutKind = ManagedCheckoutKind.WORKTREE
    source_project_directory: str
    source_repository: str
    worktree_root: str
    branch: str
    target: ManagedWorktreeTarget
    base_commit: str | None = None

    def validate(self, session_id: str, project_directory: str | None) -> None:
        """Raise :class:`InvalidInput` unless the checkout is the session-owned one."""
        for label, path in (
            ("source project directory", self.source_project_directory),
            ("source repository", self.source_repository),
            ("worktree root", self.worktree_root),
        ):
            if not _is_absolute(path) or _has_parent(path):
                raise InvalidInput(
                    f"managed worktree {label} must be an absolute safe path, not {_quoted(path)}"
                )
        source = _components(self.source_project_directory)
        repository = _components(self.source_repository)
        if source[: len(repository)] != repository:
            raise InvalidInput(
                "managed worktree source directory is outside its repository; "
                "source_project_directory must lie under source_repository"
            )
        folder = "worktrees" if self.kind is ManagedCheckoutKind.WORKTREE else "clones"
        expected_root = (*repository, ".mj", folder, session_id)
        if _components(self.worktree_root) != expected_root:
            raise InvalidInput(
                f"managed worktree root does not match the session-owned path {_quoted(_path(expected_root))}"
            )
        if self.kind is ManagedCheckoutKind.WORKTREE and self.branch != f"mj/{session_id}":
            raise InvalidInput(
                f"managed worktree branch does not match the session id; expected {_quoted('mj/' + session_id)}"
            )
        if self.kind is ManagedCheckoutKind.CLONE and not self.branch.strip():
            raise InvalidInput("managed clone has no starting branch")
        expected_project = (*_components(self.worktree_root), *source[len(repository) :])
        if project_directory is None or _components(project_directory) != expected_project:
            raise InvalidInput(
                "session project directory does not match its managed worktree; "
                f"expected {_quoted(_path(expected_project))}"
            )
        if isinstance(self.target, SshWorktreeTarget) and not self.target.destination.strip():
            raise InvalidInput("managed SSH worktree has an empty destination")


# --- resources, mounts, build cache --------------------------------------------------------


class ContainerAllocation(Wire, kw_only=True, tag_field="kind", tag="container"):
    """CPU and memory granted to a container session."""

    cpus: U64
    memory_bytes: U64


class AwsEc2Allocation(Wire, kw_only=True, tag_field="kind", tag="aws-ec2"):
    """The EC2 instance type granted to a session, with its CPU and memory."""

    instance_type: str
    vcpus: U64
    memory_bytes: U64


SessionResourceAllocation: TypeAlias = ContainerAllocation | AwsEc2Allocation


def _validate_allocation(allocation: SessionResourceAllocation) -> None:
    if isinstance(allocation, ContainerAllocation):
        if allocation.cpus == 0 or allocation.memory_bytes == 0:
            raise InvalidInput(
                "container resource allocation must have non-zero CPU and memory "
                f"(cpus={allocation.cpus}, memory_bytes={allocation.memory_bytes})"
            )
    elif (
        not allocation.instance_type.strip()
        or allocation.vcpus == 0
        or allocation.memory_bytes == 0
    ):
        raise InvalidInput(
            "EC2 resource allocation must have an instance type, CPU, and memory "
            f"(instance_type={_quoted(allocation.instance_type)}, vcpus={allocation.vcpus}, "
            f"memory_bytes={allocation.memory_bytes})"
        )


class MountAccess(enum.Enum):
    """How an additional mount is attached: read-only, copy-on-write overlay, read-write."""

    RO = "ro"
    COW = "cow"
    RW = "rw"


class AdditionalMount(Wire, kw_only=True, forbid_unknown_fields=True):
    """A host directory made available to one session at ``destination``.

    ``access`` is always written. The legacy key ``read_only`` is read, never written:
    alone it decides the access (``true`` is ``ro``, ``false`` is ``cow``); next to an
    ``access`` it must agree with it.
    """

    source: str
    destination: str
    access: MountAccess = emitted(MountAccess.COW)
    legacy_read_only: bool | UnsetType = msgspec.field(default=UNSET, name="read_only")
    """Read-only input for the legacy key; always ``UNSET`` once constructed."""

    def __post_init__(self) -> None:
        legacy = self.legacy_read_only
        if legacy is UNSET:
            return
        self.legacy_read_only = UNSET
        implied = MountAccess.RO if legacy else MountAccess.COW
        if self.access is MountAccess.COW:
            self.access = implied
        elif self.access is not implied:
            raise ValueError(
                f"mount access {self.access.value!r} contradicts legacy read_only={str(legacy).lower()}"
            )


def _validate_mounts(mounts: list[AdditionalMount]) -> None:
    destinations: set[tuple[str, ...]] = set()
    for mount in mounts:
        if not _is_absolute(mount.source):
            raise InvalidInput(
                f"additional mount source must be an absolute directory path, not {_quoted(mount.source)}"
            )
        if not _is_absolute(mount.destination) or _has_parent(mount.destination):
            raise InvalidInput(
                "additional mount destination must be a safe absolute container path, "
                f"not {_quoted(mount.destination)}"
            )
        destination = _components(mount.destination)
        if destination in destinations:
            raise InvalidInput(
                f"additional mount destination {_quoted(mount.destination)} is configured more than once"
            )
        destinations.add(destination)


class SessionBuildCache(Wire, kw_only=True, forbid_unknown_fields=True):
    """The build cache a container session was provisioned with (decided once)."""

    host: str
    directory: str
    max_size: str | None = None
    target_root: str | None = None


# --- target locator ------------------------------------------------------------------------


class ContainerLayerStorage(Wire, kw_only=True, tag_field="kind", tag="container-layer"):
    """The Podman workspace lives in the container's own layer (the default)."""


class VolumeStorage(Wire, kw_only=True, tag_field="kind", tag="volume"):
    """The Podman workspace lives in a named volume."""

    name: str


class HostPathStorage(Wire, kw_only=True, tag_field="kind", tag="host-path"):
    """The Podman workspace lives in a host directory, prepared by a helper command."""

    path: str
    helper: list[str]
    resource: str


PodmanWorkspaceLocator: TypeAlias = ContainerLayerStorage | VolumeStorage | HostPathStorage


class LocalBareTarget(Wire, kw_only=True, tag_field="kind", tag="local-bare"):
    """A worker on this machine, without a container."""

    worker_root: str


class LocalPodmanTarget(Wire, kw_only=True, tag_field="kind", tag="local-podman"):
    """A local Podman container; ``borrowed_from`` names the owner when it is borrowed."""

    container_id: str
    workspace_storage: PodmanWorkspaceLocator = msgspec.field(default_factory=ContainerLayerStorage)
    borrowed_from: str | None = None


class LocalDockerTarget(Wire, kw_only=True, tag_field="kind", tag="local-docker"):
    """A local Docker container."""

    container_id: str
    borrowed_from: str | None = None


class AppleContainerTarget(Wire, kw_only=True, tag_field="kind", tag="apple-container"):
    """An Apple container."""

    container_id: str
    borrowed_from: str | None = None


class AwsEc2Target(Wire, kw_only=True, tag_field="kind", tag="aws-ec2"):
    """An EC2 instance."""

    instance_id: str
    address: str | None = None


class SshBareTarget(Wire, kw_only=True, tag_field="kind", tag="ssh-bare"):
    """A worker on an SSH host, without a container."""

    host: str
    workspace: str
    worker_id: str | None = None


class SshPodmanTarget(Wire, kw_only=True, tag_field="kind", tag="ssh-podman"):
    """A Podman container on an SSH host."""

    host: str
    container_id: str
    workspace_storage: PodmanWorkspaceLocator = msgspec.field(default_factory=ContainerLayerStorage)
    borrowed_from: str | None = None


class SshDockerTarget(Wire, kw_only=True, tag_field="kind", tag="ssh-docker"):
    """A Docker container on an SSH host."""

    host: str
    container_id: str
    borrowed_from: str | None = None


TargetLocator: TypeAlias = (
    LocalBareTarget
    | LocalPodmanTarget
    | LocalDockerTarget
    | AppleContainerTarget
    | AwsEc2Target
    | SshBareTarget
    | SshPodmanTarget
    | SshDockerTarget
)

_CONTAINER_TARGETS = (
    LocalPodmanTarget,
    LocalDockerTarget,
    AppleContainerTarget,
    SshPodmanTarget,
    SshDockerTarget,
)


def _validate_target(target: TargetLocator, session_id: str) -> None:
    if isinstance(target, LocalBareTarget):
        root = target.worker_root
        if not _is_absolute(root) or _has_parent(root) or not _ends_with(root, session_id):
            raise InvalidInput(
                "local bare worker root must be an absolute safe path ending in the session id, "
                f"not {_quoted(root)}"
            )
        return
    if isinstance(target, _CONTAINER_TARGETS) and not target.container_id.strip():
        raise InvalidInput("target locator has an empty container id")
    if isinstance(target, AwsEc2Target) and not target.instance_id.strip():
        raise InvalidInput("target locator has an empty AWS instance id")
    if isinstance(target, SshBareTarget):
        if not target.host.strip():
            raise InvalidInput("bare SSH target locator has an empty host")
        workspace = target.workspace
        if not workspace or _has_parent(workspace) or not _ends_with(workspace, session_id):
            raise InvalidInput(
                "bare SSH target locator must be a safe path ending in the session id, "
                f"not {_quoted(workspace)}"
            )
    if isinstance(target, SshPodmanTarget) and not target.host.strip():
        raise InvalidInput("SSH Podman target locator has an empty host")
    if isinstance(target, SshDockerTarget) and not target.host.strip():
        raise InvalidInput("SSH Docker target locator has an empty host")


# --- target runtime settings ---------------------------------------------------------------


class ExecutionPolicy(enum.Enum):
    """The target-level execution policy applied whatever the harness."""

    CONFIGURED_APPROVALS = "configured_approvals"
    UNCONSTRAINED = "unconstrained"


SshConnection: TypeAlias = JSON
"""The origin's ``config::SshConnection``, carried as opaque JSON (shape not read here)."""


class LocalConnection(Wire, kw_only=True, tag_field="kind", tag="local"):
    """The target is reached locally."""


class SshTargetConnection(Wire, kw_only=True, tag_field="kind", tag="ssh"):
    """The target is reached over SSH; ``ssh`` is an opaque :data:`SshConnection`."""

    ssh: SshConnection


class AwsConnection(Wire, kw_only=True, tag_field="kind", tag="aws"):
    """The target is an AWS instance reached over SSH."""

    profile: str
    region: str
    ssh_user: str
    identity_file: str | None = emitted(None)
    ssh_args: list[str]


TargetConnection: TypeAlias = LocalConnection | SshTargetConnection | AwsConnection


class TargetRuntimeSettings(Wire, kw_only=True):
    """Connection and worker settings captured when the session's target was selected.

    ``environment`` is a sorted map on the wire (a Rust ``BTreeMap``); it is kept sorted.
    """

    kind: str
    connection: TargetConnection
    execution_policy: ExecutionPolicy
    environment: dict[str, str]

    def __post_init__(self) -> None:
        self.environment = dict(sorted(self.environment.items()))


# --- publication and sub-agents ------------------------------------------------------------


class PublicationState(enum.Enum):
    """Whether every saved Git change has a verified durable copy elsewhere."""

    PUBLISHED = "published"
    UNPUBLISHED = "unpublished"
    UNKNOWN = "unknown"


class PublicationAssessment(Wire, kw_only=True):
    """Publication evidence for one exact checkpoint (a newer checkpoint invalidates it)."""

    checkpoint_sha256: str
    state: PublicationState
    dirty: bool
    stashed: bool
    saved_commits: list[str]
    destinations: list[str]
    checked_at: str
    reason: str | None = emitted(None)


class NativeSubagents(
    Wire, kw_only=True, tag_field="mode", tag="native", forbid_unknown_fields=True
):
    """The harness's own delegation (the default for historical records)."""


class AllModelsSubagents(
    Wire, kw_only=True, tag_field="mode", tag="all_models", forbid_unknown_fields=True
):
    """Managed sub-agents on any eligible model."""


class SingleModelSubagents(
    Wire, kw_only=True, tag_field="mode", tag="single_model", forbid_unknown_fields=True
):
    """Managed sub-agents on one model chosen by the user."""

    model: str
    effort: str | None = emitted(None)


class NoSubagents(Wire, kw_only=True, tag_field="mode", tag="none", forbid_unknown_fields=True):
    """No delegation at all."""


SubagentPolicy: TypeAlias = (
    NativeSubagents | AllModelsSubagents | SingleModelSubagents | NoSubagents
)


def _policy(value: SubagentPolicy | bool | None) -> SubagentPolicy | None:
    # A stored boolean is the policy's predecessor: true meant managed sub-agents.
    if value is True:
        return AllModelsSubagents()
    if value is False:
        return NativeSubagents()
    return value


# --- ids -----------------------------------------------------------------------------------

# --- the record ----------------------------------------------------------------------------


class SessionRecord(Wire, kw_only=True, forbid_unknown_fields=True):
    """Everything durable about one logical session, in the origin's wire order.

    Legacy keys are read into the ``legacy_*`` fields and folded into their successors by
    ``__post_init__`` (which runs on construction and on decode), so those fields are
    always ``UNSET`` afterwards and never written. A legacy key next to a non-default
    successor is refused as a duplicate; next to a default successor (``null``/``0``) the
    legacy value wins, where serde would also call that a duplicate.
    """

    id: str
    workspace_id: str = emitted(DEFAULT_WORKSPACE_ID)
    title: str
    harness_kind: HarnessKind
    last_profile: str
    bundle_id: str
    project: JSON | None = None
    """The accepted project bundle (the origin's ``ProjectBundleSnapshot``), opaque JSON."""
    project_directory: str | None = None
    managed_worktree: ManagedWorktree | None = None
    create_managed_worktree: bool | None = None
    launch_base: str | None = None
    launch_branch: str | None = None
    checkout: JSON | None = None
    """The origin's ``remote_git::ExactCheckout``, carried as opaque JSON."""
    publication: PublicationAssessment | None = None
    subagents: SubagentPolicy | bool | None = emitted(None)
    """Always written (``null`` when unset); a stored boolean is read as a policy."""
    review: JSON | None = None
    """The turn review chosen when the session was created (the origin's
    ``SessionReview``), opaque JSON; None follows the global setting."""
    no_mailbox: bool = False
    """The session was started without a durable mailbox (a newer origin's start option;
    written only when true)."""
    no_project_memory: bool = False
    """The session was started without project memory (likewise)."""
    target_template_id: str
    resource_allocation: SessionResourceAllocation | None = None
    additional_mounts: list[AdditionalMount] = msgspec.field(default_factory=list)
    container_cpus: str | None = None
    container_memory: str | None = None
    container_workspace: str | None = None
    build_cache: SessionBuildCache | None = None
    state: SessionState
    archived: bool = False
    target: TargetLocator | None = None
    target_runtime: TargetRuntimeSettings | None = None
    native_session_id: str | None = None
    acp_session_title: str | None = None
    session_title_override: str | None = None
    created_at: str
    updated_at: str
    viewed_through_event_ordinal: U64 = emitted(0)
    draft_input: str = ""
    last_error: str | None = None
    last_checkpoint_error: str | None = None
    checkpoint: CheckpointMetadata | None = None
    legacy_subagents: SubagentPolicy | bool | UnsetType | None = msgspec.field(
        default=UNSET, name="mjolnir_subagents"
    )
    """Input only: the old name of ``subagents``."""
    legacy_detached_after_event_ordinal: U64 | UnsetType = msgspec.field(
        default=UNSET, name="detached_after_event_ordinal"
    )
    """Input only: the old name of ``viewed_through_event_ordinal``."""
    legacy_expected_runtime_identity: str | UnsetType | None = msgspec.field(
        default=UNSET, name="expected_runtime_identity"
    )
    """Input only, and dropped: the runtime constraint the origin removed (its schema step
    66; the receipts stay readable in the feed). A record that still carries it reads."""

    def __post_init__(self) -> None:
        self.legacy_expected_runtime_identity = UNSET
        if self.legacy_subagents is not UNSET:
            if self.subagents is not None:
                raise ValueError("duplicate field `subagents` (also given as `mjolnir_subagents`)")
            self.subagents = self.legacy_subagents
            self.legacy_subagents = UNSET
        self.subagents = _policy(self.subagents)
        if self.legacy_detached_after_event_ordinal is not UNSET:
            if self.viewed_through_event_ordinal != 0:
                raise ValueError(
                    "duplicate field `viewed_through_event_ordinal` "
                    "(also given as `detached_after_event_ordinal`)"
                )
            self.viewed_through_event_ordinal = self.legacy_detached_after_event_ordinal
            self.legacy_detached_after_event_ordinal = UNSET

    @property
    def subagent_policy(self) -> SubagentPolicy | None:
        """``subagents`` typed without the legacy boolean (always normalised away)."""
        return _policy(self.subagents)

    def validate(self, map_key: str | None = None) -> None:
        """Raise :class:`InvalidInput` unless the record is one the origin would store.

        ``map_key`` is the key the record is filed under in a :class:`State`; it must equal
        the id. Every refusal carries ``session_id`` (when the id itself is valid) and
        names the offending field.
        """
        validate_id("session", self.id)
        try:
            self._validate_fields(map_key)
        except InvalidInput as error:
            raise error.located(session_id=self.id) from None

    def _validate_fields(self, map_key: str | None) -> None:
        if map_key is not None and map_key != self.id:
            raise InvalidInput(
                f"session map key {_quoted(map_key)} does not match record id {_quoted(self.id)}"
            )
        validate_id("workspace", self.workspace_id)
        validate_id("profile", self.last_profile)
        validate_id("bundle", self.bundle_id)
        directory = self.project_directory
        if directory is not None and (not _is_absolute(directory) or _has_parent(directory)):
            raise InvalidInput(
                f"unsafe project directory {_quoted(directory)}; "
                "project_directory must be absolute and free of '..'"
            )
        if self.managed_worktree is not None:
            self.managed_worktree.validate(self.id, self.project_directory)
        validate_id("target template", self.target_template_id)
        if self.resource_allocation is not None:
            _validate_allocation(self.resource_allocation)
        _validate_mounts(self.additional_mounts)
        if not self.title.strip():
            raise InvalidInput("empty title; give the session a non-blank title")
        for name, value in (
            ("acp_session_title", self.acp_session_title),
            ("session_title_override", self.session_title_override),
        ):
            if value is not None and not value.strip():
                raise InvalidInput(
                    f"empty display title ({name}); leave it out or make it non-blank"
                )
        for name, value in (("created_at", self.created_at), ("updated_at", self.updated_at)):
            if not value.strip():
                raise InvalidInput(f"empty timestamp ({name}); record an RFC 3339 time")
            validate_timestamp(name, value)
        if self.publication is not None:
            validate_timestamp("publication.checked_at", self.publication.checked_at)
        if self.target is not None:
            _validate_target(self.target, self.id)
        if self.checkpoint is not None:
            self.checkpoint.validate()


class State(Wire, kw_only=True):
    """The sessions a store holds, keyed by id (the part of the origin's state used here).

    Not ``forbid_unknown_fields``: the origin's state carries more (version, sub-agent
    relations, mount history) that relaystore does not model. ``sessions`` is written
    only when non-empty.
    """

    sessions: dict[str, SessionRecord] = msgspec.field(default_factory=dict)

    def validate(self) -> None:
        """Raise :class:`InvalidInput` unless every record is valid under its own id."""
        for key, record in self.sessions.items():
            record.validate(key)
