"""The test kit: valid relay journals and session records for an embedder's tests.

:class:`JournalBuilder` writes what a worker writes: relay events with their ordinals,
clock, digests and (format 1) chain computed, from typed observations
(``CommandQueued.of(...)``) or wire-shaped ones (a dict or JSON text, decoded and checked
as a journal line's observation is). Its stories add the common runs of events::

    from relaystore.testing import JournalBuilder, example_session

    journal = JournalBuilder()
    journal.prompt_turn("What does step 1 do?")      # turn_started, turn_ended
    journal.question("Which directory?")             # input_required, input_resolved
    store.ask(SaveSession(record=example_session("session-1")))
    store.ask(ObserveRelayEvents(session_id="session-1", events=journal.events))

``journal.write(path)`` writes a ``.jsonl`` (or gzipped ``.jsonl.gz``) journal and
``journal.write_worker_root(folder, session_id)`` a worker root that ``relaystore
replay`` and ``relaystore verify`` read. The pytest fixtures ``relaystore_store`` and
``relaystore_journal`` are in :mod:`relaystore.pytest_plugin` (opt in with
``pytest_plugins = ["relaystore.pytest_plugin"]``). This module imports no pytest.

Everything here is deterministic: the same calls give the same bytes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from relaystore.domain.chain import GENESIS, checked_frontier
from relaystore.domain.digests import RELAY_EVENT_FORMATS, relay_event_digest
from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.errors import InvalidInput, UnknownRelayKind
from relaystore.domain.hashing import RELAY_EVENT_FORMAT_V1, RELAY_EVENT_FORMAT_V2
from relaystore.domain.ids import validate_id
from relaystore.domain.integers import INT64_MAX
from relaystore.domain.mailbox import (
    GithubComment,
    GithubItemKind,
    GithubPullRequestLifecycle,
    GithubReview,
    GithubReviewComment,
    MailboxEventBody,
    MailboxPullRequestChange,
    NewGithubItem,
    ParentMessage,
    PlainText,
    SessionMessage,
    SessionSender,
    UserSender,
)
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.relay.commands import (
    CancelTurnCommand,
    DeliverMailboxEventCommand,
    HandbackReminderCommand,
    InstallPromptContextCommand,
    MailboxEvent,
    MailboxWakeCommand,
    PromptCommand,
    RelayCommand,
    RelayCommandKind,
    RestoreExecutionModeCommand,
    RunUserShellCommand,
    SeedAssessmentContextCommand,
)
from relaystore.domain.relay.events import (
    MIN_RECORDED_AT_MS,
    RelayEvent,
    RelayLine,
    decode_relay_event,
    decode_relay_line,
    encode_relay_event,
)
from relaystore.domain.relay.observations import (
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    ElicitationRequested,
    ElicitationResolved,
    HarnessTurnSettled,
    HarnessTurnStarted,
    MailboxDeliveryPath,
    MailboxEventsDelivered,
    MailboxHookLease,
    MailboxHookLeaseCreated,
    MailboxHookLeaseReturned,
    MailboxHookLeaseReturnReason,
    RelayObservation,
    SessionRestarted,
    SessionUpdate,
    UserShellOutput,
)
from relaystore.domain.relay.outcomes import (
    CancelledOutcome,
    ConfiguredOutcome,
    NoticeRecordedOutcome,
    PromptOutcome,
    RelayCommandOutcome,
    UserShellOutcome,
)
from relaystore.domain.relay.payloads import (
    ContextHistory,
    EvidenceMessage,
    RelayCursor,
    UserShellResult,
    UserShellStatus,
)
from relaystore.domain.runtime import HarnessKind
from relaystore.domain.sessions.provisioning import (
    AdditionalMount,
    ContainerAllocation,
    MountAccess,
)
from relaystore.domain.sessions.records import (
    DEFAULT_WORKSPACE_ID,
    CheckpointMetadata,
    SessionRecord,
    SessionState,
)
from relaystore.domain.sessions.targets import LocalPodmanTarget
from relaystore.domain.validation import OBSERVATION_TYPES
from relaystore.domain.wire import JSON, decode_json, encode
from relaystore.domain.worker_root import (
    ACTIVE_JOURNAL_NAME,
    JOURNAL_DIR_NAME,
    RELAY_STATE_NAME,
    SEED_NAME,
    segment_name,
)

__all__ = [
    "DEFAULT_START_MS",
    "DEFAULT_STEP_MS",
    "RELAY_STATE_FORMAT_VERSION",
    "JournalBuilder",
    "ObservationInput",
    "checkpointed_session",
    "example_session",
]

DEFAULT_START_MS = 1_790_000_000_000
"""The clock of a builder's first event, unless told otherwise (2026-09-21)."""
DEFAULT_STEP_MS = 1_000
"""How far the clock moves from one event to the next, unless told otherwise."""
RELAY_STATE_FORMAT_VERSION = 7
"""The ``format_version`` written into ``relay-state.json`` (the worker's, at the origin)."""

ObservationInput = RelayObservation | Mapping[str, Any] | str | bytes
"""What :meth:`JournalBuilder.add` takes: a typed observation, or a wire-shaped one (a
dict such as ``{"type": "notice", "data": {"message": "hi"}}``, or its JSON text)."""


def _observation(value: object) -> RelayObservation:
    """``value`` as a checked observation; wire shapes are decoded as a journal's are."""
    if isinstance(value, OBSERVATION_TYPES):
        observation: RelayObservation = value
        return observation
    if isinstance(value, msgspec.Struct):
        raise InvalidInput(f"{type(value).__name__} is not a relay observation")
    if isinstance(value, str | bytes):
        data = value
    elif isinstance(value, Mapping):
        try:
            data = encode(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInput(f"invalid relay observation: not plain JSON ({exc})") from exc
    else:
        raise InvalidInput(
            f"expected a relay observation, a dict or JSON text, got {type(value).__name__}"
        )
    return decode_json(data, RelayObservation, what="relay observation")  # type: ignore[arg-type]


def _gzip(data: bytes) -> bytes:
    """``data`` gzipped with no name and no time, so the bytes are reproducible."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as out:
        out.write(data)
    return buffer.getvalue()


def _text_block(text: str) -> JSON:
    return {"type": "text", "text": text}


def _time(name: str, value: object) -> int:
    """``value`` as a journal time (``recorded_at_ms``: 0 up to SQLite's INTEGER)."""
    if type(value) is not int:
        raise InvalidInput(f"{name} must be an int (Unix milliseconds), got {type(value).__name__}")
    if not MIN_RECORDED_AT_MS <= value <= INT64_MAX:
        raise InvalidInput(f"{name} must be 0 to {INT64_MAX} (Unix milliseconds), got {value}")
    return value


def _format(value: object) -> int:
    if type(value) is not int or value not in RELAY_EVENT_FORMATS:
        raise InvalidInput(f"unknown relay event format {value!r}; use format 1 or 2")
    return value


def _folder(name: str, value: object) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise InvalidInput(
            f"{name} must be a path (str or os.PathLike), got {type(value).__name__}"
        )
    return Path(value)


def _replayable(event: RelayEvent) -> RelayEvent:
    """``event``, once its journal line reads back as a journal line must (the check
    ``replay`` and ``verify`` make of every line: types, ranges, the observation)."""
    try:
        decode_relay_event(encode_relay_event(event))
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError) as exc:
        raise InvalidInput(f"the event would not encode as a journal line: {exc}") from exc
    except UnknownRelayKind as exc:
        raise InvalidInput(f"the event would not read back as this build reads it: {exc}") from exc
    return event


def _arguments(method: str, **arguments: tuple[object, Any] | tuple[object, Any, str]) -> None:
    """Refuse an argument of the wrong type with :class:`InvalidInput` naming it
    (``name=(value, type[, what it must be])``; ``bool`` is not taken for ``int``, nor
    ``int`` for ``bool``)."""
    for name, (value, kind, *said) in arguments.items():
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            wanted = said[0] if said else getattr(kind, "__name__", str(kind))
            raise InvalidInput(f"{method}: {name} must be {wanted}, got {type(value).__name__}")


class JournalBuilder:
    """Builds one session's relay journal, event by event.

    ``format`` is the format of the next event (1: chained by ``previous_digest``; 2:
    self-describing, what current workers write); change it between events to model a
    worker upgrade. ``after`` is the frontier the journal continues (default genesis):
    give a stored session's frontier to continue it, or any cursor (for example ordinal
    3327) to model a journal whose earlier events were pruned. The clock starts at
    ``start_ms`` and moves ``step_ms`` per event; ``at_ms`` sets one event's time and the
    clock carries on from there.
    """

    def __init__(
        self,
        *,
        format: int = RELAY_EVENT_FORMAT_V2,
        after: RelayCursor | None = None,
        start_ms: int = DEFAULT_START_MS,
        step_ms: int = DEFAULT_STEP_MS,
    ) -> None:
        if after is not None and type(after) is not RelayCursor:
            raise InvalidInput(f"after must be a RelayCursor, got {type(after).__name__}")
        self.format = _format(format)
        self.start = after if after is not None else GENESIS
        self.step_ms = _time("step_ms", step_ms)
        self.events: list[RelayEvent] = []
        """Every event added, oldest first."""
        self._next_ms = _time("start_ms", start_ms)
        self._ids: dict[str, int] = {}
        if after is not None:  # a well-formed cursor: genesis at 0, a 64-hex digest past it
            checked_frontier(after.ordinal, after.digest)

    # -- position ------------------------------------------------------------------------

    @property
    def frontier(self) -> RelayCursor:
        """The cursor of the last event (``after`` before any event)."""
        return self.events[-1].cursor if self.events else self.start

    @property
    def next_ordinal(self) -> int:
        return self.frontier.ordinal + 1

    @property
    def next_ms(self) -> int:
        """The time the next event is recorded at, unless ``at_ms`` says otherwise."""
        return self._next_ms

    def next_id(self, prefix: str) -> str:
        """A fresh id: ``prompt-1``, ``prompt-2``, … per prefix."""
        count = self._ids.get(prefix, 0) + 1
        self._ids[prefix] = count
        return f"{prefix}-{count}"

    # -- events --------------------------------------------------------------------------

    def add(
        self,
        observation: ObservationInput,
        *,
        command_id: str | None = None,
        at_ms: int | None = None,
    ) -> RelayEvent:
        """Append one event holding ``observation`` and return it.

        A dict or JSON text is decoded as a journal line's observation is; a malformed one
        raises :class:`InvalidInput` naming the field.
        """
        event_format = _format(self.format)
        checked = _observation(observation)
        if command_id is not None and type(command_id) is not str:
            raise InvalidInput(f"command_id must be a str or None, got {type(command_id).__name__}")
        if at_ms is not None:
            recorded_at_ms = _time("at_ms", at_ms)
        elif self._next_ms > INT64_MAX:
            raise InvalidInput(
                f"the clock would pass {INT64_MAX} ms (step_ms {self.step_ms} after "
                f"{self._next_ms - self.step_ms}); give this event's at_ms"
            )
        else:
            recorded_at_ms = self._next_ms
        chained = event_format == RELAY_EVENT_FORMAT_V1
        event = _replayable(
            RelayEvent.create(
                format=event_format,
                ordinal=self.next_ordinal,
                previous_digest=self.frontier.digest if chained else "",
                recorded_at_ms=recorded_at_ms,
                command_id=command_id,
                observation=checked,
            )
        )
        self.events.append(event)
        self._next_ms = recorded_at_ms + self.step_ms
        return event

    def newer_line(self, observation: bytes, *, command_id: str | None = None) -> RelayLine:
        """The line a newer worker would write next: ``observation`` (its JSON, of a kind
        this build does not know) at the next ordinal and time, with its digest, as
        :func:`~relaystore.domain.relay.decode_relay_line` reads it back.

        It is not added to :attr:`events` (which holds what this build decodes): write
        ``encode_relay_event(line)`` where it belongs, and continue the journal with
        ``JournalBuilder(after=line.cursor)``. Raises :class:`InvalidInput` when this
        build knows the kind after all, or the observation is not JSON.
        """
        if type(observation) is not bytes:
            raise InvalidInput(f"observation must be bytes, got {type(observation).__name__}")
        draft = RelayLine(
            format=_format(self.format),
            ordinal=self.next_ordinal,
            previous_digest=self.frontier.digest if self.format == RELAY_EVENT_FORMAT_V1 else "",
            digest="",
            recorded_at_ms=self._next_ms,
            command_id=command_id,
            observation_json=observation,
        )
        signed = msgspec.structs.replace(draft, digest=relay_event_digest(draft))
        line = decode_relay_line(encode_relay_event(signed))
        if not isinstance(line, RelayLine):
            raise InvalidInput(
                "newer_line needs an observation of a kind this build does not know; this "
                "one decodes (use add)"
            )
        return line

    def extend(
        self, observations: Sequence[ObservationInput], *, command_id: str | None = None
    ) -> list[RelayEvent]:
        """:meth:`add` each of ``observations``; return the events added."""
        if not isinstance(observations, Sequence) or isinstance(observations, str | bytes):
            raise InvalidInput(
                f"observations must be a list of observations, got {type(observations).__name__}"
            )
        return [self.add(observation, command_id=command_id) for observation in observations]

    # -- output --------------------------------------------------------------------------

    def lines(self) -> list[bytes]:
        """The journal lines of every event, each ending in its newline."""
        return [encode_relay_event(event) + b"\n" for event in self.events]

    def to_bytes(self) -> bytes:
        """The whole journal, as ``active.jsonl`` holds it."""
        return b"".join(self.lines())

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the journal to ``path`` (gzipped when it ends in ``.gz``); return the path."""
        target = _folder("path", path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_bytes()
        target.write_bytes(_gzip(data) if target.name.endswith(".gz") else data)
        return target

    def write_worker_root(
        self,
        folder: str | os.PathLike[str],
        session_id: str,
        *,
        seal_every: int | None = None,
        seed: bool = False,
    ) -> Path:
        """Write a worker root at ``folder`` as a worker leaves it; return the folder.

        It holds ``relay-journal/active.jsonl`` and ``relay-state.json`` (the session id and
        the latest ordinal and digest). ``seal_every`` seals every that many events into
        ``relay-journal/segment-{first:020}-{last:020}.jsonl.gz``, leaving the rest in
        ``active.jsonl``. ``seed`` also writes ``relay-seed.json`` naming the frontier the
        journal continues (as a checkpoint restore leaves it), so the builder must continue
        one (``after``): at genesis a worker has no seed. A root already at ``folder`` is
        replaced whole: its journal folder, state and seed (no old segment stays behind).
        """
        root = _folder("folder", folder)
        if type(session_id) is not str:
            raise InvalidInput(f"the session id must be a str, got {type(session_id).__name__}")
        validate_id("session", session_id)
        if seal_every is not None and (type(seal_every) is not int or seal_every < 1):
            raise InvalidInput(f"seal_every must be an int of at least 1, got {seal_every!r}")
        if type(seed) is not bool:
            raise InvalidInput(f"seed must be True or False, got {seed!r}")
        if seed and self.start.ordinal == 0:
            raise InvalidInput(
                "seed=True needs a journal that continues a frontier (JournalBuilder(after=...)):"
                " a checkpoint restore seeds a frontier of ordinal 1 or more, never genesis"
            )
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{JOURNAL_DIR_NAME}-", dir=root))
        try:
            self._write_journal(staging, seal_every)
            _swap_in(staging, root / JOURNAL_DIR_NAME)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        frontier = self.frontier
        state = {
            "format_version": RELAY_STATE_FORMAT_VERSION,
            "session_id": session_id,
            "latest_ordinal": frontier.ordinal,
            "latest_digest": frontier.digest,
        }
        (root / RELAY_STATE_NAME).write_text(json.dumps(state, indent=2) + "\n")
        if seed:
            restore = {
                "event_frontier": self.start.ordinal,
                "event_frontier_digest": self.start.digest,
                "queued_prompts": [],
            }
            (root / SEED_NAME).write_text(json.dumps(restore, indent=2) + "\n")
        else:  # an older root's seed would move where this journal starts
            (root / SEED_NAME).unlink(missing_ok=True)
        return root

    def _write_journal(self, journal: Path, seal_every: int | None) -> None:
        """The journal folder's files: sealed segments, then ``active.jsonl``."""
        lines = self.lines()
        sealed = 0
        if seal_every is not None:
            sealed = len(lines) // seal_every * seal_every
            for index in range(0, sealed, seal_every):
                first, last = (
                    self.events[index].ordinal,
                    self.events[index + seal_every - 1].ordinal,
                )
                (journal / segment_name(first, last)).write_bytes(
                    _gzip(b"".join(lines[index : index + seal_every]))
                )
        (journal / ACTIVE_JOURNAL_NAME).write_bytes(b"".join(lines[sealed:]))

    # -- stories -------------------------------------------------------------------------

    def start_prompt(self, text: str, *, command_id: str | None = None) -> list[RelayEvent]:
        """A prompt queued and started (``turn_started``); its id is the events' command id."""
        command_id = command_id or self.next_id("prompt")
        queued = self.add(
            CommandQueued.of(
                command_id=command_id,
                command=PromptCommand.of(prompt=[_text_block(text)]),
                created_at_ms=self._next_ms,
            ),
            command_id=command_id,
        )
        started = self.add(
            CommandStarted.of(command_id=command_id, started_at_ms=self._next_ms),
            command_id=command_id,
        )
        return [queued, started]

    def say(self, *chunks: str, message_id: str | None = None) -> list[RelayEvent]:
        """The agent's answer, streamed as one ``agent_message_chunk`` per text."""
        message_id = message_id or self.next_id("msg")
        return [
            self.add(
                SessionUpdate.of(
                    update={
                        "sessionUpdate": "agent_message_chunk",
                        "content": _text_block(chunk),
                        "messageId": message_id,
                    }
                )
            )
            for chunk in chunks
        ]

    def end_prompt(self, command_id: str, *, stop_reason: str = "end_turn") -> list[RelayEvent]:
        """The prompt ``command_id`` completed with ``stop_reason`` (``turn_ended``)."""
        completed = self.add(
            CommandCompleted.of(
                command=RelayCommandKind.PROMPT,
                command_id=command_id,
                outcome=PromptOutcome.of(stop_reason=stop_reason),
            ),
            command_id=command_id,
        )
        return [completed]

    def prompt_turn(
        self,
        text: str,
        *,
        command_id: str | None = None,
        chunks: Sequence[str] = ("Done.",),
        stop_reason: str = "end_turn",
    ) -> list[RelayEvent]:
        """A whole prompt turn: queued, started, the answer's ``chunks``, completed.

        Yields the API events ``turn_started`` and ``turn_ended`` (completed, for the
        default ``end_turn``).
        """
        events = self.start_prompt(text, command_id=command_id)
        prompt_id = events[0].command_id
        assert prompt_id is not None
        events += self.say(*chunks)
        events += self.end_prompt(prompt_id, stop_reason=stop_reason)
        return events

    def question(
        self,
        message: str = "Which directory?",
        *,
        request_id: str | None = None,
        field: str = "answer",
        schema: Mapping[str, Any] | None = None,
        action: str | None = "accept",
        native_session_id: str = "native-1",
    ) -> list[RelayEvent]:
        """An agent's form question, asked and (unless ``action`` is None) answered.

        The question asks for one required string ``field`` unless ``schema`` gives the
        whole ``requestedSchema``. Yields ``input_required`` and ``input_resolved`` (with
        ``action``; ``turn_id`` is the active turn's accepted ordinal, if a turn runs).
        A wrong argument raises :class:`InvalidInput` naming it.
        """
        _arguments(
            "question",
            message=(message, str),
            request_id=(request_id, str | None),
            field=(field, str),
            action=(action, str | None),
            native_session_id=(native_session_id, str),
            schema=(schema, Mapping | None, "a mapping (the requestedSchema) or None"),
        )
        request = parse_acp_request(
            request_id or self.next_id("question"),
            {
                "mode": "form",
                "sessionId": native_session_id,
                "message": message,
                "requestedSchema": dict(schema)
                if schema is not None
                else {
                    "type": "object",
                    "properties": {field: {"type": "string", "title": field.title()}},
                    "required": [field],
                },
            },
        )
        events = [self.add(ElicitationRequested.of(request=request))]
        if action is not None:
            events.append(
                self.add(ElicitationResolved.of(elicitation_id=request.id, action=action))
            )
        return events

    def shell_command(
        self,
        command: str,
        *,
        stdout: str = "",
        stderr: str = "",
        exit_code: int = 0,
        command_id: str | None = None,
        duration_ms: int = 190,
    ) -> list[RelayEvent]:
        """A user shell command queued, started, its output, and its exit.

        Yields ``command_ended`` for ``run_user_shell``: succeeded for exit code 0, else
        failed (``nonzero_exit``).
        """
        command_id = command_id or self.next_id("shell")
        events = [
            self.add(
                CommandQueued.of(
                    command_id=command_id,
                    command=RunUserShellCommand.of(command=command),
                    created_at_ms=self._next_ms,
                ),
                command_id=command_id,
            ),
            self.add(
                CommandStarted.of(command_id=command_id, started_at_ms=self._next_ms),
                command_id=command_id,
            ),
            self.add(
                UserShellOutput.of(
                    command_id=command_id,
                    command=command,
                    stdout=stdout,
                    stderr=stderr,
                    stdout_truncated=False,
                    stderr_truncated=False,
                ),
                command_id=command_id,
            ),
        ]
        result = UserShellResult(
            command=command,
            stdout=stdout,
            stderr=stderr,
            exit_code=exit_code,
            duration_ms=duration_ms,
            status=UserShellStatus.EXITED,
        )
        events.append(
            self.add(
                CommandCompleted.of(
                    command=RelayCommandKind.RUN_USER_SHELL,
                    command_id=command_id,
                    outcome=UserShellOutcome.of(result=result),
                ),
                command_id=command_id,
            )
        )
        return events

    def restart_mid_turn(
        self,
        text: str,
        *,
        command_id: str | None = None,
        chunks: Sequence[str] = ("Working on it",),
        interrupt: bool = True,
    ) -> list[RelayEvent]:
        """A prompt turn started, then the worker restarted (``session_restarted``).

        With ``interrupt`` (the default, as a restarted worker journals it) the prompt is
        then interrupted with ``worker_restarted``. Yields ``turn_started`` and, with
        ``interrupt``, ``turn_ended`` (interrupted).
        """
        events = self.start_prompt(text, command_id=command_id)
        prompt_id = events[0].command_id
        assert prompt_id is not None
        events += self.say(*chunks)
        events.append(self.add(SessionRestarted.of()))
        if interrupt:
            events.append(
                self.add(
                    CommandInterrupted.of(
                        reason=OutcomeReason.WORKER_RESTARTED,
                        command_id=prompt_id,
                        command=RelayCommandKind.PROMPT,
                        message="the worker restarted while this prompt was running",
                    ),
                    command_id=prompt_id,
                )
            )
        return events

    # -- protocol 33: mailboxes, reminders, harness turns -----------------------------------

    def command(
        self, command: RelayCommand, *, command_id: str | None = None, prefix: str = "command"
    ) -> list[RelayEvent]:
        """``command`` queued (``command_queued``); its id is the event's command id."""
        command_id = command_id or self.next_id(prefix)
        queued = CommandQueued.of(
            command_id=command_id, command=command, created_at_ms=self._next_ms
        )
        return [self.add(queued, command_id=command_id)]

    def complete(
        self,
        command_id: str,
        outcome: RelayCommandOutcome,
        *,
        kind: RelayCommandKind | None = None,
    ) -> list[RelayEvent]:
        """The command ``command_id`` completed with ``outcome`` (journaling ``kind``)."""
        completed = CommandCompleted.of(command=kind, command_id=command_id, outcome=outcome)
        return [self.add(completed, command_id=command_id)]

    def mailbox_event(
        self,
        text: str | None = None,
        *,
        body: MailboxEventBody | None = None,
        source: str = "github",
        wake: bool = False,
        key: str | None = None,
    ) -> MailboxEvent:
        """A mailbox event (not journaled: hand it to the mailbox stories): ``text`` in
        protocol 33's form, or a structured ``body`` (protocol 34 onward); exactly one.

        A wrong argument raises :class:`InvalidInput` naming it.
        """
        if (text is None) == (body is None):
            raise InvalidInput("mailbox_event takes exactly one of text and body")
        _arguments(
            "mailbox_event",
            text=(text, str | None),
            source=(source, str),
            key=(key, str | None),
            wake=(wake, bool),
            body=(body, MailboxEventBody | None, "a body of relaystore.domain.mailbox or None"),
        )
        fields = {
            "key": key or self.next_id(f"{source}:event"),
            "source": source,
            "wake": wake,
            "text": text,
            "created_at_ms": self._next_ms,
            "body": body,
        }
        try:
            return msgspec.convert(fields, MailboxEvent, strict=True)
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"invalid mailbox_event: {exc}") from exc

    def deliver_mailbox_event(
        self, event: MailboxEvent, *, command_id: str | None = None
    ) -> list[RelayEvent]:
        """``event`` added to the mailbox and recorded (``command_ended`` succeeded for
        ``record_notice``); the transcript says where it came from."""
        events = self.command(
            DeliverMailboxEventCommand.of(event=event), command_id=command_id, prefix="mailbox"
        )
        command_id = events[0].command_id
        assert command_id is not None
        events += self.complete(
            command_id, NoticeRecordedOutcome(), kind=RelayCommandKind.RECORD_NOTICE
        )
        return events

    def mailbox_hook_delivery(
        self,
        events: Sequence[MailboxEvent],
        *,
        hook_event: str = "PostToolUse",
        lease_id: str | None = None,
        returned: MailboxHookLeaseReturnReason | None = None,
    ) -> list[RelayEvent]:
        """A tool hook leases ``events`` and acknowledges them (a delivery line), or,
        with ``returned``, the lease ends and they go back (no line)."""
        lease_id = lease_id or self.next_id("lease")
        lease = MailboxHookLease(
            lease_id=lease_id,
            events=list(events),
            hook_event=hook_event,
            expires_at_ms=self._next_ms + 60_000,
        )
        journaled = [self.add(MailboxHookLeaseCreated.of(lease=lease))]
        if returned is not None:
            journaled.append(
                self.add(MailboxHookLeaseReturned.of(lease_id=lease_id, reason=returned))
            )
            return journaled
        delivered = MailboxEventsDelivered.of(
            event_keys=[event.key for event in events],
            path=MailboxDeliveryPath.TOOL_HOOK,
            hook_event=hook_event,
            events=list(events),
            lease_id=lease_id,
        )
        journaled.append(self.add(delivered))
        return journaled

    def mailbox_prompt_delivery(
        self, events: Sequence[MailboxEvent], prompt_command_id: str
    ) -> list[RelayEvent]:
        """``events`` went in with the prompt ``prompt_command_id`` (a delivery line)."""
        delivered = MailboxEventsDelivered.of(
            event_keys=[event.key for event in events],
            path=MailboxDeliveryPath.PROMPT,
            prompt_command_id=prompt_command_id,
            events=list(events),
        )
        return [self.add(delivered)]

    def mailbox_wake(
        self,
        events: Sequence[MailboxEvent],
        *,
        command_id: str | None = None,
        stop_reason: str = "end_turn",
    ) -> list[RelayEvent]:
        """A wake prompt carrying ``events``: queued (its delivery line), started and
        completed, a turn of its own (``turn_started``, ``turn_ended``)."""
        journaled = self.command(
            MailboxWakeCommand.of(events=list(events)), command_id=command_id, prefix="wake"
        )
        wake_id = journaled[0].command_id
        assert wake_id is not None
        journaled.append(
            self.add(
                CommandStarted.of(command_id=wake_id, started_at_ms=self._next_ms),
                command_id=wake_id,
            )
        )
        journaled += self.end_prompt(wake_id, stop_reason=stop_reason)
        return journaled

    def handback_reminder(
        self, completed_command_id: str, completed_ordinal: int, *, stop_reason: str = "end_turn"
    ) -> list[RelayEvent]:
        """The worker's hand-back reminder after turn ``completed_command_id`` ended at
        ``completed_ordinal``: a prompt turn of its own, ``handback-reminder-{ordinal}``."""
        reminder_id = f"handback-reminder-{completed_ordinal}"
        command = HandbackReminderCommand.of(
            completed_command_id=completed_command_id, completed_ordinal=completed_ordinal
        )
        journaled = self.command(command, command_id=reminder_id)
        journaled.append(
            self.add(
                CommandStarted.of(command_id=reminder_id, started_at_ms=self._next_ms),
                command_id=reminder_id,
            )
        )
        journaled += self.end_prompt(reminder_id, stop_reason=stop_reason)
        return journaled

    def harness_turn_cancelled(self, *, command_id: str | None = None) -> list[RelayEvent]:
        """A turn the harness started on its own, stopped by ``cancel_turn``, then settled:
        an ``Interrupted`` line and a cancelled outcome (``command_ended``, ``turn_ended``)."""
        journaled = [self.add(HarnessTurnStarted.of(started_at_ms=self._next_ms))]
        journaled += self.command(CancelTurnCommand(), command_id=command_id, prefix="cancel")
        cancel_id = journaled[-1].command_id
        assert cancel_id is not None
        journaled += self.complete(cancel_id, CancelledOutcome(), kind=RelayCommandKind.CANCEL_TURN)
        journaled.append(self.add(HarnessTurnSettled.of(origin=None, prompt_in_flight=False)))
        return journaled

    def restore_execution_mode(
        self, *, refused: str | None = None, command_id: str | None = None
    ) -> list[RelayEvent]:
        """The worker's execution mode restored (a configuration result), or refused
        with ``refused`` as its message."""
        journaled = self.command(
            RestoreExecutionModeCommand(), command_id=command_id, prefix="mode"
        )
        mode_id = journaled[0].command_id
        assert mode_id is not None
        if refused is None:
            return journaled + self.complete(
                mode_id, ConfiguredOutcome(), kind=RelayCommandKind.RESTORE_EXECUTION_MODE
            )
        rejected = CommandRejected.of(
            reason=OutcomeReason.COMMAND_FAILED,
            command_id=mode_id,
            command=RelayCommandKind.RESTORE_EXECUTION_MODE,
            message=refused,
        )
        journaled.append(self.add(rejected, command_id=mode_id))
        return journaled

    def prompt_context(
        self, text: str = "Repository layout: src/ holds the code."
    ) -> list[RelayEvent]:
        """Hidden prompt context installed, and the retained authorization history seeded
        at the journal's frontier: both relay-local records that leave no line."""
        install = self.command(InstallPromptContextCommand.of(text=text), prefix="context")
        context = ContextHistory(
            messages=[EvidenceMessage(id="user:c1", role="user", text="Implement and test.")],
            authorization_complete=True,
            assistant_history_omitted=False,
        )
        seed = self.command(
            SeedAssessmentContextCommand.of(expected=self.frontier, context=context),
            prefix="assessment",
        )
        journaled = install + seed
        for queued in (install[0], seed[0]):
            assert queued.command_id is not None
            journaled += self.complete(
                queued.command_id, NoticeRecordedOutcome(), kind=RelayCommandKind.RECORD_NOTICE
            )
        return journaled

    def protocol_33(self) -> list[RelayEvent]:
        """Every command, outcome and observation protocol 33 added, in one valid run: a
        prompt with mailbox events delivered by tool hook and with the prompt, a lease
        that times out, a wake, a hand-back reminder, a harness turn cancelled, the
        execution mode restored and refused, hidden context and assessment history."""
        journaled = self.prompt_context()
        first = self.mailbox_event("A review comment arrived.")
        journaled += self.deliver_mailbox_event(first)
        journaled += self.start_prompt("Fix the failing test.")
        prompt_id = journaled[-1].command_id
        assert prompt_id is not None
        journaled += self.mailbox_hook_delivery([first])
        second = self.mailbox_event("Please check this detail.", source="parent")
        journaled += self.deliver_mailbox_event(second)
        journaled += self.mailbox_prompt_delivery([second], prompt_id)
        late = self.mailbox_event("CI finished.")
        journaled += self.deliver_mailbox_event(late)
        journaled += self.mailbox_hook_delivery(
            [late], returned=MailboxHookLeaseReturnReason.TIMEOUT
        )
        journaled += self.say("Fixed.")
        journaled += self.end_prompt(prompt_id)
        journaled += self.handback_reminder(prompt_id, journaled[-1].ordinal)
        urgent = self.mailbox_event("A new task is ready.", source="api", wake=True)
        journaled += self.deliver_mailbox_event(urgent)
        journaled += self.mailbox_wake([urgent])
        journaled += self.harness_turn_cancelled()
        journaled += self.restore_execution_mode()
        journaled += self.restore_execution_mode(refused="auto mode refused")
        return journaled

    def protocol_36(self) -> list[RelayEvent]:
        """Every mailbox event body protocol 36 reads, each queued (one external-events
        line each), the legacy text form among them, then a wake carrying them all: a
        turn of its own."""
        pr, merged = GithubItemKind.PULL_REQUEST, MailboxPullRequestChange.MERGED
        bodies: list[MailboxEventBody] = [
            NewGithubItem(kind=GithubItemKind.ISSUE, number=37, title="Setup", repo="o/r"),
            GithubComment(item_kind=pr, number=12, title="t", author="alice", body="Nice."),
            GithubReview(
                item_kind=pr,
                number=12,
                title="t",
                author="bob",
                body="Revise <this>.",
                review_state="CHANGES_REQUESTED",
            ),
            GithubReviewComment(item_kind=pr, number=12, title="t", author="c", body="A test."),
            GithubPullRequestLifecycle(change=merged, number=12, title="t", actor="dana"),
            ParentMessage(text="Please verify the edge case."),
            SessionMessage(
                from_=SessionSender(id="session-7", title="Fix cache race"), text="Fixed."
            ),
            SessionMessage(from_=UserSender(), text="Check the result."),
            PlainText(text="A plain event."),
        ]
        events = [self.mailbox_event(body=body) for body in bodies]
        events.append(self.mailbox_event("A protocol 33 event.", source="api", wake=True))
        journaled: list[RelayEvent] = []
        for event in events:
            journaled += self.deliver_mailbox_event(event)
        journaled += self.mailbox_wake(events)
        return journaled


def _swap_in(staging: Path, journal: Path) -> None:
    """Put the folder ``staging`` at ``journal``, replacing what was there whole."""
    if journal.is_symlink() or journal.is_file():
        journal.unlink()
    elif journal.exists():
        old = staging.with_name(staging.name + "-old")
        journal.rename(old)
        shutil.rmtree(old)
    staging.rename(journal)


def example_session(session_id: str = "session-1", bundle_id: str = "project-1") -> SessionRecord:
    """A complete, valid record of a plain session, for examples and tests.

    Workspace ``default``, a stopped Codex session on template ``local`` with 8 CPUs and
    32 GiB, one copy-on-write mount and a local Podman target; nothing viewed, no error,
    no checkpoint (:func:`checkpointed_session` is one with a checkpoint).
    """
    return SessionRecord(
        id=session_id,
        workspace_id=DEFAULT_WORKSPACE_ID,
        title="test session",
        harness_kind=HarnessKind.CODEX,
        last_profile="codex",
        bundle_id=bundle_id,
        target_template_id="local",
        resource_allocation=ContainerAllocation(cpus=8, memory_bytes=32 * 1024**3),
        additional_mounts=[
            AdditionalMount(source="/host/cache", destination="/mnt/cache", access=MountAccess.COW)
        ],
        state=SessionState.STOPPED,
        target=LocalPodmanTarget(container_id="container-1"),
        native_session_id="native-1",
        acp_session_title="Agent title",
        created_at="2026-08-12T00:00:00Z",
        updated_at="2026-08-12T01:00:00Z",
    )


def checkpointed_session(
    session_id: str = "session-1", bundle_id: str = "project-1"
) -> SessionRecord:
    """:func:`example_session` as the origin's test fixture has it: viewed through event
    7, a checkpoint at frontier 6 (an archive that is not there, a made-up digest) and
    the error of a recovery that failed. For tests of checkpoints and their retention,
    and of a record's every field surviving the store; not a session to copy."""
    return msgspec.structs.replace(
        example_session(session_id, bundle_id),
        viewed_through_event_ordinal=7,
        last_checkpoint_error="temporary recovery failure",
        checkpoint=CheckpointMetadata(
            archive_path="sessions/test.hel.zip",
            sha256="a" * 64,
            created_at="2026-08-12T01:00:00Z",
            event_frontier=6,
        ),
    )
