"""The global feed: API events, their filter and their pages.

An :class:`ApiEvent` on the wire is flat (``seq``, ``session_id``, ``recorded_at_ms``,
``type``, ``data``); the store keeps only ``{"type", "data"}`` (:data:`ApiEventData`)
as the row body. Encoding is deterministic, so equal values give equal bytes; the store
relies on that to detect activity changes.
"""

from __future__ import annotations

import enum
from typing import Any, get_args

import msgspec

from .elicitation.forms import ElicitationRequest
from .errors import InvalidInput
from .outcomes import ApiTurnOutcome, CommandResult, OutcomeReason
from .runtime import RuntimeReceipt
from .wire import Variant, Wire, emitted, encode, variant_type

__all__ = [
    "API_EVENT_KINDS",
    "MAX_COMMAND_ID_CHARS",
    "ApiActivityChanged",
    "ApiActivityDetails",
    "ApiActivityKind",
    "ApiActivityState",
    "ApiCommandEnded",
    "ApiEvent",
    "ApiEventData",
    "ApiEventFilter",
    "ApiEventPage",
    "ApiInputRequired",
    "ApiInputResolved",
    "ApiLegacyNotice",
    "ApiRuntimeResolved",
    "ApiSessionFault",
    "ApiTurnEnded",
    "ApiTurnStarted",
    "MaterializedTurn",
    "RawApiEvent",
    "RawApiEventPage",
    "decode_api_event_data",
]


class MaterializedTurn(Wire, kw_only=True, forbid_unknown_fields=True):
    """The turn a session is running."""

    command_id: str
    accepted_ordinal: int | None = None
    turn_start_position: int
    started_at_ms: int
    steered_into: str | None = None


class ApiActivityKind(enum.Enum):
    TURN = "turn"
    STEP = "step"
    BACKGROUND = "background"
    IDLE = "idle"
    LIFECYCLE = "lifecycle"


class ApiActivityDetails(Wire, kw_only=True, forbid_unknown_fields=True):
    kind: ApiActivityKind
    turn_started_at_ms: int | None = None
    step_started_at_ms: int | None = None
    background_started_at_ms: int | None = None
    idle_since_ms: int | None = None
    last_activity_at_ms: int | None = None
    label: str | None = None


class ApiActivityState(Wire, kw_only=True):
    """What a session is doing, as the supervisor publishes it."""

    state: str
    details: ApiActivityDetails | None = emitted(None)
    # Required on read, as the origin requires them.
    is_idle: bool
    waiting_for_input: bool
    capacity_retry: bool


class _ApiVariant(Variant, kw_only=True):
    @property
    def kind(self) -> str:
        """The event's ``type`` (``turn_started``, ``session_fault``, ...)."""
        return variant_type(self)


class RuntimeResolvedData(Wire, kw_only=True):
    receipt: RuntimeReceipt


class ApiRuntimeResolved(_ApiVariant, tag="runtime_resolved"):
    data: RuntimeResolvedData


class TurnStartedData(Wire, kw_only=True):
    turn: MaterializedTurn


class ApiTurnStarted(_ApiVariant, tag="turn_started"):
    data: TurnStartedData


class TurnEndedData(Wire, kw_only=True):
    turn: ApiTurnOutcome


class ApiTurnEnded(_ApiVariant, tag="turn_ended"):
    data: TurnEndedData


class ApiCommandEnded(_ApiVariant, tag="command_ended"):
    """``data`` is the :class:`CommandResult` itself (the origin flattens it)."""

    data: CommandResult


class SessionFaultEventData(Wire, kw_only=True):
    reason: OutcomeReason
    message: str
    command_id: str | None = emitted(None)


class ApiSessionFault(_ApiVariant, tag="session_fault"):
    data: SessionFaultEventData


class LegacyNoticeData(Wire, kw_only=True):
    original_type: str
    message: str
    command_id: str | None = emitted(None)


class ApiLegacyNotice(_ApiVariant, tag="legacy_notice"):
    data: LegacyNoticeData


class InputRequiredData(Wire, kw_only=True):
    request: ElicitationRequest | None = None
    turn_id: int | None = emitted(None)


class ApiInputRequired(_ApiVariant, tag="input_required"):
    data: InputRequiredData


class InputResolvedData(Wire, kw_only=True):
    elicitation_id: str
    turn_id: int | None = emitted(None)
    action: str


class ApiInputResolved(_ApiVariant, tag="input_resolved"):
    data: InputResolvedData


class ActivityChangedData(Wire, kw_only=True):
    activity: ApiActivityState


class ApiActivityChanged(_ApiVariant, tag="activity_changed"):
    data: ActivityChangedData


ApiEventData = (
    ApiRuntimeResolved
    | ApiTurnStarted
    | ApiTurnEnded
    | ApiCommandEnded
    | ApiSessionFault
    | ApiLegacyNotice
    | ApiInputRequired
    | ApiInputResolved
    | ApiActivityChanged
)
"""The body of one API event, tagged by its kind."""

_DATA_DECODER: msgspec.json.Decoder[ApiEventData] = msgspec.json.Decoder(ApiEventData)
_VARIANTS: dict[str, type[_ApiVariant]] = {
    variant_type(variant): variant for variant in get_args(ApiEventData)
}
_DATA_DECODERS = {
    kind: msgspec.json.Decoder(variant.data_type()) for kind, variant in _VARIANTS.items()
}


def decode_api_event_data(body: bytes | str) -> ApiEventData:
    """Decode a stored ``{"type", "data"}`` body; :class:`InvalidInput` names the field."""
    try:
        return _DATA_DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"invalid API event body: {exc}") from exc


class ApiEvent(msgspec.Struct, kw_only=True, frozen=True):
    """One event of the global feed, in its flat wire shape.

    ``data`` keeps the body's JSON bytes; :attr:`event` gives the typed body. Decoding
    checks that ``data`` fits ``type``. Build one in code with :meth:`of`.
    """

    seq: int
    session_id: str
    recorded_at_ms: int
    type: str
    data: msgspec.Raw

    def __post_init__(self) -> None:
        decoder = _DATA_DECODERS.get(self.type)
        if decoder is None:
            msg = f"unknown API event type {self.type!r}"
            raise ValueError(msg)
        decoder.decode(self.data)

    @classmethod
    def of(cls, *, seq: int, session_id: str, recorded_at_ms: int, event: ApiEventData) -> ApiEvent:
        """The feed entry for ``event`` at ``seq``."""
        return cls(
            seq=seq,
            session_id=session_id,
            recorded_at_ms=recorded_at_ms,
            type=event.kind,
            data=msgspec.Raw(encode(event.data)),
        )

    @property
    def event(self) -> ApiEventData:
        """The typed body."""
        variant: Any = _VARIANTS[self.type]
        result: ApiEventData = variant(data=_DATA_DECODERS[self.type].decode(self.data))
        return result

    @property
    def kind(self) -> str:
        """The event's ``type``."""
        return self.type


class ApiEventFilter(msgspec.Struct, kw_only=True, frozen=True):
    """Which events a page holds: one session, one workspace, or all (``None``); and,
    with ``command_id``, only the events of that command: a ``command_ended``,
    ``session_fault`` or ``legacy_notice`` whose ``data.command_id`` it is, a
    ``turn_started`` or ``turn_ended`` whose ``data.turn.command_id`` it is.

    The fields are always written (``null`` for "any").
    """

    session_id: str | None = None
    workspace_id: str | None = None
    command_id: str | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidInput` for a blank ``command_id`` or one longer than
        :data:`MAX_COMMAND_ID_CHARS` (the ids are the store's to check)."""
        command = self.command_id
        if command is not None and (not command.strip() or len(command) > MAX_COMMAND_ID_CHARS):
            shown = command if len(command) <= 40 else command[:40] + "..."
            raise InvalidInput(
                f"command_id {shown!r} must be non-blank text of at most "
                f"{MAX_COMMAND_ID_CHARS} characters"
            )


MAX_COMMAND_ID_CHARS = 1024
"""The longest command id an event filter takes."""


class ApiEventPage(Wire, kw_only=True):
    """A page of events and the cursor to ask for the next one."""

    events: list[ApiEvent] = emitted([])
    next_after_seq: int
    latest_seq: int


API_EVENT_KINDS: tuple[str, ...] = tuple(_VARIANTS)
"""Every API event ``type``, in :data:`ApiEventData` order."""


class RawApiEvent(msgspec.Struct, frozen=True):
    """One event of the global feed as the bytes the feed prints, without decoding them.

    ``json`` is exactly ``msgspec.json.encode(api_event)`` of the matching
    :class:`ApiEvent` (its flat wire shape), ``kind`` its ``type`` and ``seq`` its
    ``seq``. Not a wire type itself: print ``json``. Built positionally by the store.
    """

    seq: int
    kind: str
    json: bytes


class RawApiEventPage(msgspec.Struct, kw_only=True, frozen=True):
    """A page of :class:`RawApiEvent` s and the cursor to ask for the next one.

    The same page, cursors and snapshot as the :class:`ApiEventPage` of the same request.
    """

    events: list[RawApiEvent]
    next_after_seq: int
    latest_seq: int
