"""A session's usage pages: recorded turns by completion ordinal, totals and coverage.

Owns the statements over ``session_turn_usage`` and ``session_provider_cost`` and their
two replies: decoded (:func:`load_usage_page`) or with each stored turn and the cost
passed through as stored JSON (:func:`load_raw_usage_page`, what ``GET .../usage``
answers). Both read one snapshot through the same rows. What the rows mean is the
domain's: :func:`~relaystore.domain.usage.usage_coverage` and
:func:`~relaystore.domain.usage.usage_totals` (storage counts turns by scope and sums the
counters of :data:`~relaystore.domain.usage.TOTALLED_SCOPE`), the cursor
:func:`~relaystore.domain.paging.next_page_cursor`. Usage rows outlive their session
(revision 6): a page answers for a deleted session whose context remains; ``None``: the
store never knew the session.
"""

from __future__ import annotations

from typing import Any

import apsw
import msgspec

from ...domain.errors import ProjectionError
from ...domain.outcomes import ProviderCost
from ...domain.paging import DEFAULT_PAGE_LIMIT, check_after_seq, clamp_page_limit, next_page_cursor
from ...domain.read_replies import RawUsagePage, UsageCounterTotal, UsageCoverage, UsagePage
from ...domain.usage import TOTALLED_SCOPE, USAGE_COUNTERS, usage_coverage, usage_totals
from ..stored_columns import TURN_OUTCOME_DECODER, decode_stored, raw_stored
from ..transaction import transaction

__all__ = ["load_raw_usage_page", "load_usage_page"]

_PROVIDER_COST = msgspec.json.Decoder(ProviderCost)

_SCOPE_COUNTS = (
    "SELECT json_extract(body, '$.usage.scope'), count(*) FROM session_turn_usage"
    " WHERE session_id = ? GROUP BY 1"
)
"""The number of recorded turns of each report scope."""
_COUNTER_SUMS = (
    "SELECT "
    + ", ".join(
        f"sum(json_extract(body, '$.usage.{counter}')),"
        f" count(json_extract(body, '$.usage.{counter}'))"
        for counter in USAGE_COUNTERS
    )
    + " FROM session_turn_usage WHERE session_id = ?1 AND json_extract(body, '$.usage.scope') = ?2"
)
"""Each counter's sum and how many reports carry it, over the reports of one scope."""


class _UsageRows(msgspec.Struct, kw_only=True):
    """What one usage page reads, in one snapshot: turn bodies and cost still stored JSON."""

    latest: int
    bodies: list[str]
    last_ordinal: int | None
    coverage: UsageCoverage
    totals: dict[str, UsageCounterTotal]
    cost: str | None

    def summary(self, session_id: str, after_seq: int) -> dict[str, Any]:
        """The page's fields besides its turns and cost: the cursor after it (its last
        turn's ordinal, else the newest seen), the newest, totals and coverage."""
        last = self.last_ordinal
        return {
            "session_id": session_id,
            "next_after_seq": next_page_cursor(after_seq, self.latest, last),
            "latest_seq": self.latest,
            "totals": self.totals,
            "coverage": self.coverage,
        }


def _usage_rows(
    connection: apsw.Connection, session_id: str, after_seq: int, limit: int
) -> _UsageRows | None:
    check_after_seq(after_seq)
    with transaction(connection, f"load the usage of session {session_id}"):
        known = connection.execute(
            "SELECT 1 FROM session_contexts WHERE session_id = ?", (session_id,)
        ).fetchone()
        if known is None:
            return None
        bad = connection.execute(
            "SELECT command_id FROM session_turn_usage WHERE session_id = ? AND NOT json_valid(body)"
            " LIMIT 1",
            (session_id,),
        ).fetchone()
        if bad is not None:  # the totals below read every row's JSON
            raise ProjectionError(
                f"stored turn usage of command {bad[0]!r} does not decode: it is not JSON",
                session_id=session_id,
            )
        latest = int(
            connection.execute(
                "SELECT COALESCE(max(completed_ordinal), 0) FROM session_turn_usage"
                " WHERE session_id = ?",
                (session_id,),
            ).get
        )
        page = connection.execute(
            "SELECT body, completed_ordinal FROM session_turn_usage"
            " WHERE session_id = ? AND completed_ordinal > ? ORDER BY completed_ordinal LIMIT ?",
            (session_id, after_seq, clamp_page_limit(limit)),
        ).fetchall()
        coverage = usage_coverage(
            (scope, int(count)) for scope, count in connection.execute(_SCOPE_COUNTS, (session_id,))
        )
        sums = connection.execute(_COUNTER_SUMS, (session_id, TOTALLED_SCOPE)).fetchone()
        assert sums is not None  # an aggregate always answers one row
        totals = usage_totals((sums[i], int(sums[i + 1])) for i in range(0, len(sums), 2))
        cost = connection.execute(
            "SELECT body FROM session_provider_cost WHERE session_id = ?", (session_id,)
        ).fetchone()
    return _UsageRows(
        latest=latest,
        bodies=[str(body) for body, _ in page],
        last_ordinal=int(page[-1][1]) if page else None,  # type: ignore[arg-type]
        coverage=coverage,
        totals=totals,
        cost=None if cost is None else str(cost[0]),
    )


def load_usage_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
) -> UsagePage | None:
    """Recorded turns after completion ordinal ``after_seq``, with totals and coverage.

    ``None`` when the store never knew the session (no context); a deleted session's
    usage stays readable.
    """
    rows = _usage_rows(connection, session_id, after_seq, limit)
    if rows is None:
        return None
    return UsagePage(
        **rows.summary(session_id, after_seq),
        turns=[
            decode_stored(TURN_OUTCOME_DECODER, body, "turn usage", session_id)
            for body in rows.bodies
        ],
        provider_session_cost=(
            None
            if rows.cost is None
            else decode_stored(_PROVIDER_COST, rows.cost, "provider cost", session_id)
        ),
    )


def load_raw_usage_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
) -> RawUsagePage | None:
    """:func:`load_usage_page` with each stored turn and the cost passed through
    untouched."""
    rows = _usage_rows(connection, session_id, after_seq, limit)
    if rows is None:
        return None
    return RawUsagePage(
        **rows.summary(session_id, after_seq),
        turns=[raw_stored(body, "turn usage", session_id) for body in rows.bodies],
        provider_session_cost=(
            None if rows.cost is None else raw_stored(rows.cost, "provider cost", session_id)
        ),
    )
