"""Write realistic mj-worker roots for relaystore to replay and verify.

Usage: ``python examples/make_worker_root.py [OUT_DIR]`` (default: ``examples/worker-root``
beside this script). Each session becomes ``OUT_DIR/<session id>/`` holding
``relay-state.json`` and ``relay-journal/`` (sealed ``segment-*.jsonl.gz`` files plus
``active.jsonl``), as a worker leaves them on disk.

Guarantees: the output is deterministic (fixed clock and ids, gzip with ``mtime=0`` and no
file name), so running the script again reproduces the committed files byte for byte, and
every journal verifies clean (``relaystore verify OUT_DIR/<session id>``). Segments are
sealed every few KiB instead of every MiB, to keep the data small but multi-segment.

The sessions:

* ``7c1e9a52-…`` (Kimi): an older worker build writes chained format 1 events (prompts
  with streamed answers and tool calls, a shell command); it restarts mid-turn, and the
  new build writes format 2 (runtime re-resolved, the turn interrupted with
  ``worker_restarted``, a permission question, a checkpoint barrier).
* ``b4d2f0e8-…`` (Codex): a free-text question answered mid-turn, a failing shell
  command, a plan, a checkpoint barrier.
* ``e9a7c3b1-…`` (Claude): the worker crashed while sealing, after writing a segment but
  before emptying ``active.jsonl``; after the restart the next seal wrote a segment over
  the same events and more, so two segments overlap (a reader takes the longer one). The
  crash also left a ``*.new`` temporary and a ``stale-active-*`` leftover, which a reader
  must ignore.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.outcomes import OutcomeReason, TokenUsage, UsageScope
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_FORMAT_V2,
    AgentInitialized,
    BarrierData,
    BeginCheckpointCommand,
    CheckpointCompletedOutcome,
    CheckpointReady,
    CommandCompleted,
    CommandInterrupted,
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
    RelayEvent,
    RelayObservation,
    RunUserShellCommand,
    SessionConfigured,
    SessionOpened,
    SessionRestarted,
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
from relaystore.domain.wire import JSON
from relaystore.domain.worker_root import (
    ACTIVE_JOURNAL_NAME,
    JOURNAL_DIR_NAME,
    RELAY_STATE_NAME,
    segment_name,
)
from relaystore.testing import JournalBuilder

__all__ = ["SESSION_IDS", "main", "write_worker_roots"]

SEAL_BYTES = 6 * 1024
"""Seal ``active.jsonl`` before an append once it holds this much (the worker uses 1 MiB)."""
PLATFORM = "x86_64-unknown-linux-gnu"
SESSION_IDS = (
    "7c1e9a52-3f4b-4d7e-9a31-0b6f2d8c4e15",
    "b4d2f0e8-1a6c-4e39-8f57-2c9d3b7e6a04",
    "e9a7c3b1-5d2f-4a86-b0c4-7f1e8d2a9c63",
)


def _gzip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as out:
        out.write(data)
    return buffer.getvalue()


def _runtime(harness: HarnessKind, name: str, version: str) -> RuntimeIdentity:
    identity = RuntimeIdentity(
        harness=harness,
        platform=PLATFORM,
        provenance=RuntimeProvenance.MANAGED_INSTALLATION,
        components=[
            RuntimeComponent(name=name, version=version),
            RuntimeComponent(name="node", version="22.11.0"),
        ],
    )
    identity.refresh_id()
    return identity


def _text(text: str) -> JSON:
    return {"type": "text", "text": text}


class Worker:
    """A simulated worker: a clock, a journal with sealing, and the session's story."""

    def __init__(self, root: Path, session_id: str, *, start_ms: int, fmt: int) -> None:
        self.root = root
        self.session_id = session_id
        self.now_ms = start_ms
        self.format = fmt
        self.builder = JournalBuilder(format=fmt, start_ms=start_ms)
        """The chain: ordinals, links and digests are the test kit's."""
        self.active = bytearray()
        self.active_first = 1
        self.native_session_id = f"native-{session_id[:8]}"
        self.journal = root / JOURNAL_DIR_NAME
        self.journal.mkdir(parents=True)
        self.lines: dict[int, bytes] = {}
        self._ids: dict[str, int] = {}

    # -- journal ------------------------------------------------------------------------

    def tick(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms

    def next_id(self, prefix: str) -> str:
        count = self._ids.get(prefix, 0) + 1
        self._ids[prefix] = count
        return f"{prefix}-{count}"

    def emit(
        self, observation: RelayObservation, *, command_id: str | None = None, after_ms: int = 40
    ) -> RelayEvent:
        self.tick(after_ms)
        if len(self.active) >= SEAL_BYTES:
            self.seal()
        self.builder.format = self.format
        event = self.builder.add(observation, command_id=command_id, at_ms=self.now_ms)
        line = encode_relay_event(event) + b"\n"
        self.active += line
        self.lines[event.ordinal] = line
        return event

    @property
    def ordinal(self) -> int:
        """The last event's ordinal (0 before any)."""
        return self.builder.frontier.ordinal

    @property
    def digest(self) -> str:
        """The last event's digest (genesis before any)."""
        return self.builder.frontier.digest

    def seal(self, *, crash: bool = False) -> None:
        """Gzip ``active.jsonl`` into a segment; ``crash`` keeps active as it was."""
        last = self.ordinal
        name = segment_name(self.active_first, last)
        (self.journal / name).write_bytes(_gzip(bytes(self.active)))
        if crash:
            return
        self.active = bytearray()
        self.active_first = last + 1

    def finish(self) -> None:
        (self.journal / ACTIVE_JOURNAL_NAME).write_bytes(bytes(self.active))
        state = {
            "format_version": 7,
            "session_id": self.session_id,
            "latest_ordinal": self.ordinal,
            "latest_digest": self.digest,
        }
        (self.root / RELAY_STATE_NAME).write_text(json.dumps(state, indent=2) + "\n")

    # -- the story ------------------------------------------------------------------------

    def update(self, update: JSON, *, after_ms: int = 40) -> RelayEvent:
        return self.emit(SessionUpdate.of(update=update), after_ms=after_ms)

    def start_agent(
        self, runtime: RuntimeIdentity, agent: str, version: str, *, resumed: bool = False
    ) -> None:
        self.emit(
            AgentInitialized.of(
                protocol_version=1,
                capabilities={
                    "loadSession": True,
                    "promptCapabilities": {"image": True, "embeddedContext": True},
                },
                agent_info={"name": agent, "version": version},
                runtime=runtime,
            ),
            after_ms=900,
        )
        self.emit(
            SessionOpened.of(native_session_id=self.native_session_id, resumed=resumed),
            after_ms=350,
        )

    def configure(self, model: str, models: Sequence[str]) -> None:
        self.emit(
            SessionConfigured.of(
                config_options=[
                    {
                        "id": "model",
                        "name": "Model",
                        "type": "select",
                        "currentValue": model,
                        "options": [{"value": value, "name": value} for value in models],
                    },
                    {
                        "id": "mode",
                        "name": "Mode",
                        "type": "select",
                        "currentValue": "default",
                        "options": [
                            {"value": "default", "name": "Default"},
                            {"value": "plan", "name": "Plan"},
                        ],
                    },
                ]
            ),
            after_ms=20,
        )

    def queue(self, command_id: str, command: RelayCommand, *, after_ms: int = 1500) -> None:
        created = self.tick(after_ms)
        self.emit(
            CommandQueued.of(command_id=command_id, command=command, created_at_ms=created),
            command_id=command_id,
            after_ms=3,
        )

    def start(self, command_id: str) -> None:
        started = self.tick(15)
        self.emit(
            CommandStarted.of(command_id=command_id, started_at_ms=started),
            command_id=command_id,
            after_ms=1,
        )

    def begin_prompt(self, text: str) -> str:
        command_id = self.next_id("prompt")
        self.queue(command_id, PromptCommand.of(prompt=[_text(text)]))
        self.start(command_id)
        return command_id

    def say(self, text: str, *, thought: bool = False) -> None:
        """Stream ``text`` as agent message (or thought) chunks of a few words each."""
        kind = "agent_thought_chunk" if thought else "agent_message_chunk"
        message_id = self.next_id("thought" if thought else "msg")
        words = text.split(" ")
        for index in range(0, len(words), 4):
            piece = " ".join(words[index : index + 4])
            if index + 4 < len(words):
                piece += " "
            self.update(
                {"sessionUpdate": kind, "content": _text(piece), "messageId": message_id},
                after_ms=55,
            )

    def tool(
        self,
        title: str,
        kind: str,
        raw_input: JSON,
        output: str,
        *,
        streamed_input: str | None = None,
        permission: bool = False,
    ) -> None:
        call_id = f"call_{self.session_id[:4]}{self.ordinal:04d}"
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": title,
                "kind": kind,
                "content": [{"type": "content", "content": _text("")}],
            },
            after_ms=120,
        )
        if streamed_input is not None:
            for end in range(8, len(streamed_input) + 8, 8):
                self.update(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "in_progress",
                        "content": [{"type": "content", "content": _text(streamed_input[:end])}],
                    },
                    after_ms=30,
                )
        if permission:
            self.permission(title)
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "in_progress",
                "rawInput": raw_input,
            },
            after_ms=60,
        )
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "completed",
                "rawOutput": {"output": output},
                "content": [{"type": "content", "content": _text(output)}],
            },
            after_ms=700,
        )

    def permission(self, title: str) -> None:
        self.elicit(
            self.next_id("tool-permission"),
            f"Kimi Code requests permission:\n{title}",
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
            shown_ms=80,
            answered_ms=4200,
        )

    def question(self, message: str, field_title: str) -> None:
        self.elicit(
            self.next_id("question"),
            message,
            {
                "answer": {"type": "string", "title": field_title, "minLength": 1},
                "remember": {
                    "type": "boolean",
                    "title": "Use this for the rest of the session",
                    "default": False,
                },
            },
            required=["answer"],
            shown_ms=90,
            answered_ms=21000,
        )

    def elicit(
        self,
        request_id: str,
        message: str,
        properties: JSON,
        *,
        required: list[str],
        shown_ms: int,
        answered_ms: int,
    ) -> None:
        """Ask a form question ``shown_ms`` from now; it is accepted ``answered_ms`` later."""
        request = parse_acp_request(
            request_id,
            {
                "mode": "form",
                "sessionId": self.native_session_id,
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                },
            },
        )
        self.emit(ElicitationRequested.of(request=request), after_ms=shown_ms)
        self.emit(
            ElicitationResolved.of(elicitation_id=request.id, action="accept"),
            after_ms=answered_ms,
        )

    def end_prompt(self, command_id: str, *, tokens: int, kind: bool = True) -> None:
        self.emit(
            CommandCompleted.of(
                command=RelayCommandKind.PROMPT if kind else None,
                command_id=command_id,
                outcome=PromptOutcome.of(
                    stop_reason="end_turn",
                    usage=TokenUsage(
                        scope=UsageScope.TURN,
                        total_tokens=tokens,
                        input_tokens=tokens * 9 // 10,
                        output_tokens=tokens - tokens * 9 // 10,
                        cached_read_tokens=tokens // 2,
                    ),
                ),
            ),
            command_id=command_id,
            after_ms=200,
        )

    def shell(self, command: str, stdout: str, stderr: str = "", *, exit_code: int = 0) -> None:
        command_id = self.next_id("shell")
        self.queue(command_id, RunUserShellCommand.of(command=command), after_ms=2500)
        self.start(command_id)
        self.emit(
            UserShellOutput.of(
                command_id=command_id,
                command=command,
                stdout=stdout,
                stderr=stderr,
                stdout_truncated=False,
                stderr_truncated=False,
            ),
            command_id=command_id,
            after_ms=180,
        )
        result = UserShellResult(
            command=command,
            stdout=stdout,
            stderr=stderr,
            exit_code=exit_code,
            duration_ms=190,
            status=UserShellStatus.EXITED,
        )
        self.emit(
            CommandCompleted.of(
                command=RelayCommandKind.RUN_USER_SHELL,
                command_id=command_id,
                outcome=UserShellOutcome.of(result=result),
            ),
            command_id=command_id,
            after_ms=10,
        )

    def checkpoint(self) -> None:
        barrier = self.next_id("checkpoint")
        self.queue(barrier, BeginCheckpointCommand.of(reason="scheduled"), after_ms=30000)
        self.start(barrier)
        self.emit(
            CheckpointReady.of(command_id=barrier, through=self.ordinal),
            command_id=barrier,
            after_ms=25,
        )
        complete = f"{barrier}-complete"
        self.queue(
            complete,
            CompleteCheckpointCommand(data=BarrierData(barrier_command_id=barrier)),
            after_ms=2400,
        )
        self.start(complete)
        self.emit(
            CommandCompleted.of(
                barrier_command_id=barrier,
                command=RelayCommandKind.COMPLETE_CHECKPOINT,
                command_id=complete,
                outcome=CheckpointCompletedOutcome.of(),
            ),
            command_id=complete,
            after_ms=30,
        )


# -- the sessions -------------------------------------------------------------------------


def _kimi_session(root: Path, session_id: str) -> None:
    worker = Worker(root, session_id, start_ms=1_790_270_000_000, fmt=RELAY_EVENT_FORMAT_V1)
    worker.start_agent(_runtime(HarnessKind.KIMI, "kimi-cli", "1.3.0"), "Kimi Code", "1.3.0")
    worker.configure("kimi-k2-0905", ["kimi-k2-0905", "kimi-k2-turbo"])

    prompt = worker.begin_prompt("Why does `cargo test -p mj-worker` fail on a clean checkout?")
    worker.say("Let me look at the failing test first.", thought=True)
    worker.tool(
        "Bash",
        "execute",
        {"command": "cargo test -p mj-worker 2>&1 | tail -20"},
        "test relay::tests::seals_active_journal ... FAILED\nthread panicked at "
        "'fixture missing: testdata/kimi_bash_permission.jsonl'",
        streamed_input='{"command": "cargo test -p mj-worker 2>&1 | tail -20"}',
    )
    worker.tool("Read testdata", "read", {"path": "mj-worker/src/acp/testdata"}, "(empty)")
    worker.say(
        "The test reads `testdata/kimi_bash_permission.jsonl`, which is ignored by a "
        "`*.jsonl` rule in `.gitignore`, so a clean checkout never has it. Add an exception "
        "`!mj-worker/src/acp/testdata/*.jsonl` and commit the fixture."
    )
    worker.end_prompt(prompt, tokens=18234, kind=False)

    worker.shell("git status --short", " M .gitignore\n?? mj-worker/src/acp/testdata/\n")
    worker.emit(ConfigurationUpdated.of(key="model", value="kimi-k2-turbo"), after_ms=3000)

    prompt = worker.begin_prompt("Commit the fixture and rerun the worker tests.")
    worker.say("Committing the fixture, then running the tests again.")
    worker.tool(
        "Bash",
        "execute",
        {"command": "git add .gitignore mj-worker/src/acp/testdata && git commit -m fixture"},
        "[main 4f2a9c1] fixture\n 2 files changed, 21 insertions(+)",
    )
    worker.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_restart0001",
            "title": "Bash",
            "kind": "execute",
            "status": "in_progress",
            "rawInput": {"command": "cargo test -p mj-worker"},
        },
        after_ms=150,
    )

    # The host upgrades the worker mid-turn: the new build journals format 2.
    worker.format = RELAY_EVENT_FORMAT_V2
    worker.emit(SessionRestarted.of(), after_ms=8000)
    worker.start_agent(
        _runtime(HarnessKind.KIMI, "kimi-cli", "1.4.2"), "Kimi Code", "1.4.2", resumed=True
    )
    worker.emit(
        CommandInterrupted.of(
            reason=OutcomeReason.WORKER_RESTARTED,
            command_id=prompt,
            command=RelayCommandKind.PROMPT,
            message="the worker restarted while this prompt was running; send it again to retry",
        ),
        command_id=prompt,
        after_ms=30,
    )

    prompt = worker.begin_prompt("Run the worker tests again, please.")
    worker.tool(
        "Bash",
        "execute",
        {"command": "cargo test -p mj-worker"},
        "test result: ok. 214 passed; 0 failed; 3 ignored",
        streamed_input='{"command": "cargo test -p mj-worker"}',
        permission=True,
    )
    worker.say("All 214 worker tests pass now; the fixture is tracked.")
    worker.end_prompt(prompt, tokens=9120)
    worker.checkpoint()
    worker.finish()


def _codex_session(root: Path, session_id: str) -> None:
    worker = Worker(root, session_id, start_ms=1_790_281_500_000, fmt=RELAY_EVENT_FORMAT_V2)
    worker.start_agent(_runtime(HarnessKind.CODEX, "codex", "0.46.0"), "codex-acp", "0.3.1")
    worker.configure("gpt-5-codex", ["gpt-5-codex", "gpt-5"])

    prompt = worker.begin_prompt("Add a migration that indexes api_events by session.")
    worker.update(
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Find the schema module", "priority": "high", "status": "completed"},
                {"content": "Write the migration step", "priority": "high", "status": "pending"},
                {"content": "Run the storage tests", "priority": "medium", "status": "pending"},
            ],
        }
    )
    worker.tool("Search migrations", "search", {"pattern": "CREATE INDEX"}, "storage/tables.sql:41")
    worker.question("Which directory should the migration scripts go in?", "Directory")
    worker.tool(
        "Edit storage/migrations/0042_api_events_session.sql",
        "edit",
        {"path": "storage/migrations/0042_api_events_session.sql"},
        "CREATE INDEX api_events_session ON api_events(session_id, seq);",
    )
    worker.say(
        "Added `0042_api_events_session.sql` under `storage/migrations`, which creates "
        "`api_events_session` on `(session_id, seq)`."
    )
    worker.end_prompt(prompt, tokens=25410)

    worker.shell(
        "python -m pytest -q tests/storage",
        "F..\n",
        "FAILED tests/storage/test_schema.py::test_revision - assert 41 == 42\n",
        exit_code=1,
    )
    prompt = worker.begin_prompt("The schema revision test fails; bump the revision too.")
    worker.tool(
        "Edit storage/schema.py",
        "edit",
        {"path": "storage/schema.py"},
        "SCHEMA_REVISION = 42",
    )
    worker.say("Bumped `SCHEMA_REVISION` to 42; the storage tests pass.")
    worker.end_prompt(prompt, tokens=7311)
    worker.shell("python -m pytest -q tests/storage", "...\n3 passed in 0.41s\n")
    worker.checkpoint()
    worker.finish()


def _claude_session(root: Path, session_id: str) -> None:
    worker = Worker(root, session_id, start_ms=1_790_293_000_000, fmt=RELAY_EVENT_FORMAT_V2)
    worker.start_agent(
        _runtime(HarnessKind.CLAUDE, "claude-code", "2.0.14"), "claude-code-acp", "0.5.2"
    )
    worker.configure("claude-sonnet-4-5", ["claude-sonnet-4-5", "claude-opus-4-1"])

    for number, (ask, answer) in enumerate(
        [
            (
                "Summarise what the relay journal GC keeps.",
                "After an acknowledgement and a verified checkpoint, the journal keeps only "
                "the events after the lower of the acknowledged ordinal and the recovery "
                "floor, and deletes every sealed segment.",
            ),
            (
                "And what happens to a torn final line?",
                "A final line without its newline is a write cut short: a strict reader "
                "stops before it, and startup repair truncates it.",
            ),
            (
                "List the files a worker root holds.",
                "relay-state.json, relay-journal/, and optionally relay-seed.json, worker.pid, "
                "worker-startup.json, worker-exit.json and native-session.json.",
            ),
        ],
        start=1,
    ):
        prompt = worker.begin_prompt(ask)
        worker.say("Checking the journal module.", thought=True)
        worker.tool(
            f"Read mj-worker/src/relay/journal.rs ({number})",
            "read",
            {"path": "mj-worker/src/relay/journal.rs", "offset": number * 200},
            f"// journal.rs lines {number * 200}-{number * 200 + 80}",
        )
        worker.say(answer)
        worker.end_prompt(prompt, tokens=4000 + number * 731)
        if number == 2:
            # The worker crashed after writing a segment but before emptying active.jsonl;
            # the next seal covers the same events again, so the two segments overlap.
            stale_first = worker.active_first
            worker.seal(crash=True)
            stale = b"".join(worker.lines[o] for o in range(stale_first, worker.ordinal + 1))
            torn = worker.lines[worker.ordinal][:57]
            name = f"stale-active-{stale_first:020}-{worker.ordinal:020}.jsonl"
            (worker.journal / name).write_bytes(stale[: -len(worker.lines[worker.ordinal])] + torn)
            # A seal interrupted while compressing leaves a temporary behind.
            partial = _gzip(stale)[:200]
            temp = f"segment-{stale_first:020}-{worker.ordinal:020}.jsonl.gz.new"
            (worker.journal / temp).write_bytes(partial)
            worker.emit(SessionRestarted.of(), after_ms=4000)
            worker.start_agent(
                _runtime(HarnessKind.CLAUDE, "claude-code", "2.0.14"),
                "claude-code-acp",
                "0.5.2",
                resumed=True,
            )
    worker.shell("ls relay-journal", "active.jsonl\nsegment-00000000000000000001.jsonl.gz\n")
    worker.checkpoint()
    worker.finish()


_SESSIONS = (_kimi_session, _codex_session, _claude_session)


def write_worker_roots(out_dir: Path) -> list[Path]:
    """Write every example session under ``out_dir``, replacing earlier copies of them."""
    roots: list[Path] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for session_id, build in zip(SESSION_IDS, _SESSIONS, strict=True):
        root = out_dir / session_id
        if root.exists():
            shutil.rmtree(root)
        build(root, session_id)
        roots.append(root)
    return roots


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: ``make_worker_root.py [OUT_DIR]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or any(arg.startswith("-") for arg in args):
        print("usage: python examples/make_worker_root.py [OUT_DIR]", file=sys.stderr)
        return 2
    out_dir = Path(args[0]) if args else Path(__file__).resolve().parent / "worker-root"
    for root in write_worker_roots(out_dir):
        print(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
