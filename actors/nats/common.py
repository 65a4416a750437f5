"""What the NATS publisher and the fleet feed share: names, subjects, checks, connecting.

The subject of one API event is ``PREFIX.STORE_ID.WORKSPACE.SESSION``. ``PREFIX`` is one
or more ``.``-separated tokens of ASCII letters, digits, ``-`` and ``_``; ``STORE_ID`` is
the store's 32 hex digits; ``WORKSPACE`` and ``SESSION`` are the event's workspace and
session ids as subject tokens (:func:`subject_token`). The id rule
(:func:`relaystore.domain.ids.validate_id`) admits ASCII letters, digits, ``.``,
``-`` and ``_``: ``*`` and ``>`` (NATS wildcards) and whitespace never occur in an id
and are refused with the id's own message, and a ``.`` (NATS's token separator) is
written as ``~`` in its token, which no id contains, so the mapping is one-to-one and
``my.session`` is the token ``my~session``. The event's bytes keep the id as it is.

Everything here checks what crosses the boundary and raises
:class:`~relaystore.domain.errors.InvalidInput`; nothing here needs the ``nats``
package except :func:`connect`, which imports it when called.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...domain.errors import InvalidInput, StoreError
from ...domain.ids import validate_id
from ...domain.redaction import redact
from ...domain.wording import install_extra

if TYPE_CHECKING:
    from nats.aio.client import Client

__all__ = [
    "DEFAULT_STREAM",
    "DEFAULT_SUBJECT_PREFIX",
    "DUPLICATE_WINDOW_SECONDS",
    "HEADER_SEQ",
    "HEADER_STORE",
    "SCHEMES",
    "connect",
    "require_stream",
    "filter_subject",
    "is_transient",
    "last_stream_seq",
    "require_nats",
    "shown_servers",
    "store_subjects",
    "subject_token",
    "validate_consumer_name",
    "validate_servers",
    "validate_store_id",
    "validate_stream_name",
    "validate_subject_prefix",
]

DEFAULT_STREAM = "RELAYSTORE"
"""The stream the publisher creates and the fleet feed reads when none is named."""

DEFAULT_SUBJECT_PREFIX = "relaystore"

DUPLICATE_WINDOW_SECONDS = 120.0
"""The duplicate window of a stream the publisher creates: a ``Nats-Msg-Id`` seen in
the last two minutes is stored once. Resuming reads the stream itself, so the window
only has to cover the moment a restarted publisher overlaps a dead one's last bytes."""

HEADER_STORE = "Relaystore-Store"
HEADER_SEQ = "Relaystore-Seq"

SCHEMES = ("nats", "tls", "ws", "wss")

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PREFIX_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_STORE_ID = re.compile(r"[0-9a-f]{32}")


def require_nats(what: str) -> None:
    """Raise :class:`InvalidInput` naming the extra when the ``nats`` package is missing."""
    import importlib.util

    if importlib.util.find_spec("nats") is None:
        raise InvalidInput(f"{what} needs nats-py, which is not installed: {install_extra('nats')}")


def validate_servers(servers: str | Sequence[str]) -> list[str]:
    """The server URLs of ``--nats`` (comma-separated) or a list, each checked.

    A URL is ``nats://HOST:PORT`` (or ``tls://``, ``ws://``, ``wss://``), optionally with
    ``user:password@``; the port defaults to 4222. A refusal shows the URL with its
    credentials masked (:func:`~relaystore.domain.redaction.redact`).
    """
    if isinstance(servers, str):
        urls = [part.strip() for part in servers.split(",")]
    elif isinstance(servers, Sequence) and all(isinstance(url, str) for url in servers):
        urls = [url.strip() for url in servers]
    else:
        raise InvalidInput("the NATS servers must be a URL string or a list of them")
    if not urls or not all(urls):
        raise InvalidInput("--nats: give a server URL such as nats://127.0.0.1:4222")
    for url in urls:
        shown = redact(url)
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError as exc:
            # The parser's reason quotes a piece of the URL: only when nothing was masked.
            why = f" ({exc})" if shown == url else ""
            raise InvalidInput(f"--nats: {shown!r} is not a valid URL{why}") from None
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise InvalidInput(
                f"--nats: {shown!r} is not a NATS server URL; use "
                f"{'/'.join(SCHEMES)}://HOST[:PORT], e.g. nats://127.0.0.1:4222"
            )
        if port == 0 or parts.path not in ("", "/") or parts.query or parts.fragment:
            raise InvalidInput(f"--nats: {shown!r} is not a NATS server URL (HOST:PORT only)")
    return urls


def shown_servers(servers: Sequence[str]) -> str:
    """The server URLs as a message shows them: comma-separated, credentials masked."""
    return redact(", ".join(servers))


def validate_stream_name(name: str) -> str:
    """A stream name: 1-64 ASCII letters, digits, ``-`` or ``_``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput(
            f"invalid stream name {name!r}; use 1-64 ASCII letters, digits, '-' or '_'"
        )
    return name


def validate_consumer_name(name: str) -> str:
    """A durable consumer name: 1-64 ASCII letters, digits, ``-`` or ``_``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput(
            f"invalid durable name {name!r}; use 1-64 ASCII letters, digits, '-' or '_'"
        )
    return name


def validate_subject_prefix(prefix: str) -> str:
    """A subject prefix: ``.``-separated tokens of ASCII letters, digits, ``-``, ``_``."""
    if (
        not isinstance(prefix, str)
        or len(prefix) > 128
        or not all(_PREFIX_TOKEN.fullmatch(token) for token in prefix.split("."))
    ):
        raise InvalidInput(
            f"invalid subject prefix {prefix!r}; use '.'-separated tokens of ASCII "
            "letters, digits, '-' or '_' (no wildcards, at most 128 characters)"
        )
    return prefix


def validate_store_id(store_id: str) -> str:
    """A store id: 32 lowercase hex digits (``relaystore stats --json`` shows it)."""
    if not isinstance(store_id, str) or not _STORE_ID.fullmatch(store_id):
        raise InvalidInput(
            f"invalid store id {store_id!r}; a store id is 32 lowercase hex digits "
            "(relaystore stats --json shows a store's)"
        )
    return store_id


def subject_token(kind: str, value: str) -> str:
    """``value`` (a valid ``kind`` id) as one subject token: ``.`` becomes ``~``."""
    validate_id(kind, value)
    return value.replace(".", "~")


def store_subjects(prefix: str, store_id: str) -> str:
    """Every subject of one store's messages: ``PREFIX.STORE_ID.>``."""
    return f"{prefix}.{store_id}.>"


def filter_subject(
    prefix: str,
    *,
    store_id: str | None = None,
    workspace_id: str | None = None,
    session_id: str | None = None,
) -> str:
    """The one subject filter selecting API events of a store, workspace and/or session
    (``*`` for any): ``PREFIX.*.*.*`` for all, never the stores' changes and commit
    markers, whose subjects have other token counts
    (:mod:`relaystore.actors.nats.replication`)."""
    store = "*" if store_id is None else validate_store_id(store_id)
    workspace = "*" if workspace_id is None else subject_token("workspace", workspace_id)
    session = "*" if session_id is None else subject_token("session", session_id)
    return f"{prefix}.{store}.{workspace}.{session}"


def is_transient(exc: BaseException) -> bool:
    """Whether a failure talking to NATS is worth a reconnect (the server or network)."""
    import nats.errors
    import nats.js.errors

    if isinstance(exc, nats.js.errors.APIError) and not isinstance(
        exc, nats.js.errors.ServiceUnavailableError | nats.js.errors.ServerError
    ):
        return bool(exc.code is not None and exc.code >= 500)
    return isinstance(exc, OSError | TimeoutError | nats.errors.Error)


async def connect(
    servers: list[str], *, name: str, connect_timeout: float, reconnect: bool, **options: Any
) -> Client:
    """A connection to ``servers``; with ``reconnect`` nats-py reconnects on its own.

    A failure to reach any server raises what nats-py raises (see :func:`is_transient`).
    Its error callbacks are quiet: the caller logs what it decides.
    """
    import nats

    async def quiet(*_: Any) -> None:
        return None

    try:
        return await nats.connect(
            servers,
            name=name,
            connect_timeout=max(1, round(connect_timeout)),
            allow_reconnect=reconnect,
            # nats-py keeps trying a first connection until a server was tried more
            # than this many times (0 would mean forever): one retry, at once.
            max_reconnect_attempts=-1 if reconnect else 1,
            reconnect_time_wait=1 if reconnect else 0,
            error_cb=quiet,
            disconnected_cb=quiet,
            reconnected_cb=quiet,
            closed_cb=quiet,
            **options,
        )
    except Exception as exc:
        if is_transient(exc):
            raise
        raise StoreError(
            f"cannot connect to NATS at {shown_servers(servers)}: {redact(str(exc))}"
        ) from exc


async def require_stream(
    nc: Client, stream: str, servers: Sequence[str], timeout: float, hint: str
) -> None:
    """Raise :class:`InvalidInput` (``hint`` says what to do) when ``stream`` is not
    on the servers; a failure to ask raises what nats-py raises."""
    import nats.js.errors

    try:
        await nc.jsm(timeout=timeout).stream_info(stream)
    except nats.js.errors.NotFoundError:
        raise InvalidInput(f"no stream {stream} on {shown_servers(servers)}; {hint}") from None


async def last_stream_seq(nc: Client, stream: str, subject: str, timeout: float) -> int:
    """The stream sequence of ``stream``'s last message on ``subject`` (a filter), 0
    when it holds none, as the stream's leader has it.

    Where a read of the stream ends. A consumer's own ``num_pending`` is no end: in a
    cluster an ephemeral consumer of a limits stream is one replica, placed on any peer
    of the stream (nats-server's ``createGroupForConsumer``), and a peer that was down
    and is still catching up counts only what it holds, so its ``num_pending`` reaches
    0 before the stream's end. A message get that is not a direct get is answered by the
    stream's leader alone, which holds everything the stream acknowledged. A failure to
    ask raises what nats-py raises."""
    import nats.js.errors

    try:
        message = await nc.jsm(timeout=timeout).get_last_msg(stream, subject, direct=False)
    except nats.js.errors.NotFoundError:
        return 0
    return int(message.seq or 0)
