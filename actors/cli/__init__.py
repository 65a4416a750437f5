"""The ``relaystore`` command: replay journals, verify them, print, follow, serve and keep
the store.

Exit status 0 on success, 1 when the input or the store is bad (one line on stderr, never
a traceback), 2 on a usage error (argparse's usage line: an unknown command, a missing
argument, an option value out of range), 130 when interrupted (Ctrl-C, SIGINT). A
SIGINT that the command inherited ignored (a background job of a non-interactive shell
starts so, and Python then leaves it ignored) is taken again when :func:`main` starts
(:func:`_take_interrupts`), so every command ends on SIGINT, as ``serve`` and ``replay``
already did with handlers of their own: else ``events --follow`` and ``transcript
--follow`` (and their ``--wait``) would ignore it and follow for ever.

``--db PATH`` may come before or after the command; without it the store is
``$RELAYSTORE_DB``, else ``relaystore.sqlite3`` in the current folder.

This module owns :func:`main`, the options every command shares (``--version``,
``--db``), and the one way a command is added: each command module's ``register``
calls :meth:`Commands.add`, which makes the command's parser beside its handler; ``main``
parses and calls the handler the parser chose. The command groups, one module each:

* :mod:`.journals`: ``replay``, ``verify``;
* :mod:`.feed`: ``events``, ``show``, ``stats``;
* :mod:`.reads`: ``sessions``, ``transcript``, ``history``, ``usage``;
* :mod:`.finding`: ``search``, ``export``;
* :mod:`.serve`: ``serve``;
* :mod:`.keeping`: ``backup``, ``vacuum``, ``new-store-id``, ``reproject``, ``audit``,
  ``prune-log``, ``compact``, ``delete``, ``checkpoint``;
* :mod:`.fleet`: ``publish``, ``restore``, ``mirror``, ``fleet events`` (NATS);
* :mod:`.completion`: ``completion``.

It must not hold a command's work, nor load the runtime (actors, SQLite, the codec)
before a handler runs: ``--version``, ``--help`` and a usage error load none of it, so
every command module imports the runtime inside its handlers.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from ...domain.errors import StoreError
from . import completion, feed, finding, fleet, journals, keeping, reads, serve
from .config import COMMANDS as CONFIGURED_COMMANDS, configure
from .options import Parser, file_argument, path
from .output import fail

__all__ = ["DEFAULT_DB", "Commands", "Handler", "main"]

DEFAULT_DB = "relaystore.sqlite3"
_DEBUG_ENV = "RELAYSTORE_DEBUG"  # set to 1 to see the traceback of an unexpected error

Handler = Callable[[argparse.Namespace], int]
"""A command's handler: runs the parsed command, returns its exit status."""

_GROUPS = (journals, feed, reads, finding, serve, keeping, fleet, completion)
"""The command modules, in the order ``--help`` lists their commands."""


def _version() -> str:
    """The installed distribution's version: what ``relaystore.__version__`` says (the
    command line is below the facade, so it asks the same metadata)."""
    try:
        return importlib.metadata.version("relaystore")
    except importlib.metadata.PackageNotFoundError:  # a bare source tree
        return "0+unknown"


class Commands:
    """The one way a command is added (:meth:`add`), handed to each module's
    ``register``."""

    def __init__(self, root: argparse.ArgumentParser) -> None:
        self.root = root
        """The whole command line's parser (``completion`` prints a script from it)."""
        db_help = f"the store (default ${{RELAYSTORE_DB}}, else {DEFAULT_DB})"
        file_argument(
            root.add_argument("--db", type=path, default=None, metavar="PATH", help=db_help)
        )
        # The same option after the command; SUPPRESS keeps the value given before it. A
        # command that uses no store takes it hidden, to refuse it by name (main).
        self._after = Parser(add_help=False)
        file_argument(
            self._after.add_argument(
                "--db", type=path, default=argparse.SUPPRESS, metavar="PATH", help=db_help
            )
        )
        self.no_db = Parser(add_help=False)
        """The parent parser of a (sub)command that uses no store: ``--db`` refused."""
        self.no_db.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self._commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        self, name: str, text: str, handler: Handler, *, no_store: str | None = None
    ) -> argparse.ArgumentParser:
        """Add command ``name`` (``text``: its help) run by ``handler``; returns its parser
        for the command's own options. ``no_store`` says what a command that uses no store
        does instead: ``--db`` given to it is refused, naming that."""
        parser = self._commands.add_parser(
            name, help=text, description=text, parents=[self.no_db if no_store else self._after]
        )
        parser.set_defaults(handler=handler, no_store=no_store)
        return parser


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="relaystore",
        description="Replay, verify, read, serve and keep relaystore event stores.",
        epilog="--db may also follow the command. Exit status: 0 success, 1 bad input or "
        "store (one line on stderr), 2 usage error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"relaystore {_version()}")
    commands = Commands(parser)
    for group in _GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    _take_interrupts()
    try:
        parser = _parser()
        given = list(sys.argv[1:] if argv is None else argv)
        configured_db = configure(
            {name: _subparser(parser, name) for name in CONFIGURED_COMMANDS}, given
        )
        args = parser.parse_args(given)
        if args.db is None:
            args.db = configured_db
        if args.no_store is not None and args.db is not None:
            _subparser(parser, args.command).error(
                f"--db is not used by {args.command}, which {args.no_store}; leave it out"
            )
        if args.db is None:
            args.db = os.environ.get("RELAYSTORE_DB") or DEFAULT_DB
        handler: Handler = args.handler
        return handler(args)
    except StoreError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``relaystore events | head``): stop quietly, and keep
        # Python from complaining when it flushes stdout on the way out.
        _silence_stdout()
        return 0
    except OSError as exc:
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename is not None else ""
        return fail(f"{where}{exc.strerror or exc}")
    except Exception as exc:  # a bug must still end in one line (re-raised on request)
        if os.environ.get(_DEBUG_ENV):
            raise
        return fail(
            f"unexpected {type(exc).__name__}: {exc} (set {_DEBUG_ENV}=1 for the traceback)"
        )


def _take_interrupts() -> None:
    """Let SIGINT interrupt the command (``KeyboardInterrupt``, exit 130) even when the
    process started with it ignored; a handler already set (an embedder's) is kept, and
    only the main thread may set one."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of command ``name``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise AssertionError(name)  # pragma: no cover - _parser() always has its commands


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
