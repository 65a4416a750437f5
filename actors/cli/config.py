"""The config file of the long-running commands, ``serve`` and ``publish``
(``--config PATH``): TOML, read with the standard library's :mod:`tomllib`.

The file::

    db = "/var/lib/relaystore/store.sqlite3"   # the store (as --db)

    [serve]                                      # serve's options, spelled as on the
    host = "127.0.0.1"                           # command line without the dashes
    port = 8040
    cors-origin = ["https://viewer.example"]     # a repeatable option takes a list
    access-log = true                            # a flag takes true or false

    [publish]
    nats = "nats://127.0.0.1:4222"

Guarantees:

* One file serves both commands: each reads its own table, and every table is checked,
  so a typo anywhere is caught whichever command reads the file.
* The file is a regular file of at most :data:`MAX_BYTES` of UTF-8 text: a FIFO, a
  device or a folder is refused without reading it, and so is a larger or binary file.
* A key is refused unless it is an option of its command (or ``db`` at the top), naming
  the key and the file; a value is checked by the option's own rule, as on the command
  line (a port, a web origin, a NATS URL...), and refused naming the key and the file. A
  value is a TOML string, a number only for an option that takes one (``port = 8040``;
  ``token-file = 3`` is refused, not taken as a file named ``3``).
* An option given on the command line overrides the file, a repeatable one too (the
  command line's ``--cors-origin`` values replace the file's list, not add to it); the
  file overrides the built-in defaults and ``$RELAYSTORE_DB``.
* Every refusal is one line naming the file (and the key), exit 2 as for any other
  usage error, before anything starts.

Must not: know a command's options itself (it reads them off the command's parser), or
run a command.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...domain.errors import InvalidInput
from .options import count, port, refuse_usage, seconds, seq

__all__ = ["COMMANDS", "MAX_BYTES", "configure", "read_small_file"]

MAX_BYTES = 1 << 20
"""The largest config file read (a config file is a few hundred bytes)."""
_NUMERIC = frozenset({port, seconds, count, seq})
"""The option types a TOML number may be given for (a number for any other option, a
path or a host, is a mistake, not a name)."""

COMMANDS = ("serve", "publish")
"""The commands that take ``--config``."""
_OWN_OPTIONS = frozenset({"config", "db", "help"})


def _path_given(argv: Sequence[str]) -> str | None:
    """The value of ``--config`` in ``argv`` (the last one given), if any."""
    found = None
    for index, token in enumerate(argv):
        if token == "--":
            break
        if token == "--config" and index + 1 < len(argv):
            found = argv[index + 1]
        elif token.startswith("--config="):
            found = token.partition("=")[2]
    return found


def configure(commands: dict[str, argparse.ArgumentParser], argv: Sequence[str]) -> str | None:
    """Read the file ``argv`` names with ``--config`` (nothing without one), check every
    table against ``commands`` (command name -> its parser), and make the table of the
    command ``argv`` runs that parser's defaults; return the file's ``db``, if any.

    A file that cannot be read, is not TOML, or holds an unknown key or a bad value is a
    usage error: one line naming the file (and the key), exit 2 (``SystemExit``).
    """
    given = _path_given(argv)
    running = next((token for token in argv if token in COMMANDS), None)
    if given is None or running is None:
        return None
    try:
        return _configure(commands, str(Path(given)), running)
    except InvalidInput as exc:
        refuse_usage(str(exc))


def _configure(
    commands: dict[str, argparse.ArgumentParser], where: str, running: str
) -> str | None:
    document = _read(where)
    db = document.pop("db", None)
    if db is not None and (not isinstance(db, str) or not db):
        raise InvalidInput("db: expected the store's path as a non-empty string", path=where)
    for key in document:
        if key not in commands:
            raise InvalidInput(
                f"unknown key {key!r}; the file takes db and the tables "
                f"{', '.join(f'[{name}]' for name in COMMANDS)}",
                path=where,
            )
    for name, parser in commands.items():
        table = document.get(name, {})
        if not isinstance(table, dict):
            raise InvalidInput(f"{name}: expected a table [{name}]", path=where)
        defaults = _checked_table(name, parser, table, where)
        if name == running:
            for action in parser._actions:
                if action.dest in defaults:
                    action.required = False  # the file gives it
            parser.set_defaults(**defaults)
    return db


def _read(where: str) -> dict[str, Any]:
    raw = read_small_file(where, MAX_BYTES, "config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"not a TOML file: not UTF-8 text (byte {exc.start})", path=where
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"not a TOML file: {exc}", path=where) from None


def read_small_file(where: str, limit: int, what: str) -> bytes:
    """The bytes of the regular file ``where`` (a ``what``: "config file"), at most
    ``limit`` of them; :class:`InvalidInput` naming the file otherwise.

    Opened without blocking (a FIFO would wait for a writer) and checked to be a regular
    file before a byte is read (a device such as ``/dev/zero`` never ends).
    """
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InvalidInput(f"no such {what}", path=where) from None
    except OSError as exc:
        raise InvalidInput(f"cannot read the {what}: {exc.strerror or exc}", path=where) from None
    with contextlib.closing(os.fdopen(fd, "rb", buffering=0)) as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(f"not a regular file; give a {what}", path=where)
        os.set_blocking(fd, True)
        try:
            raw = file.read(limit + 1)
        except OSError as exc:
            raise InvalidInput(
                f"cannot read the {what}: {exc.strerror or exc}", path=where
            ) from None
    if raw is None or len(raw) > limit:
        raise InvalidInput(f"the {what} is larger than {limit} bytes", path=where)
    return bytes(raw)


def _checked_table(
    name: str, parser: argparse.ArgumentParser, table: dict[str, Any], where: str
) -> dict[str, Any]:
    """``table``'s values as the parser's defaults (dest -> value), each checked."""
    options = {
        option[2:]: action
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option[2:] not in _OWN_OPTIONS
    }
    defaults: dict[str, Any] = {}
    for key, value in table.items():
        action = options.get(key)
        if action is None:
            raise InvalidInput(
                f"unknown key {key!r} in [{name}]; its keys are {', '.join(sorted(options))}",
                path=where,
            )
        try:
            defaults[action.dest] = _value(action, value)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise InvalidInput(f"[{name}] {key}: {exc}", path=where) from None
    return defaults


def _value(action: argparse.Action, value: object) -> object:
    """``value`` checked and converted as the command line would convert it."""
    if action.nargs == 0:  # a flag: store_true, --x/--no-x
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return _FileItems(_scalar(action, item) for item in items)
    return _scalar(action, value)


class _FileItems(list[Any]):
    """A repeatable option's values from the file: the command line's replace them.

    argparse's ``append`` copies the default before adding the first value given on the
    command line; this list's copy is empty, so the values given there replace the
    file's, as every other option given there does.
    """

    def __copy__(self) -> list[Any]:
        return []


def _scalar(action: argparse.Action, value: object) -> object:
    numeric = action.type in _NUMERIC
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        wanted = "a string or a number" if numeric else "a string"
        raise ValueError(f"expected {wanted}, got {value!r}")
    if not numeric and not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    text = os.fsdecode(str(value))
    converted: object = action.type(text) if callable(action.type) else text
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"expected one of {', '.join(map(str, action.choices))}, got {value!r}")
    return converted
