"""Session targets: where a session's worker runs and how it is reached.

Owns the target locator (:data:`TargetLocator`: a bare worker root, a container, an EC2
instance, locally or over SSH, with the Podman workspace storage), its check
(:func:`validate_target`), and the runtime settings captured when the target was chosen
(:class:`TargetRuntimeSettings`: connection, :class:`ExecutionPolicy`, environment). The
origin's ``SshConnection`` is carried as opaque JSON. Mirrors ``mj-core/src/state.rs``.

Pure: no I/O. It must not reach a target; it only describes one.
"""

from __future__ import annotations

import enum
from typing import TypeAlias

import msgspec

from ..errors import InvalidInput
from ..wire import JSON, Wire, emitted
from .checks import ends_with, has_parent, is_absolute, quoted

__all__ = [
    "AppleContainerTarget",
    "AwsConnection",
    "AwsEc2Target",
    "ContainerLayerStorage",
    "ExecutionPolicy",
    "HostPathStorage",
    "LocalBareTarget",
    "LocalConnection",
    "LocalDockerTarget",
    "LocalPodmanTarget",
    "PodmanWorkspaceLocator",
    "SshBareTarget",
    "SshConnection",
    "SshDockerTarget",
    "SshPodmanTarget",
    "SshTargetConnection",
    "TargetConnection",
    "TargetLocator",
    "TargetRuntimeSettings",
    "VolumeStorage",
    "validate_target",
]


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


def validate_target(target: TargetLocator, session_id: str) -> None:
    if isinstance(target, LocalBareTarget):
        root = target.worker_root
        if not is_absolute(root) or has_parent(root) or not ends_with(root, session_id):
            raise InvalidInput(
                "local bare worker root must be an absolute safe path ending in the session id, "
                f"not {quoted(root)}"
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
        if not workspace or has_parent(workspace) or not ends_with(workspace, session_id):
            raise InvalidInput(
                "bare SSH target locator must be a safe path ending in the session id, "
                f"not {quoted(workspace)}"
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
