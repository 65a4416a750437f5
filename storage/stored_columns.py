"""Stored JSON columns read back: decoded with one refusal, or passed through checked.

Every read of a stored column (the materialized projection, :mod:`relaystore.storage.reads`)
goes through :func:`decode_stored` (a column decoded, or :class:`ProjectionError` naming
it and its session), :func:`decode_transcript_bodies` (a page's bodies in one decoder
call) and :func:`raw_stored` (a column passed through, its syntax checked), with the
decoders of the columns more than one module reads.

Must not: read a table (its callers do, in their transactions).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..domain.elicitation.forms import ElicitationRequest
from ..domain.errors import ProjectionError
from ..domain.materialized import TranscriptBody
from ..domain.outcomes import MaterializedTurnOutcome
from ..domain.wire import JSON

__all__ = [
    "CONFIGURATION_DECODER",
    "ELICITATIONS_DECODER",
    "TRANSCRIPT_BODY",
    "TURN_OUTCOME_DECODER",
    "decode_stored",
    "decode_transcript_bodies",
    "raw_stored",
    "stored_bodies",
]

_BODIES: msgspec.json.Decoder[list[Any]] = msgspec.json.Decoder(list[TranscriptBody])
TRANSCRIPT_BODY: msgspec.json.Decoder[Any] = msgspec.json.Decoder(TranscriptBody)
"""Decodes one stored transcript item body (``body_json``)."""
_RAW = msgspec.json.Decoder(msgspec.Raw)
CONFIGURATION_DECODER = msgspec.json.Decoder(dict[str, JSON])
"""Reads a session's stored ``configuration_json``."""
ELICITATIONS_DECODER = msgspec.json.Decoder(list[ElicitationRequest])
"""Reads a session's stored ``pending_elicitations_json``."""
TURN_OUTCOME_DECODER = msgspec.json.Decoder(MaterializedTurnOutcome)
"""Reads a stored turn outcome (a session's last one, a turn's usage row)."""


def decode_stored(decoder: msgspec.json.Decoder[Any], text: str, what: str, session_id: str) -> Any:
    """``text`` (a stored column) decoded, or :class:`ProjectionError` naming ``what``."""
    try:
        return decoder.decode(text)
    except (msgspec.DecodeError, RecursionError) as exc:  # nested past the decoder's depth
        raise ProjectionError(
            f"stored {what} does not decode: {exc}", session_id=session_id
        ) from exc


def decode_transcript_bodies(rows: list[tuple[Any, ...]], session_id: str) -> list[TranscriptBody]:
    """The decoded bodies of transcript ``rows`` (body JSON in column 5).

    One decoder call for the whole page (far cheaper than one call per row), once
    :func:`_page_of_bodies` found every row's body exactly where the page puts it; any
    other page is decoded row by row, to name the item that does not decode.
    """
    page = _page_of_bodies(rows)
    if page is not None:
        try:
            bodies: list[TranscriptBody] = _BODIES.decode(page[0])
            return bodies
        except (msgspec.DecodeError, RecursionError):
            pass
    return [
        decode_stored(TRANSCRIPT_BODY, str(r[5]), f"body of transcript item {r[0]!r}", session_id)
        for r in rows
    ]


def stored_bodies(rows: list[tuple[Any, ...]], session_id: str) -> list[msgspec.Raw]:
    """The bodies of transcript ``rows`` (column 5) as their stored JSON, each checked
    to be one JSON object, none decoded: one syntax check over the page, else row by row
    to name the item that is not (:func:`raw_stored`)."""
    page = _page_of_bodies(rows)
    if page is not None and all(memoryview(raw)[0] == 0x7B for raw in page[1]):  # "{"
        return page[1]
    return [raw_stored(str(r[5]), f"body of transcript item {r[0]!r}", session_id) for r in rows]


_RAWS = msgspec.json.Decoder(list[msgspec.Raw])


def _page_of_bodies(rows: list[tuple[Any, ...]]) -> tuple[bytes, list[msgspec.Raw]] | None:
    """The rows' bodies as one JSON array and its elements, or None unless each element
    is exactly its row's body: the same count and the same lengths, so that no body
    (edited past the table's CHECK) ends inside the next one and shifts the page."""
    try:
        texts = [str(row[5]).encode() for row in rows]
        joined = b"[" + b",".join(texts) + b"]"
        raws = _RAWS.decode(joined)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return None
    if len(raws) != len(texts) or any(
        len(raw) != len(text) for raw, text in zip(raws, texts, strict=True)
    ):
        return None
    return joined, raws


def raw_stored(text: str, what: str, session_id: str, *, array: bool = False) -> msgspec.Raw:
    """A stored JSON column passed through as it is, once its syntax is checked (an
    object, or an array when ``array``): the typed read's refusal, without building the
    values."""
    raw: msgspec.Raw = decode_stored(_RAW, text, what, session_id)
    if not bytes(raw).startswith(b"[" if array else b"{"):
        raise ProjectionError(
            f"stored {what} is not a JSON {'array' if array else 'object'}",
            session_id=session_id,
        )
    return raw
