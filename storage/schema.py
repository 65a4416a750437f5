"""The store's schema revision: its numbers, where it is kept, and who may open a store.

Revisions (relaystore's own numbering):

1. *Legacy.* Event bodies of the origin's pre-typed era: ``error`` events, written by
   triggers whenever ``sessions.last_error`` becomes a new non-null value, and
   ``turn_ended`` bodies carrying the old ``MaterializedTurnOutcome``. No
   ``checkpoint_operations``. `tests/storage/legacy.py` builds one for tests.
2. Typed bodies: ``error`` became ``legacy_notice`` and ``turn_ended`` carries an
   ``ApiTurnOutcome``; the triggers are gone (the store emits ``session_fault`` itself);
   one ``checkpoint_operations`` row per session.
3. ``materialized_history_start``: where a session's history starts when it does not
   start at ordinal 1 (a seeded or pruned journal). Additive, so the floor stays 2: a
   revision-2 build may still read and write it.
4. The ``sessions`` CHECK constraints admit every
   harness kind and session state the domain knows (the origin's steps 68 and 74 added
   ``startup-cleanup`` and ``opencode``). The constraints only widen, so the step rewrites
   the table's definition in place (SQLite's documented procedure for a change that
   leaves the stored rows as they are) and checks the file's integrity before it commits.
   It raises the floor to 4: a revision-3 build cannot decode a record with a new kind or
   state, and would refuse that session's record (or, where it lists sessions, fail).
5. Accounting outlives its session (the origin's
   step 67): ``session_turn_usage`` and ``session_provider_cost`` reference
   ``session_contexts`` (which a deleted session leaves behind) instead of cascading
   from ``materialized_sessions``, so deleting a session keeps its usage readable. And
   the index ``materialized_transcript_seq`` (session, seq, stable id) lets a transcript
   page walk from its cursor. Both tables keep their columns, so a revision-4 build still
   reads and writes them: the floor stays.
6. ``store_identity``: the store's id, 32 random
   lowercase hex digits generated once, when the store is created or migrated to this
   revision (a backup copies it, ``VACUUM`` keeps it); only ``relaystore
   new-store-id`` writes it again, for a restored backup that forked from what was
   published under its id: what names the store in a feed shared by many stores.
   Additive, so the floor stays 4.
7. ``relay_log_pages`` (:data:`~relaystore.storage.schema_ddl.RELAY_LOG_DDL`): the
   relay log, one compressed row per committed projection page. Additive, so the floor
   stays: an older build writes pages without log rows, which the log's coverage check
   reports as a hole (that session can then not be reprojected), and changes nothing
   else. The step's number is :data:`RELAY_LOG_REVISION`, the one place to renumber it.
8. ``projection_behind`` (:data:`~relaystore.storage.schema_ddl.FORWARD_DDL`): the
   sessions whose projection stopped at a line of a kind the build did not know, with
   the last line kept in the log after it; and ``materialized_seeds``: a seeded
   session's starting cursor and queued prompts, so it can be rebuilt from its log.
   Additive, so the floor stays. An older build reads a behind session's frontier as
   the last line *projected* (``materialized_sessions`` keeps that), so it refuses the
   unknown line again and every line after it as a gap: it can never project past the
   unknown line, nor out of order.
9. ``materialized_transcript_items.index_facts``
   (:data:`~relaystore.storage.schema_ddl.INDEX_FACTS_DDL`): what the transcript index files about each item
   (:class:`~relaystore.domain.projection.index.ItemFacts`), written with its body as
   ``"<ordinal>:<facts>"``, so a projector reloading a long session reads the facts and
   the newest items instead of decoding every body. NULL means unknown (decode the
   body): what an older build's insert leaves, and what the trigger
   ``materialized_transcript_facts_stale`` sets when an update changes the body but not
   the facts (an older build's, or a retention pass's); this build's ordinal prefix
   makes each of its writes differ from the value before. Additive, so the floor stays;
   existing items start unknown.
10. ``maintenance_requests``
   (:data:`~relaystore.storage.schema_ddl.MAINTENANCE_REQUESTS_DDL`): the maintenance a command asks of the process
   that holds the store for writing (:mod:`relaystore.storage.requests`). Additive, so
   the floor stays: an older build's writer never answers a request, and the command
   that made it withdraws it when its time runs out.
11. ``store_changes`` and its triggers
   (:data:`~relaystore.storage.changes.CHANGES_DDL`): every change to a session's
   record, start or relay log numbered in commit order, what ``relaystore publish``
   sends besides the feed (the step numbers what the store already holds); and
   ``replica_sources``/``replica_sessions`` (:data:`~relaystore.storage.changes.REPLICA_DDL`)
   for a store filled from a stream. Additive, so the floor stays: an older build's
   writes still fire the triggers (they live in the file).
12. ``materialized_transcript_items.view_role``,
   ``view_text`` and ``view_writes``
   (:data:`~relaystore.storage.schema_ddl.ITEM_VIEW_DDL`): each item's role and flattened
   text (:func:`~relaystore.domain.transcript_views.item_role`,
   :func:`~relaystore.domain.transcript_views.item_text`), written with its body, so a
   transcript page, history page, turn summary or title reads them instead of
   flattening every body; ``view_writes`` counts this build's writes of them. NULL means
   unknown (flatten the body): what an older build's insert leaves, and what the trigger
   ``materialized_transcript_view_stale`` sets when an update changes the body but not
   ``view_writes`` (an older build's). The step fills them for the items the store
   holds, in batches, inside its transaction
   (:func:`~relaystore.storage.item_views.fill_item_views`), so a migrated store answers
   as it did.
   Additive, so the floor stays.
13. The full-text search index of transcript text
   (:data:`~relaystore.storage.schema_ddl.SEARCH_DDL`): ``transcript_search_keys``
   numbers each item whose ``view_text`` is known, the FTS5 table ``transcript_search``
   indexes that text (its content is the items' own column, read through the view
   ``transcript_search_text``), and three triggers on ``materialized_transcript_items``
   keep it in the transaction of every write of an item's text. The step indexes the
   items the store holds (:func:`~relaystore.storage.item_views.fill_search_index`).
   Additive, so the floor stays: the triggers live in the file, so an older build's
   writes keep the index too (an item an older build writes without its view is not
   indexed until its text is known). The step's number is :data:`SEARCH_REVISION`,
   the one place to renumber it.
14. ``subagent_sessions``
   (:data:`~relaystore.storage.subagents.SUBAGENTS_DDL`): which stored session is a
   sub-agent of which parent, with the origin's whole ``SubagentRecord``; deleted with
   either session; its changes numbered as the child's ``record`` changes. The step's
   number is :data:`SUBAGENTS_REVISION`. Additive, so the floor stays: an older build
   never writes a relation, and lists every session as top-level.
15. ``elicitation_answers``
   (:data:`~relaystore.storage.answers.ANSWERS_DDL`): who answered each of a session's
   questions, when, and what (secret fields masked), as the embedder recorded it
   (``RecordElicitationAnswer``); deleted with its session; its changes numbered as the
   session's ``record`` changes. The step's number is :data:`ANSWERS_REVISION`.
   Additive, so the floor stays: an older build never records an answer, and its
   deletes of a session delete the answers too (the foreign key cascades).
16. A session's activity change is no longer
   numbered as a ``record`` change: the step drops the two triggers
   (``store_changes_api_session_activity_insert`` and ``_update``) that revision 11
   put on ``api_session_activity``, a WAL page less for every ``activity_changed``
   committed (5.17 to 4.17 pages an event). What was published stays whole: the
   event carries the activity, so a replica keeps a session's activity from the
   newest ``activity_changed`` it applies
   (:func:`~relaystore.domain.activity.published_activity`), and a ``record``
   change still carries the activity as stored when it is published. The step's
   number is :data:`ACTIVITY_UNNUMBERED_REVISION`. The floor stays: an older build
   writes the same rows (no trigger re-creates the two), and what it loses is only
   as a replica of such a store (see the changelog).
17. *Current* (:data:`SCHEMA_VERSION`). ``api_events`` and ``store_changes`` without
   ``AUTOINCREMENT`` (:mod:`~relaystore.storage.sequences`): SQLite no longer rewrites
   ``sqlite_sequence`` at every insert, a WAL page less for every commit that appends
   an API event or numbers a change. A seq is still never handed out twice: the
   trigger ``api_events_high_water_kept`` keeps the newest deleted seq in
   ``api_events_high_water`` and every insert names its seq above both. The step
   rebuilds both tables (every row copied, seqs kept; the sequence's value becomes the
   high-water mark). It raises the floor to 17: an older build inserts without a seq
   and reads ``latest_seq`` from ``sqlite_sequence``, so it could hand a deleted seq out
   again and would say the feed is empty. The step's number is
   :data:`SEQUENCES_REVISION`.

Where the revision lives, always consistent in a valid store: ``PRAGMA user_version``;
the ``schema_migrations`` ledger, whose maximum equals ``user_version``; and the single
row of ``schema_compatibility``, whose ``minimum_compatible_version`` (the *floor*) is
the oldest build revision that may read and write the store (``1 <= floor <=
revision``). A fresh store is created directly at the current revision with one ledger
row and floor :data:`COMPATIBILITY_FLOOR`. Each migration step is one ``BEGIN IMMEDIATE`` transaction that changes the
schema, raises the floor, adds its ledger row and sets ``user_version``; a failure
rolls the step back and leaves the store exactly as it was.

A newer store is never changed: it stays usable while its floor admits this build,
and is refused with ``SchemaMismatch(INCOMPATIBLE)`` otherwise.

This module owns the revision numbers, reading and checking a store's revision and floor
(:func:`read_schema_state`, :func:`ensure_supported`, :func:`check_writer_schema`) and the
store's id. It reads and must not change the schema: the DDL of each revision is
:mod:`.schema_ddl`'s, the steps that apply it (the baseline and the ladder) are
:mod:`.migrations`'.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from ..domain.errors import SchemaMismatch, SchemaMismatchReason
from .schema_ddl import RANDOM_STORE_ID
from .transaction import transaction

__all__ = [
    "ACTIVITY_UNNUMBERED_REVISION",
    "ANSWERS_REVISION",
    "CHANGES_REVISION",
    "COMPATIBILITY_FLOOR",
    "FORWARD_REVISION",
    "INDEX_FACTS_REVISION",
    "ITEM_VIEW_REVISION",
    "RELAY_LOG_REVISION",
    "REQUESTS_REVISION",
    "SEARCH_REVISION",
    "SCHEMA_VERSION",
    "SEQUENCES_REVISION",
    "SUBAGENTS_REVISION",
    "SchemaState",
    "check_writer_schema",
    "ensure_supported",
    "not_a_store",
    "read_schema_state",
    "read_store_id",
    "renew_store_id",
    "schema_mismatch",
]

RELAY_LOG_REVISION = 7
"""The revision that adds the relay log (renumber here only)."""

FORWARD_REVISION = 8
"""The revision that keeps what forward compatibility needs (renumber here only)."""

INDEX_FACTS_REVISION = 9
"""The revision that keeps each transcript item's index facts (renumber here only)."""

REQUESTS_REVISION = 10
"""The revision that adds maintenance requests (renumber here only)."""

CHANGES_REVISION = 11
"""The revision that numbers changes to the source of truth (renumber here only)."""

ITEM_VIEW_REVISION = 12
"""The revision that keeps each transcript item's role and text (renumber here only)."""

SEARCH_REVISION = 13
"""The revision that adds the full-text search index of transcript text (renumber here only)."""

SUBAGENTS_REVISION = 14
"""The revision that keeps sub-agent relations (renumber here only)."""

ANSWERS_REVISION = 15
"""The revision that keeps who answered each question and what (renumber here only)."""

ACTIVITY_UNNUMBERED_REVISION = 16
"""The revision that numbers no change for a session's activity (renumber here only)."""

SEQUENCES_REVISION = 17
"""The revision that numbers the feed and the changes by the rowid (renumber here only)."""

SCHEMA_VERSION = SEQUENCES_REVISION
"""The revision this build reads and writes."""

COMPATIBILITY_FLOOR = SEQUENCES_REVISION
"""The oldest build revision that may read and write a store this build creates."""


@dataclass(frozen=True, slots=True)
class SchemaState:
    """A store's revision and compatibility floor, read in one snapshot.

    ``minimum_compatible`` is ``None`` only for an empty store (revision 0).
    """

    revision: int
    minimum_compatible: int | None


def read_schema_state(connection: apsw.Connection) -> SchemaState:
    """Read the revision and floor, checking that the metadata is consistent.

    Raises ``SchemaMismatch(INVALID_METADATA)`` when a table is missing, the floor table
    does not hold exactly one row, the ledger maximum differs from ``user_version``, the
    floor is outside ``1..=revision``, or a revision-0 file already holds tables, views,
    indexes or triggers (it is not a relaystore store, see :func:`not_a_store`). A busy
    or failing file raises a plain ``StoreError``: that is no evidence about the schema.

    Reads only, so it is also how a file is recognised before anything is written to it
    (``storage.connection.recognise_store``).
    """
    path = connection.filename or None
    with transaction(connection, "read the relaystore schema revision"):
        revision = int(connection.pragma("user_version"))
        if revision == 0:
            names = [
                str(name)
                for (name,) in connection.execute(
                    "SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"
                    " ORDER BY type = 'table' DESC, rowid LIMIT 4"
                )
            ]
            if names:
                shown = ", ".join(repr(name) for name in names[:3])
                more = ", ..." if len(names) > 3 else ""
                raise not_a_store(
                    path,
                    "the file is a SQLite database of another application (it holds "
                    f"{shown}{more} but no relaystore schema)",
                )
            return SchemaState(revision=0, minimum_compatible=None)
        try:
            row = connection.execute(
                "SELECT (SELECT count(*) FROM schema_compatibility),"
                " (SELECT min(singleton) FROM schema_compatibility),"
                " (SELECT min(minimum_compatible_version) FROM schema_compatibility),"
                " (SELECT max(version) FROM schema_migrations)"
            ).fetchone()
        except apsw.SQLError as exc:  # missing table or column: structural
            raise schema_mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path) from exc
    assert row is not None
    count, singleton, floor, ledger = row
    if not (
        count == 1
        and singleton == 1
        and isinstance(floor, int)
        and ledger == revision
        and 1 <= floor <= revision
    ):
        raise schema_mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path)
    return SchemaState(revision=revision, minimum_compatible=floor)


def ensure_supported(state: SchemaState, *, path: str | None = None) -> None:
    """Raise ``SchemaMismatch`` unless this build may read and write a store in ``state``.

    Behind this build: ``NEEDS_MIGRATION``. Otherwise the floor decides: at or below
    :data:`SCHEMA_VERSION` is fine (this admits compatible newer stores), above it is
    ``INCOMPATIBLE``; no floor at all is ``INVALID_METADATA``.
    """
    if state.revision < SCHEMA_VERSION:
        raise schema_mismatch(SchemaMismatchReason.NEEDS_MIGRATION, state.revision, path)
    if state.minimum_compatible is None:
        raise schema_mismatch(SchemaMismatchReason.INVALID_METADATA, state.revision, path)
    if state.minimum_compatible > SCHEMA_VERSION:
        raise schema_mismatch(
            SchemaMismatchReason.INCOMPATIBLE, state.revision, path, state.minimum_compatible
        )


def check_writer_schema(connection: apsw.Connection, observed_revision: int) -> int:
    """The writer's check before every message; returns the revision to remember.

    Reads only. Raises ``SchemaMismatch(ROLLBACK)`` (``minimum`` = ``observed_revision``)
    when the store's revision is lower than one this writer saw before, and whatever
    :func:`ensure_supported` raises otherwise. After a refusal the writer should
    remember ``max(observed_revision, error.found)`` and keep checking later messages.
    """
    path = connection.filename or None
    state = read_schema_state(connection)
    if state.revision < observed_revision:
        raise schema_mismatch(
            SchemaMismatchReason.ROLLBACK, state.revision, path, observed_revision
        )
    ensure_supported(state, path=path)
    return state.revision


def read_store_id(connection: apsw.Connection) -> str:
    """The store's id (revision 6 and later), read in its own read transaction.

    Raises ``SchemaMismatch(INVALID_METADATA)`` when the ``store_identity`` row is
    missing or malformed: every store this build reads or writes has one.
    """
    path = connection.filename or None
    with transaction(connection, "read the store id"):
        try:
            value = connection.execute(
                "SELECT store_id FROM store_identity WHERE singleton = 1"
            ).get
        except apsw.SQLError as exc:  # no such table: not a revision-6 store
            revision = int(connection.pragma("user_version"))
            raise schema_mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path) from exc
    if not isinstance(value, str) or len(value) != 32:
        revision = int(connection.pragma("user_version"))
        raise schema_mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path)
    return value


def renew_store_id(connection: apsw.Connection) -> tuple[str, str]:
    """Give the store a fresh random id, on the writer connection; ``(old, new)``.

    The one write of ``store_identity`` after it was made: for a store restored from a
    backup that forked from what was published under its id
    (:mod:`relaystore.domain.publishing`), so that it publishes as a new store.
    """
    old = read_store_id(connection)
    with transaction(connection, "give the store a new id"):
        connection.execute(
            f"UPDATE store_identity SET store_id = {RANDOM_STORE_ID} WHERE singleton = 1"
        )
    return old, read_store_id(connection)


def not_a_store(path: str | None, why: str) -> SchemaMismatch:
    """``SchemaMismatch(INVALID_METADATA)`` (``found`` 0) for a file that is not a store.

    ``why`` says what the file is instead; the message adds that it was left untouched.
    """
    error = schema_mismatch(SchemaMismatchReason.INVALID_METADATA, 0, path)
    error.detail = (
        f"{why}; it is not a relaystore store, so relaystore refuses to open it and left "
        "it unchanged; give the path of a relaystore store, or of a new file"
    )
    located = error.located()
    assert isinstance(located, SchemaMismatch)
    return located


def schema_mismatch(
    reason: SchemaMismatchReason, found: int, path: str | None, minimum: int | None = None
) -> SchemaMismatch:
    """The ``SchemaMismatch`` of ``reason`` for a store found at revision ``found``."""
    return SchemaMismatch(reason, found=found, supported=SCHEMA_VERSION, minimum=minimum, path=path)
