"""``relaystore serve``: the web viewer, the read routes and the event stream over HTTP,
read-only.

Owns: serve's parser (its options may also come from ``--config``, :mod:`.config`), the
refusals made before anything listens (a missing extra; half a TLS pair, a certificate
or key that does not load, an encrypted key without its passphrase file, each a usage
error, exit 2, and never a prompt; a missing or foreign store; all before the token file
is made), the warning of plain HTTP beyond
loopback, and the exit status (Ctrl-C 130, SIGTERM 0).

Must not: answer a request itself (:mod:`..http` does), or write the store. The HTTP
stack is the optional extra ``relaystore[http]`` (starlette, sse-starlette, uvicorn):
it is looked for when the command runs and :mod:`..http` is imported lazily, so the
rest of the command line works without it.
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ...domain.errors import InvalidInput
from ...domain.wording import install_extra
from .config import read_small_file
from .follow import open_read_only
from .options import (
    config_option,
    file_argument,
    host,
    path,
    port,
    refuse_usage,
    seconds,
    web_origin,
)

if TYPE_CHECKING:
    from ..http.server import TlsFiles
    from . import Commands

__all__ = ["register"]

_HTTP_MODULES = ("starlette", "sse_starlette", "uvicorn")
_MAX_PASSPHRASE_BYTES = 4096


def register(commands: Commands) -> None:
    serve = commands.add(
        "serve",
        "serve the web viewer, the read routes and the event stream over HTTP, read-only",
        _serve,
    )
    serve.add_argument(
        "--host",
        type=host,
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; beyond loopback, use TLS)",
    )
    serve.add_argument(
        "--port",
        type=port,
        default=8040,
        help="the TCP port (default 8040; 0: a free port, announced)",
    )
    file_argument(
        serve.add_argument(
            "--token-file",
            type=path,
            default=None,
            metavar="PATH",
            help="bearer token file, created 0600 on first start (default: DB.api-token)",
        )
    )
    serve.add_argument(
        "--keepalive",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="keepalive comment interval of idle streams (default 15)",
    )
    serve.add_argument(
        "--cors-origin",
        type=web_origin,
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (scheme://host[:port]) whose pages may call the API with the "
        "bearer token (CORS); repeat for several; others are refused",
    )
    serve.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="log one line per request on stderr (client, request line, status)",
    )
    for name, what in (("certfile", "certificate chain"), ("keyfile", "private key")):
        file_argument(
            serve.add_argument(
                f"--{name}",
                type=path,
                default=None,
                metavar="PATH",
                help=f"speak HTTPS with this PEM {what} (give --certfile and --keyfile together)",
            )
        )
    file_argument(
        serve.add_argument(
            "--keyfile-passphrase-file",
            type=path,
            default=None,
            metavar="PATH",
            help="the passphrase of an encrypted --keyfile, on the first line of this file "
            "(serve never prompts for it)",
        )
    )
    config_option(serve)


def _serve(args: argparse.Namespace) -> int:
    missing = [name for name in _HTTP_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidInput(
            f"serve needs {', '.join(missing)}, which are not installed: " + install_extra("http")
        )
    from ..http import (
        server as http,  # the optional extra relaystore[http]: imported once it is there
    )

    try:
        tls = _tls(args, http.TlsFiles)
    except InvalidInput as exc:  # an option's value: a usage error, before anything starts
        refuse_usage(str(exc))
    # Refuse a missing or foreign store in one line before the token file is made.
    with open_read_only(args.db):
        pass

    token_file = Path(args.token_file) if args.token_file else Path(f"{args.db}.api-token")
    keepalive = http.KEEPALIVE_SECONDS if args.keepalive is None else args.keepalive
    if tls is None and http.beyond_loopback(args.host):
        print(
            f"relaystore: warning: serving on {args.host}, beyond loopback, without TLS: the "
            "bearer token and every answer cross the network readable; give --certfile and "
            "--keyfile, or serve behind a TLS proxy",
            file=sys.stderr,
            flush=True,
        )

    def announce(url: str) -> None:  # called once the port is bound and the store open
        print(
            f"relaystore: serving {args.db} at {url}/api/v1/events "
            f"(bearer token in {token_file}; the viewer at {url}/); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )

    stopped_by = http.serve(
        Path(args.db),
        host=args.host,
        port=args.port,
        token_file=token_file,
        keepalive=keepalive,
        announce=announce,
        cors_origins=args.cors_origin,
        tls=tls,
        access_log=args.access_log,
    )
    # Ctrl-C exits 130 as for every command (a script running serve sees the interrupt);
    # SIGTERM, how a service manager stops it, is a normal stop.
    return 130 if stopped_by == signal.SIGINT else 0


def _tls(args: argparse.Namespace, files: type[TlsFiles]) -> TlsFiles | None:
    """The TLS files the options name, checked (loaded once, never prompting); None
    without them. Raises :class:`InvalidInput` naming the option or file at fault."""
    if (args.certfile is None) != (args.keyfile is None):
        given, lacking = (
            ("--certfile", "--keyfile") if args.keyfile is None else ("--keyfile", "--certfile")
        )
        raise InvalidInput(f"{given} needs {lacking} too: TLS takes the certificate and its key")
    if args.certfile is None:
        if args.keyfile_passphrase_file is not None:
            raise InvalidInput("--keyfile-passphrase-file is for an encrypted --keyfile; give one")
        return None
    passphrase = None
    if args.keyfile_passphrase_file is not None:
        where = args.keyfile_passphrase_file
        try:
            text = read_small_file(where, _MAX_PASSPHRASE_BYTES, "passphrase file").decode()
        except UnicodeDecodeError:
            raise InvalidInput("the passphrase file is not UTF-8 text", path=where) from None
        passphrase = text.splitlines()[0] if text.strip() else None
        if passphrase is None:
            raise InvalidInput("the passphrase file is empty", path=where)
    tls = files(Path(args.certfile), Path(args.keyfile), passphrase)
    tls.check()
    return tls
