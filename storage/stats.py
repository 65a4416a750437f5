"""Store-wide figures for the ``stats`` command: revision, sessions, events by kind."""

from __future__ import annotations

import apsw

from ..domain.reports import StoreStats
from .materialized import load_projection_behind
from .paging import load_latest_seq
from .schema import read_schema_state, read_store_id
from .transaction import transaction

__all__ = ["StoreStats", "count_sessions_behind", "load_live_figures", "load_stats"]


def count_sessions_behind(connection: apsw.Connection) -> int:
    """How many sessions' projections are behind their relay log."""
    with transaction(connection, "count the sessions behind their relay log"):
        count = connection.execute("SELECT count(*) FROM projection_behind").get
    return count if isinstance(count, int) else 0


def load_live_figures(connection: apsw.Connection) -> tuple[int, int]:
    """The newest committed seq and how many sessions are behind their relay log, in one
    read transaction (what a read-only store's metrics read from the store)."""
    with transaction(connection, "read the store's live figures"):
        return load_latest_seq(connection), count_sessions_behind(connection)


def load_stats(connection: apsw.Connection) -> StoreStats:
    """Read the figures in one read transaction (SQLite errors become relaystore's)."""
    with transaction(connection, "read the store's figures"):
        revision = read_schema_state(connection).revision
        store_id = read_store_id(connection)
        sessions = connection.execute("SELECT count(*) FROM sessions").get
        kinds = {
            str(kind): int(total)
            for kind, total in connection.execute(
                "SELECT json_extract(body, '$.type'), count(*) FROM api_events GROUP BY 1 ORDER BY 1"
            )
        }
        latest = load_latest_seq(connection)
        behind = load_projection_behind(connection)
    return StoreStats(
        revision=revision,
        store_id=store_id,
        sessions=sessions if isinstance(sessions, int) else 0,
        latest_seq=latest,
        events_by_kind=kinds,
        projection_behind=behind,
    )
