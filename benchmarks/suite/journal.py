"""A generated, realistic format 2 relay journal, streamed to a ``.jsonl`` file.

The shapes follow ``examples/make_worker_root.py`` (what a worker really writes): the agent
starts and is configured; then prompt turns, each queued and started, with a streamed
thought, tool calls whose input streams in and whose output completes them, now and then
a permission question before a tool runs, a plan, a form question mid-turn, the streamed
answer (agent message chunks of four words with a ``messageId``) and the completion with
token usage. Between turns there are user shell commands, configuration changes and
scheduled checkpoints. Streamed chunks dominate, as in real sessions.

Deterministic for a given seed; the file is written line by line, so a 1M-event journal
never sits in memory.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.outcomes import TokenUsage, UsageScope
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V2,
    AgentInitialized,
    BarrierData,
    BeginCheckpointCommand,
    CheckpointCompletedOutcome,
    CheckpointReady,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    CompleteCheckpointCommand,
    ConfigurationUpdated,
    ElicitationRequested,
    ElicitationResolved,
    PromptCommand,
    PromptOutcome,
    RelayCommand,
    RelayCommandKind,
    RelayObservation,
    RunUserShellCommand,
    SessionConfigured,
    SessionOpened,
    SessionUpdate,
    UserShellOutcome,
    UserShellOutput,
    UserShellResult,
    UserShellStatus,
    encode_relay_event,
)
from relaystore.domain.runtime import (
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
)
from relaystore.testing import JournalBuilder

__all__ = ["JournalStats", "write_journal"]

_PROSE = (
    "the patch keeps every journal line verifiable while the projection catches up; run git "
    "status, then read src/main.rs and check the failing test — naïve → fixed ✓ cargo test "
    "-p mj-worker passes after the fixture is tracked and the schema revision is bumped to "
    "forty-two so the storage tests agree with the migration in storage/migrations"
)
_WORDS = tuple(_PROSE.split())
_TOOLS = (
    ("Bash", "execute", "command"),
    ("Read", "read", "path"),
    ("Edit", "edit", "path"),
    ("Search", "search", "pattern"),
)
_START_MS = 1_790_300_000_000


@dataclass
class JournalStats:
    """What was written: events, bytes and the mix of observation kinds."""

    path: Path
    events: int
    bytes: int
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def mean_line_bytes(self) -> float:
        return self.bytes / max(1, self.events)


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def _runtime() -> RuntimeIdentity:
    identity = RuntimeIdentity(
        harness=HarnessKind.CLAUDE,
        platform="x86_64-unknown-linux-gnu",
        provenance=RuntimeProvenance.MANAGED_INSTALLATION,
        components=[
            RuntimeComponent(name="claude-code", version="2.0.14"),
            RuntimeComponent(name="node", version="22.11.0"),
        ],
    )
    identity.refresh_id()
    return identity


Step = tuple[RelayObservation, str | None]  # an observation and its command id


class _Story:
    """The endless session: yields observations (and their command ids) in order."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ordinal = 0  # ordinals emitted so far (for checkpoint ``through``)
        self.ids: Counter[str] = Counter()

    def next_id(self, prefix: str) -> str:
        self.ids[prefix] += 1
        return f"{prefix}-{self.ids[prefix]}"

    def steps(self) -> Iterator[Step]:
        yield from self.start()
        turn = 0
        while True:
            turn += 1
            yield from self.prompt(turn)
            if turn % 7 == 0:
                yield from self.shell()
            if turn % 23 == 0:
                model = self.rng.choice(["claude-sonnet-4-5", "claude-opus-4-1"])
                yield ConfigurationUpdated.of(key="model", value=model), None
            if turn % 40 == 0:
                yield from self.checkpoint()

    def start(self) -> Iterator[Step]:
        yield (
            AgentInitialized.of(
                protocol_version=1,
                capabilities={
                    "loadSession": True,
                    "promptCapabilities": {"image": True, "embeddedContext": True},
                },
                agent_info={"name": "claude-code-acp", "version": "0.5.2"},
                runtime=_runtime(),
            ),
            None,
        )
        yield SessionOpened.of(native_session_id="native-bench", resumed=False), None
        yield (
            SessionConfigured.of(
                config_options=[
                    {
                        "id": "model",
                        "name": "Model",
                        "type": "select",
                        "currentValue": "claude-sonnet-4-5",
                        "options": [
                            {"value": v, "name": v}
                            for v in ("claude-sonnet-4-5", "claude-opus-4-1")
                        ],
                    }
                ]
            ),
            None,
        )

    def queued(self, command_id: str, command: RelayCommand) -> Iterator[Step]:
        yield (
            CommandQueued.of(
                command_id=command_id,
                command=command,
                created_at_ms=_START_MS + self.ordinal,
            ),
            command_id,
        )
        yield (
            CommandStarted.of(command_id=command_id, started_at_ms=_START_MS + self.ordinal),
            command_id,
        )

    def say(self, text: str, *, thought: bool) -> Iterator[Step]:
        kind = "agent_thought_chunk" if thought else "agent_message_chunk"
        message_id = self.next_id("thought" if thought else "msg")
        words = text.split(" ")
        for index in range(0, len(words), 4):
            piece = " ".join(words[index : index + 4])
            if index + 4 < len(words):
                piece += " "
            update = {
                "sessionUpdate": kind,
                "content": {"type": "text", "text": piece},
                "messageId": message_id,
            }
            yield SessionUpdate.of(update=update), None

    def prompt(self, turn: int) -> Iterator[Step]:
        rng = self.rng
        command_id = self.next_id("prompt")
        prompt = PromptCommand.of(prompt=[{"type": "text", "text": _text(rng, 6, 40)}])
        yield from self.queued(command_id, prompt)
        if turn % 3 == 1:
            entries = [
                {"content": _text(rng, 3, 8), "priority": "high", "status": status}
                for status in ("completed", "in_progress", "pending")
            ]
            yield SessionUpdate.of(update={"sessionUpdate": "plan", "entries": entries}), None
        yield from self.say(_text(rng, 8, 60), thought=True)
        for _ in range(rng.randint(1, 4)):
            yield from self.tool()
        if turn % 6 == 0:
            yield from self.question()
        yield from self.say(_text(rng, 20, 240), thought=False)
        tokens = rng.randint(2_000, 90_000)
        usage = TokenUsage(
            scope=UsageScope.TURN,
            total_tokens=tokens,
            input_tokens=tokens * 9 // 10,
            output_tokens=tokens - tokens * 9 // 10,
            cached_read_tokens=tokens // 2,
        )
        outcome = PromptOutcome.of(stop_reason="end_turn", usage=usage)
        yield (
            CommandCompleted.of(
                command=RelayCommandKind.PROMPT, command_id=command_id, outcome=outcome
            ),
            command_id,
        )

    def tool(self) -> Iterator[Step]:
        rng = self.rng
        title, kind, key = rng.choice(_TOOLS)
        call_id = f"call_{self.next_id('tool')}"
        argument = _text(rng, 2, 10)
        yield (
            SessionUpdate.of(
                update={
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": title,
                    "kind": kind,
                    "content": [{"type": "content", "content": {"type": "text", "text": ""}}],
                }
            ),
            None,
        )
        streamed = f'{{"{key}": "{argument}"}}'
        if rng.random() < 0.5:
            for end in range(8, len(streamed) + 8, 8):
                update = {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "in_progress",
                    "content": [
                        {"type": "content", "content": {"type": "text", "text": streamed[:end]}}
                    ],
                }
                yield SessionUpdate.of(update=update), None
        if kind == "execute" and rng.random() < 0.25:
            yield from self.elicit(
                self.next_id("tool-permission"),
                f"Claude Code requests permission:\n{title}",
                {
                    "choice": {
                        "type": "string",
                        "title": "Permission",
                        "oneOf": [
                            {"const": "approve_once", "title": "Approve once"},
                            {"const": "approve_always", "title": "Approve for this session"},
                            {"const": "reject", "title": "Reject"},
                        ],
                    }
                },
                required=["choice"],
            )
        yield (
            SessionUpdate.of(
                update={
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "in_progress",
                    "rawInput": {key: argument},
                }
            ),
            None,
        )
        output = _text(rng, 3, 120)
        yield (
            SessionUpdate.of(
                update={
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "completed",
                    "rawOutput": {"output": output},
                    "content": [{"type": "content", "content": {"type": "text", "text": output}}],
                }
            ),
            None,
        )

    def question(self) -> Iterator[Step]:
        yield from self.elicit(
            self.next_id("question"),
            "Which directory should the migration scripts go in?",
            {
                "answer": {"type": "string", "title": "Directory", "minLength": 1},
                "remember": {
                    "type": "boolean",
                    "title": "Use this for the rest of the session",
                    "default": False,
                },
            },
            required=["answer"],
        )

    def elicit(
        self, request_id: str, message: str, properties: dict[str, object], *, required: list[str]
    ) -> Iterator[Step]:
        request = parse_acp_request(
            request_id,
            {
                "mode": "form",
                "sessionId": "native-bench",
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                },
            },
        )
        yield ElicitationRequested.of(request=request), None
        yield ElicitationResolved.of(elicitation_id=request.id, action="accept"), None

    def shell(self) -> Iterator[Step]:
        command_id = self.next_id("shell")
        command = self.rng.choice(["git status --short", "python -m pytest -q tests/storage"])
        stdout = _text(self.rng, 2, 30) + "\n"
        yield from self.queued(command_id, RunUserShellCommand.of(command=command))
        yield (
            UserShellOutput.of(
                command_id=command_id,
                command=command,
                stdout=stdout,
                stderr="",
                stdout_truncated=False,
                stderr_truncated=False,
            ),
            command_id,
        )
        result = UserShellResult(
            command=command,
            stdout=stdout,
            stderr="",
            exit_code=0,
            duration_ms=190,
            status=UserShellStatus.EXITED,
        )
        yield (
            CommandCompleted.of(
                command=RelayCommandKind.RUN_USER_SHELL,
                command_id=command_id,
                outcome=UserShellOutcome.of(result=result),
            ),
            command_id,
        )

    def checkpoint(self) -> Iterator[Step]:
        barrier = self.next_id("checkpoint")
        yield from self.queued(barrier, BeginCheckpointCommand.of(reason="scheduled"))
        yield CheckpointReady.of(command_id=barrier, through=self.ordinal), barrier
        complete = f"{barrier}-complete"
        yield from self.queued(
            complete, CompleteCheckpointCommand(data=BarrierData(barrier_command_id=barrier))
        )
        yield (
            CommandCompleted.of(
                barrier_command_id=barrier,
                command=RelayCommandKind.COMPLETE_CHECKPOINT,
                command_id=complete,
                outcome=CheckpointCompletedOutcome.of(),
            ),
            complete,
        )


_BUILDER_EVENTS = 4096
"""Events one test-kit builder holds before the next carries the journal on."""


def write_journal(path: Path, events: int, *, seed: int = 7) -> JournalStats:
    """Write ``events`` format 2 journal lines (ordinals from 1) to ``path``."""
    rng = random.Random(seed)
    story = _Story(rng)
    stats = JournalStats(path=path, events=events, bytes=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    builder = JournalBuilder(format=RELAY_EVENT_FORMAT_V2)
    with path.open("wb", buffering=1 << 20) as out:
        for ordinal, (observation, command_id) in enumerate(story.steps(), start=1):
            if ordinal > events:
                break
            story.ordinal = ordinal
            if len(builder.events) >= _BUILDER_EVENTS:  # bounded: a new builder carries on
                builder = JournalBuilder(format=RELAY_EVENT_FORMAT_V2, after=builder.frontier)
            event = builder.add(observation, command_id=command_id, at_ms=_START_MS + ordinal * 41)
            line = encode_relay_event(event) + b"\n"
            out.write(line)
            stats.bytes += len(line)
            kind = type(observation).__name__
            if isinstance(observation, SessionUpdate):
                kind = str(observation.data.update.get("sessionUpdate"))
            stats.kinds[kind] += 1
    return stats
