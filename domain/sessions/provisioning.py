"""Session provisioning: what a session was given when it was set up.

Owns the managed checkout (:class:`ManagedWorktree`, a linked worktree or a clone), the
resources granted (:data:`SessionResourceAllocation`), the extra host directories
(:class:`AdditionalMount`, with the legacy ``read_only`` key read and never written) and the
build cache, each with the check :class:`~relaystore.domain.sessions.records.SessionRecord` runs on
it. Mirrors the origin's ``mj-core/src/state.rs`` field for field, like :mod:`.sessions`.

Pure: no I/O. It must not hold the record or its lifecycle state (:mod:`.sessions`), nor
where the worker runs (:mod:`.session_targets`).
"""

from __future__ import annotations

import enum
from typing import TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from ..errors import InvalidInput
from ..wire import Wire, emitted
from .checks import U64, has_parent, is_absolute, path_components, path_text, quoted

__all__ = [
    "AdditionalMount",
    "AwsEc2Allocation",
    "ContainerAllocation",
    "LocalWorktreeTarget",
    "ManagedCheckoutKind",
    "ManagedWorktree",
    "ManagedWorktreeTarget",
    "MountAccess",
    "SessionBuildCache",
    "SessionResourceAllocation",
    "SshWorktreeTarget",
    "validate_allocation",
    "validate_mounts",
]


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
            if not is_absolute(path) or has_parent(path):
                raise InvalidInput(
                    f"managed worktree {label} must be an absolute safe path, not {quoted(path)}"
                )
        source = path_components(self.source_project_directory)
        repository = path_components(self.source_repository)
        if source[: len(repository)] != repository:
            raise InvalidInput(
                "managed worktree source directory is outside its repository; "
                "source_project_directory must lie under source_repository"
            )
        folder = "worktrees" if self.kind is ManagedCheckoutKind.WORKTREE else "clones"
        expected_root = (*repository, ".mj", folder, session_id)
        if path_components(self.worktree_root) != expected_root:
            raise InvalidInput(
                f"managed worktree root does not match the session-owned path {quoted(path_text(expected_root))}"
            )
        if self.kind is ManagedCheckoutKind.WORKTREE and self.branch != f"mj/{session_id}":
            raise InvalidInput(
                f"managed worktree branch does not match the session id; expected {quoted('mj/' + session_id)}"
            )
        if self.kind is ManagedCheckoutKind.CLONE and not self.branch.strip():
            raise InvalidInput("managed clone has no starting branch")
        expected_project = (*path_components(self.worktree_root), *source[len(repository) :])
        if project_directory is None or path_components(project_directory) != expected_project:
            raise InvalidInput(
                "session project directory does not match its managed worktree; "
                f"expected {quoted(path_text(expected_project))}"
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


def validate_allocation(allocation: SessionResourceAllocation) -> None:
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
            f"(instance_type={quoted(allocation.instance_type)}, vcpus={allocation.vcpus}, "
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


def validate_mounts(mounts: list[AdditionalMount]) -> None:
    destinations: set[tuple[str, ...]] = set()
    for mount in mounts:
        if not is_absolute(mount.source):
            raise InvalidInput(
                f"additional mount source must be an absolute directory path, not {quoted(mount.source)}"
            )
        if not is_absolute(mount.destination) or has_parent(mount.destination):
            raise InvalidInput(
                "additional mount destination must be a safe absolute container path, "
                f"not {quoted(mount.destination)}"
            )
        destination = path_components(mount.destination)
        if destination in destinations:
            raise InvalidInput(
                f"additional mount destination {quoted(mount.destination)} is configured more than once"
            )
        destinations.add(destination)


class SessionBuildCache(Wire, kw_only=True, forbid_unknown_fields=True):
    """The build cache a container session was provisioned with (decided once)."""

    host: str
    directory: str
    max_size: str | None = None
    target_root: str | None = None
