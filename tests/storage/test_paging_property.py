"""Property: paging with any limit and filter, across interleaved writes and deletes,
yields exactly what one full scan returns."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from hypothesis import given, settings, strategies as st

from relaystore.domain.api_events import ApiEvent, ApiEventFilter, ApiSessionFault
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.paging import clamp_page_limit
from relaystore.storage.connection import open_writer
from relaystore.storage.events import insert_api_events
from relaystore.storage.paging import load_api_events
from relaystore.storage.sessions import delete_session, save_session
from tests.storage.builders import running_session, scan

SESSIONS = ["s0", "s1", "s2", "s3", "s4"]
WORKSPACES = {sid: f"w{index % 3}" for index, sid in enumerate(SESSIONS)}

Write = tuple[str, int, int]  # ("write", session index, how many)
Delete = tuple[str, int]
Page = tuple[str, int]  # ("page", limit)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 4), st.integers(1, 6)),
        st.tuples(st.just("delete"), st.integers(0, 4)),
        st.tuples(st.just("page"), st.one_of(st.integers(-1, 7), st.just(5000))),
    ),
    max_size=40,
)
filters = st.builds(
    ApiEventFilter,
    session_id=st.one_of(st.none(), st.sampled_from([*SESSIONS, "unknown"])),
    workspace_id=st.one_of(st.none(), st.sampled_from(["w0", "w1", "w2", "nowhere"])),
)


@dataclass
class Model:
    """What the feed should hold: every event ever written, which were deleted with their
    session, and which sessions live."""

    events: list[ApiEvent] = field(default_factory=list)
    gone: set[int] = field(default_factory=set)
    alive: set[str] = field(default_factory=set)

    def delete(self, session_id: str) -> None:
        self.alive.discard(session_id)
        self.gone.update(event.seq for event in self.events if event.session_id == session_id)

    def visible(self, event_filter: ApiEventFilter, after: int) -> list[ApiEvent]:
        return [
            event
            for event in self.events
            if event.seq > after
            and event.seq not in self.gone
            and event_filter.session_id in (None, event.session_id)
            and event_filter.workspace_id in (None, WORKSPACES[event.session_id])
        ]


def fault(seq: int) -> ApiSessionFault:
    return ApiSessionFault.of(
        reason=OutcomeReason.RUNTIME_UNAVAILABLE, message=f"event {seq}", command_id=None
    )


@settings(max_examples=120, deadline=None)
@given(ops=operations, event_filter=filters, final_limit=st.integers(1, 9))
def test_paging_concatenates_to_one_full_scan(
    ops: list[Write | Delete | Page], event_filter: ApiEventFilter, final_limit: int
) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        open_writer(Path(directory) / "store.sqlite3", synchronous="OFF") as writer,
    ):
        db = writer.connection
        model = Model()
        seen: list[ApiEvent] = []
        cursor = 0

        def page(limit: int) -> int:
            """Read one page, check it against the model, return how many it held."""
            nonlocal cursor
            result = load_api_events(db, event_filter, cursor, limit)
            expected = model.visible(event_filter, cursor)[: clamp_page_limit(limit)]
            assert result.events == expected
            assert result.latest_seq == len(model.events)
            assert result.next_after_seq == (
                expected[-1].seq if expected else max(result.latest_seq, cursor)
            )
            assert result.next_after_seq >= cursor
            seen.extend(result.events)
            cursor = result.next_after_seq
            return len(result.events)

        for op in ops:
            if op[0] == "write":
                _, index, count = op  # type: ignore[misc]
                sid = SESSIONS[index]
                if sid not in model.alive:
                    record = msgspec.structs.replace(
                        running_session(sid), workspace_id=WORKSPACES[sid]
                    )
                    save_session(db, record)
                    model.alive.add(sid)
                rows = []
                for _ in range(count):
                    seq = len(model.events) + 1
                    rows.append((sid, seq * 10, fault(seq)))
                    model.events.append(
                        ApiEvent.of(
                            seq=seq, session_id=sid, recorded_at_ms=seq * 10, event=fault(seq)
                        )
                    )
                insert_api_events(db, rows)
            elif op[0] == "delete":
                sid = SESSIONS[op[1]]
                delete_session(db, sid)
                model.delete(sid)
            else:
                page(op[1])

        while page(final_limit):
            pass
        assert cursor == len(model.events)

        full = scan(db, event_filter)
        assert full == model.visible(event_filter, 0)
        assert [event for event in seen if event.seq not in model.gone] == full
        seqs = [event.seq for event in seen]
        assert seqs == sorted(set(seqs))
