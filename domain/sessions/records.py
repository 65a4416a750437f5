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

The record's parts live beside it: :mod:`.session_provisioning` (checkout, resources,
mounts, build cache), :mod:`.session_targets` (where the worker runs) and
:mod:`.session_checks` (the path and timestamp rules). This module owns the record, its
lifecycle state, checkpoint, publication and sub-agent policy. Pure: no I/O; it must not
read or write a store.
"""

from __future__ import annotations

import enum
from typing import TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from ..digests import is_relay_digest
from ..errors import InvalidInput
from ..ids import validate_id
from ..runtime import HarnessKind
from ..wire import JSON, Wire, emitted
from .checks import U64, has_parent, is_absolute, quoted, validate_timestamp
from .provisioning import (
    AdditionalMount,
    ManagedWorktree,
    SessionBuildCache,
    SessionResourceAllocation,
    validate_allocation,
    validate_mounts,
)
from .targets import TargetLocator, TargetRuntimeSettings, validate_target

__all__ = [
    "DEFAULT_WORKSPACE_ID",
    "AllModelsSubagents",
    "CheckpointMetadata",
    "NativeSubagents",
    "NoSubagents",
    "PublicationAssessment",
    "PublicationState",
    "SessionRecord",
    "SessionState",
    "SingleModelSubagents",
    "State",
    "SubagentPolicy",
    "subagent_policy",
]

DEFAULT_WORKSPACE_ID = "default"
"""The workspace a record belongs to when it names none (wire constant)."""


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
                f"checkpoint SHA-256 must be 64 lowercase hexadecimal characters, not {quoted(self.sha256)}"
            )
        if not self.created_at.strip():
            raise InvalidInput(
                "checkpoint timestamp (created_at) is empty; record when it was made"
            )
        validate_timestamp("checkpoint.created_at", self.created_at)


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


def subagent_policy(value: SubagentPolicy | bool | None) -> SubagentPolicy | None:
    """A stored sub-agent choice as a policy: a boolean is the policy's predecessor
    (true meant managed sub-agents on any model, false the harness's own)."""
    if value is True:
        return AllModelsSubagents()
    if value is False:
        return NativeSubagents()
    return value


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
        self.subagents = subagent_policy(self.subagents)
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
        return subagent_policy(self.subagents)

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
                f"session map key {quoted(map_key)} does not match record id {quoted(self.id)}"
            )
        validate_id("workspace", self.workspace_id)
        validate_id("profile", self.last_profile)
        validate_id("bundle", self.bundle_id)
        directory = self.project_directory
        if directory is not None and (not is_absolute(directory) or has_parent(directory)):
            raise InvalidInput(
                f"unsafe project directory {quoted(directory)}; "
                "project_directory must be absolute and free of '..'"
            )
        if self.managed_worktree is not None:
            self.managed_worktree.validate(self.id, self.project_directory)
        validate_id("target template", self.target_template_id)
        if self.resource_allocation is not None:
            validate_allocation(self.resource_allocation)
        validate_mounts(self.additional_mounts)
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
            validate_target(self.target, self.id)
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
