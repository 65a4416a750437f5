"""The command line's option values and the option groups several commands share.

Owns: the checks of option values (a bad one is a usage error, exit 2, in argparse's
usage line: a sequence number, a count, a port, seconds, an id, a NATS name, an origin,
a SHA-256; one only running can check is refused in one line, exit 2:
:func:`refuse_usage`), how a path argument completes in a shell (:func:`file_argument`), the
parser class whose usage errors mask credentials (:class:`Parser`), and the options more
than one command takes (``--config``, the NATS options).

Must not: read a store, run a command, or import the runtime at module level. The
checks that need :mod:`msgspec`-backed modules (``INT64_MAX``, the digest test) import
them when a value is checked, so that ``--version``, ``--help`` and a usage error load
no runtime (``tests/actors/cli/test_cli_small.py``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

from ...domain.errors import InvalidInput
from ...domain.ids import validate_id
from ...domain.origins import validate_origin
from ...domain.redaction import redact
from ..nats.common import (
    validate_consumer_name,
    validate_servers,
    validate_store_id,
    validate_stream_name,
    validate_subject_prefix,
)
from .output import fail

__all__ = [
    "SOURCE_HELP",
    "Parser",
    "checked_id",
    "config_option",
    "count",
    "file_argument",
    "host",
    "nats_name",
    "nats_options",
    "path",
    "port",
    "refuse_usage",
    "seconds",
    "seq",
    "sha256",
    "store_id",
    "web_origin",
]

# How shtab completes a path argument, per shell (shtab.FILE, spelled out so that building
# the parser never needs shtab).
_FILE_COMPLETION = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}

SOURCE_HELP = (
    "a worker root, a folder of worker roots, a relay-journal/ folder, or .jsonl / .jsonl.gz "
    "files (the files of one session are read in ordinal order, in whatever order given)"
)


class Parser(argparse.ArgumentParser):
    """The command line's parser: a usage error never shows a credential it echoes
    (an option's value, an unrecognized argument); its subcommands' parsers are too."""

    def error(self, message: str) -> NoReturn:
        super().error(redact(message))


def refuse_usage(message: str) -> NoReturn:
    """Refuse an option's value that only running could check (a config file, a TLS
    key): ``message`` as the command's one line (:func:`~.output.fail`), exit 2 as for
    every usage error, before anything starts."""
    fail(message)
    raise SystemExit(2)


def file_argument(action: argparse.Action) -> None:
    """Mark ``action``'s value as a path, for the shell completion scripts."""
    action.complete = _FILE_COMPLETION  # type: ignore[attr-defined]  # read by shtab


def _whole(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def seq(text: str) -> int:
    """A sequence number: 0 up to SQLite's largest integer."""
    from ...domain.integers import INT64_MAX  # loads msgspec: only when a value is checked

    value = _whole(text)
    if not 0 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be 0 or more (and at most {INT64_MAX}), got {text}")
    return value


def count(text: str) -> int:
    """A positive count (``--limit``): 1 up to SQLite's largest integer."""
    from ...domain.integers import INT64_MAX  # loads msgspec: only when a value is checked

    value = _whole(text)
    if not 1 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def port(text: str) -> int:
    value = _whole(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0 (any free one) to 65535, got {text}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def host(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the host must not be empty")
    return text


def path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("the path must not be empty")
    return text


def _checked(check: Callable[[str], object], name: str) -> Callable[[str], str]:
    """An option value checked by ``check`` (its :class:`InvalidInput` is a usage error);
    ``name`` is how argparse names the value in its message."""

    def run(text: str) -> str:
        try:
            check(text)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(exc.detail) from None
        return text

    run.__name__ = name
    return run


def checked_id(kind: str) -> Callable[[str], str]:
    """A ``kind`` id (session, workspace, request) by the store's id rule."""
    return _checked(lambda text: validate_id(kind, text), f"{kind} id")


def nats_name(kind: str) -> Callable[[str], str]:
    """A JetStream stream (``kind`` "stream") or consumer name."""
    return _checked(validate_stream_name if kind == "stream" else validate_consumer_name, kind)


store_id = _checked(validate_store_id, "store id")
web_origin = _checked(validate_origin, "origin")
_nats_servers = _checked(validate_servers, "NATS URL")
_subject_prefix = _checked(validate_subject_prefix, "subject prefix")


def sha256(text: str) -> str:
    from ...domain.hashing import is_relay_digest  # loads msgspec: only when checked

    if not is_relay_digest(text):
        raise argparse.ArgumentTypeError(
            f"expected 64 lowercase hexadecimal characters, got {text!r}"
        )
    return text


def config_option(parser: argparse.ArgumentParser) -> None:
    """``--config PATH``: the TOML file of the long-running commands (:mod:`.config`)."""
    file_argument(
        parser.add_argument(
            "--config",
            type=path,
            default=None,
            metavar="PATH",
            help="read options from this TOML file (db, and this command's table); "
            "options given here override it",
        )
    )


def nats_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--nats``, ``--stream`` and ``--subject-prefix``: where a NATS command reads or
    publishes."""
    parser.add_argument(
        "--nats",
        type=_nats_servers,
        required=required,
        metavar="URL",
        help="the NATS server(s): nats://HOST:PORT, comma-separated for several",
    )
    parser.add_argument(
        "--stream",
        type=nats_name("stream"),
        default="RELAYSTORE",
        metavar="NAME",
        help="the JetStream stream (default RELAYSTORE)",
    )
    parser.add_argument(
        "--subject-prefix",
        type=_subject_prefix,
        default="relaystore",
        metavar="PREFIX",
        help="subjects are PREFIX.STORE_ID.WORKSPACE.SESSION (default relaystore)",
    )
