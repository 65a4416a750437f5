"""Finding transcript text: the search message, its reply, and the rules of both.

:class:`SearchTranscripts` asks the store's full-text index (schema revision 13,
:data:`~relaystore.storage.schema_ddl.SEARCH_DDL`) for the transcript items whose text
matches a query, newest first; :class:`SearchPage` is a page of hits, each naming the
session and item it found (seq, stable id, role, when) with a snippet of its text,
the matching words marked (:class:`SnippetPart`).

The query is SQLite FTS5's syntax: words (all must match), ``"a phrase"``, ``word*``
(a prefix), ``OR``, ``NOT``, parentheses, ``NEAR(a b, 5)``; matching ignores case and
diacritics. A query FTS5 cannot parse is refused with
:class:`~relaystore.domain.errors.InvalidInput` naming the field
(``SearchTranscripts.query``), never with SQLite's error. With ``plain`` the query is
words as a person types them into a search box (``cargo-test``, ``don't``): every word
must match, as written, no operator (:func:`match_expression`).

Owns the limits (:data:`MAX_QUERY_CHARS`, :data:`DEFAULT_SEARCH_LIMIT`,
:data:`MAX_SEARCH_LIMIT`), the snippet markers storage asks SQLite for and how a marked
snippet becomes parts (:func:`snippet_parts`), and the wording of a refused query
(:func:`bad_query`), and the FTS5 expression of a plain query (:func:`match_expression`). Pure: storage runs the query (:mod:`relaystore.storage.reads.search`).
"""

from __future__ import annotations

from .errors import InvalidInput
from .request import Request
from .roles import TranscriptRole
from .wire import Wire, emitted

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "MATCH_END",
    "MATCH_START",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "SNIPPET_TOKENS",
    "SearchHit",
    "SearchPage",
    "SearchTranscripts",
    "SnippetPart",
    "bad_query",
    "match_expression",
    "search_limit",
    "snippet_parts",
]

MAX_QUERY_CHARS = 1000
"""The longest query accepted, in characters."""

DEFAULT_SEARCH_LIMIT = 50
"""Hits a page holds when the caller names no limit."""

MAX_SEARCH_LIMIT = 500
"""The most hits a page holds; a larger limit gives this many."""

SNIPPET_TOKENS = 24
"""The most words a hit's snippet shows around its matches."""

MATCH_START = "\x02"
"""What storage asks SQLite to put before a matching word in a snippet."""
MATCH_END = "\x03"
"""... and after it."""


class SnippetPart(Wire, kw_only=True):
    """A piece of a snippet: ``text``, and whether it is a matching word."""

    text: str
    match: bool = emitted(False)


class SearchHit(Wire, kw_only=True):
    """One item whose text matches: where it is (session, ``seq`` as transcript pages
    number it, ``position``, ``stable_id``), its ``role``, when it was created and last
    changed, and a ``snippet`` of its text around the matches (``parts``: the same text
    with the matching words marked)."""

    session_id: str
    stable_id: str
    seq: int
    position: int
    role: TranscriptRole
    created_at_ms: int
    last_changed_at_ms: int
    snippet: str
    parts: list[SnippetPart] = emitted([])


class SearchPage(Wire, kw_only=True):
    """A page of hits, newest first; ``next_cursor`` (None: no more) asks for the next."""

    query: str
    hits: list[SearchHit] = emitted([])
    next_cursor: int | None = emitted(None)


class SearchTranscripts(Request[SearchPage], frozen=True, kw_only=True):
    """The transcript items whose text matches ``query`` (FTS5 syntax, see the module
    doc), newest first: of one session (``session_id``) or every session, of one
    ``role`` or every role.

    ``plain``: ``query`` is plain words, each to match as written (no FTS5 operators;
    nothing is refused for its syntax).

    ``limit`` (1 or more; above :data:`MAX_SEARCH_LIMIT` gives that many) bounds the
    page; ``cursor``, a page's ``next_cursor``, asks for the hits after that page. Each
    hit is one item as it is now: an item whose text changed since is found by its
    new text. A session the store does not hold has no hits.
    """

    query: str
    session_id: str | None = None
    role: TranscriptRole | None = None
    limit: int = DEFAULT_SEARCH_LIMIT
    cursor: int | None = None
    plain: bool = False

    def check(self) -> None:
        name = type(self).__name__
        text = self.query
        if not text.strip():
            raise InvalidInput(f"{name}.query: must not be blank")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidInput(
                f"{name}.query: {len(text)} characters, more than the {MAX_QUERY_CHARS} allowed"
            )
        if "\x00" in text or MATCH_START in text or MATCH_END in text:
            raise InvalidInput(f"{name}.query: holds a control character")
        if self.limit < 1:
            raise InvalidInput(f"{name}.limit: {self.limit} is below 1")
        if self.cursor is not None and self.cursor < 1:
            raise InvalidInput(f"{name}.cursor: {self.cursor} is below 1")


def search_limit(limit: int) -> int:
    """``limit`` (checked to be 1 or more) bounded by :data:`MAX_SEARCH_LIMIT`."""
    return min(limit, MAX_SEARCH_LIMIT)


def snippet_parts(marked: str) -> list[SnippetPart]:
    """A snippet SQLite marked with :data:`MATCH_START` / :data:`MATCH_END` as its parts
    (adjacent pieces of the same kind joined; a stray marker, one the text held itself,
    is dropped)."""
    parts: list[SnippetPart] = []
    inside = False
    piece: list[str] = []

    def flush() -> None:
        text = "".join(piece)
        piece.clear()
        if not text:
            return
        if parts and parts[-1].match == inside:
            parts[-1].text += text
        else:
            parts.append(SnippetPart(text=text, match=inside))

    for char in marked:
        if char == MATCH_START and not inside:
            flush()
            inside = True
        elif char == MATCH_END and inside:
            flush()
            inside = False
        elif char not in (MATCH_START, MATCH_END):
            piece.append(char)
    flush()
    return parts


def match_expression(query: str, plain: bool) -> str:
    """The FTS5 expression to run: ``query`` itself, or with ``plain`` each of its
    whitespace-separated words as an FTS5 string (``"..."``, inner quotes doubled), so
    every word must match as written and nothing in it is an operator."""
    if not plain:
        return query
    return " ".join('"' + word.replace('"', '""') + '"' for word in query.split())


def bad_query(query: str, why: str) -> InvalidInput:
    """The refusal of a query FTS5 could not run: names the field, says why (SQLite's
    words, without its ``fts5:`` prefix) and how to search for the text as it is."""
    why = why.removeprefix("fts5: ").strip() or "not a search query"
    shown = query if len(query) <= 80 else query[:79] + "…"
    return InvalidInput(
        f"SearchTranscripts.query: {shown!r} is not a search query ({why}); put words "
        'between double quotes ("...") to search for them as they are'
    )
