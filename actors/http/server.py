"""``relaystore serve``: the server: the token file, the socket, TLS, uvicorn and its hardening.

Built on uvicorn (the server, its h11 protocol) around the application of
:mod:`relaystore.actors.http.app` (every route, the preamble, the envelope), installed
with ``pip install "relaystore[http]"``. :func:`serve` is what the command runs;
:class:`Server` serves one store on a socket bound when it is made.

* The bearer token comes from a 0600 file, created on first start (:func:`ensure_token`);
  a file others may read is refused.
* TLS: a PEM certificate chain and its key (:class:`TlsFiles`), loaded before the port is
  bound; :func:`beyond_loopback` tells the command when to warn about serving without it.
* Logs go to stderr, one line each (``relaystore: ...``); ``access_log`` adds one line per
  request (the token travels in a header, never in the logged request line).

Guarantees: the store is opened read-only (the supervisor or ``relaystore replay``
writes it). The listening socket is bound before anything is announced. The connections'
cut-offs are :mod:`relaystore.actors.http.protocol`'s: a client the server could not
write to for ``Timeouts.stall`` seconds is disconnected (one log line; the socket is
closed at once, its unsent bytes dropped) and resumes by reconnecting with its cursor; a
connection that has not sent a whole request head within ``Timeouts.header`` seconds is
closed; a request that is not HTTP is answered 400 with every answer's headers; a client
that goes away costs nothing more (no log line). No WebSocket: an upgrade request is an
ordinary request to the routes. Stopping (SIGINT, SIGTERM or :meth:`Server.stop`) closes the store, which ends
every stream with a complete response, and closes what is left after
``Timeouts.shutdown`` seconds.

Must not: answer a request or know a route (the application's), or read the store
beyond opening and closing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.config
import math
import os
import secrets
import signal
import socket
import stat
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from ...domain.errors import InvalidInput
from ...domain.origins import validate_origins
from ..aio import AsyncEventStore
from .app import API_VERSION, KEEPALIVE_SECONDS, create_app
from .protocol import Timeouts, protocol

__all__ = [
    "API_VERSION",
    "KEEPALIVE_SECONDS",
    "Server",
    "Timeouts",
    "TlsFiles",
    "beyond_loopback",
    "create_app",
    "ensure_token",
    "serve",
]

logger = logging.getLogger(__name__)

# API_VERSION, KEEPALIVE_SECONDS and create_app are the application's
# (relaystore.actors.http.app), named here too: what serve's callers import.

# What serve() logs, on stderr: one line each, like the command's other messages.
_LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"line": {"format": "relaystore: %(message)s"}},
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "line",
            "stream": "ext://sys.stderr",
        }
    },
    "loggers": {
        "uvicorn": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        "uvicorn.access": {"level": "CRITICAL", "propagate": False},
        # The server's own lines (a stalled client) and the feed's (a stream's failure).
        __name__: {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "relaystore.actors.http.events": {
            "handlers": ["stderr"],
            "level": "INFO",
            "propagate": False,
        },
    },
}
_ACCESS_LOG = {"handlers": ["stderr"], "level": "INFO", "propagate": False}
"""``uvicorn.access`` with ``access_log``: one line per request on stderr (client, request
line, status); the token travels in a header, never in the logged request line."""


# -- the token ---------------------------------------------------------------------------


def ensure_token(path: Path) -> str:
    """The bearer token in ``path``, created (mode 0600) with a new token if missing.

    Raises :class:`InvalidInput` for a file that exists but is not private (group or
    others may read or write it), is not a regular file, or holds no token.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _existing_token(path)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as file:
        os.fchmod(fd, 0o600)  # whatever the umask
        file.write(token + "\n")
    return token


def _existing_token(path: Path) -> str:
    where = str(path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise InvalidInput("the bearer token file is not a regular file", path=where)
    if stat.S_IMODE(mode) & 0o077:
        raise InvalidInput(
            f"the bearer token file has mode {stat.S_IMODE(mode):04o}, but it must be private "
            f"(0600): run chmod 600 {where}, or delete it to have a new token made",
            path=where,
        )
    token = path.read_text().strip()
    if not token:
        raise InvalidInput(
            "the bearer token file is empty; write a token into it, or delete it to have a "
            "new one made",
            path=where,
        )
    return token


# -- the server --------------------------------------------------------------------------


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, announcing once it accepts and closing the store when it stops.

    Signals are the caller's (:meth:`Server.run`), not uvicorn's.
    """

    def __init__(
        self, config: uvicorn.Config, store: AsyncEventStore, started: Callable[[], None]
    ) -> None:
        super().__init__(config)
        self._store = store
        self._started = started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._started()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        closing = asyncio.ensure_future(self._store.close())  # ends every stream
        await super().shutdown(sockets)
        await closing


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port); InvalidInput if none."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        listener = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {where}: {exc.strerror or exc}") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise InvalidInput(f"cannot listen on {where}: {exc.strerror or exc}") from None
    return listener


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """The certificate chain and private key ``serve`` speaks TLS with (PEM files), and
    the passphrase of an encrypted key (never shown)."""

    certfile: Path
    keyfile: Path
    passphrase: str | None = field(default=None, repr=False)

    def check(self) -> None:
        """Load both, as the server will: :class:`InvalidInput` naming what is wrong.

        Never prompts: an encrypted key without its passphrase is refused, saying so.
        """
        import ssl

        for path in (self.certfile, self.keyfile):
            if not path.is_file():
                raise InvalidInput("no such file", path=str(path))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        asked = False

        def passphrase() -> str:  # called by OpenSSL only for an encrypted key
            nonlocal asked
            asked = True
            return self.passphrase or ""

        try:
            context.load_cert_chain(self.certfile, self.keyfile, passphrase)
        except (ssl.SSLError, OSError) as exc:
            if asked and self.passphrase is None:
                raise InvalidInput(
                    "the private key is encrypted; give its passphrase in a file with "
                    "--keyfile-passphrase-file PATH, or decrypt the key (openssl pkey)",
                    path=str(self.keyfile),
                ) from None
            if asked:
                raise InvalidInput(
                    "the passphrase of --keyfile-passphrase-file does not decrypt the private key",
                    path=str(self.keyfile),
                ) from None
            raise InvalidInput(
                f"cannot use {self.certfile} and {self.keyfile} for TLS (a PEM certificate "
                f"chain and its private key): {exc.strerror or exc}"
            ) from None


def beyond_loopback(host: str) -> bool:
    """Whether listening on ``host`` may take connections from other machines: anything
    but a name or address every resolution of which is a loopback address."""
    import ipaddress

    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return True
    try:
        return not all(ipaddress.ip_address(entry[4][0]).is_loopback for entry in found)
    except ValueError:
        return True


_TIMEOUTS = Timeouts()


class Server:
    """``GET /api/v1/events`` for one store, on a socket bound when this is made.

    ``url`` names the bound address (``port=0`` picks a free port). :meth:`run` serves
    until :meth:`stop` (or, with ``signals``, SIGINT or SIGTERM); a server runs once.
    Raises :class:`InvalidInput` when the address cannot be bound or one of
    ``cors_origins`` is no web origin.
    """

    def __init__(
        self,
        store_path: Path,
        token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timeouts: Timeouts = _TIMEOUTS,
        cors_origins: Collection[str] = (),
        tls: TlsFiles | None = None,
        access_log: bool = False,
    ) -> None:
        self._store_path = store_path
        self._token = token
        self._cors_origins = validate_origins(cors_origins)
        self._timeouts = timeouts
        self._tls = tls
        if tls is not None:
            tls.check()
        self._access_log = access_log
        self._socket = _listen(host, port)
        bound = self._socket.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.url = f"{'https' if tls else 'http'}://{shown}:{bound[1]}"
        self.stopped_by: signal.Signals | None = None
        self._stopping = False
        self._uvicorn: _Uvicorn | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(
        self, *, announce: Callable[[str], None] | None = None, signals: bool = False
    ) -> None:
        """Open the store, serve, call ``announce(url)`` once accepting; return when stopped.

        Raises what opening the store raises (a :class:`StoreError`), before announcing.
        """
        self._loop = asyncio.get_running_loop()
        handled = (signal.SIGINT, signal.SIGTERM) if signals else ()
        for number in handled:
            self._loop.add_signal_handler(number, self._signalled, number)
        try:
            async with AsyncEventStore.open(self._store_path, read_only=True, readers=2) as store:
                config = uvicorn.Config(
                    create_app(
                        store,
                        self._token,
                        keepalive=self._timeouts.keepalive,
                        cors_origins=self._cors_origins,
                    ),
                    http=protocol(self._timeouts),
                    ws="none",  # an upgrade request is an ordinary request to the routes
                    lifespan="off",
                    log_config=None,
                    access_log=self._access_log,
                    ssl_certfile=None if self._tls is None else self._tls.certfile,
                    ssl_keyfile=None if self._tls is None else self._tls.keyfile,
                    # check() refused an encrypted key without it: nothing prompts.
                    ssl_keyfile_password=None if self._tls is None else self._tls.passphrase,
                    timeout_graceful_shutdown=max(2, math.ceil(2 * self._timeouts.shutdown)),
                )
                self._uvicorn = _Uvicorn(
                    config, store, lambda: announce(self.url) if announce else None
                )
                self._uvicorn.should_exit = self._stopping
                await self._uvicorn.serve(sockets=[self._socket])
        finally:
            for number in handled:
                self._loop.remove_signal_handler(number)
            self._socket.close()

    def stop(self) -> None:
        """Stop serving (from any thread): streams end, :meth:`run` returns."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._stopping = True
            return
        with contextlib.suppress(RuntimeError):  # the loop just closed
            loop.call_soon_threadsafe(self._stop)

    def _stop(self) -> None:
        if self._stopping and self._uvicorn is not None:
            self._uvicorn.force_exit = True  # asked twice: do not wait for connections
        self._stopping = True
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True

    def _signalled(self, number: signal.Signals) -> None:
        if self.stopped_by is None:
            self.stopped_by = number
        self._stop()


def serve(
    store_path: Path,
    *,
    host: str,
    port: int,
    token_file: Path | None,
    keepalive: float = KEEPALIVE_SECONDS,
    announce: Callable[[str], None] | None = None,
    cors_origins: Collection[str] = (),
    tls: TlsFiles | None = None,
    access_log: bool = False,
) -> signal.Signals | None:
    """Serve until SIGINT or SIGTERM (streams end within a second); return which signal.

    The token is read (or made) and the port bound before the store is opened; then
    ``announce(url)`` is called once the server accepts. Every failure to start raises
    one :class:`StoreError` (:class:`InvalidInput` for the token file or the address)
    and announces nothing. ``keepalive`` is the interval, in seconds, of the keepalive
    comments of idle streams; ``cors_origins`` the web origins allowed to call it from a
    browser (see :func:`create_app`); ``tls`` the certificate and key to speak HTTPS with
    (checked before the port is bound); ``access_log`` logs one line per request. Logs go
    to stderr, one line each.
    """
    origins = validate_origins(cors_origins)
    token = ensure_token(token_file or Path(f"{store_path}.api-token"))
    server = Server(
        store_path,
        token,
        host=host,
        port=port,
        timeouts=Timeouts(keepalive=keepalive),
        cors_origins=origins,
        tls=tls,
        access_log=access_log,
    )
    config = _LOG_CONFIG
    if access_log:
        config = {**config, "loggers": {**config["loggers"], "uvicorn.access": _ACCESS_LOG}}
    logging.config.dictConfig(config)
    asyncio.run(server.run(announce=announce, signals=True))
    return server.stopped_by
