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
* A key is refused unless it is an option of its command (or ``db`` at the top), naming
  the key and the file; a value is checked by the option's own rule, as on the command
  line (a port, a web origin, a NATS URL...), and refused naming the key and the file.
* An option given on the command line overrides the file; the file overrides the
  built-in defaults and ``$RELAYSTORE_DB``.

Must not: know a command's options itself (it reads them off the command's parser), or
run a command.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...domain.errors import InvalidInput

__all__ = ["COMMANDS", "configure"]

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

    Raises :class:`InvalidInput` naming the file (and the key) for a file that cannot be
    read, is not TOML, or holds an unknown key or a bad value.
    """
    given = _path_given(argv)
    running = next((token for token in argv if token in COMMANDS), None)
    if given is None or running is None:
        return None
    where = str(Path(given))
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
    try:
        with open(where, "rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise InvalidInput("no such config file", path=where) from None
    except OSError as exc:
        raise InvalidInput(
            f"cannot read the config file: {exc.strerror or exc}", path=where
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"not a TOML file: {exc}", path=where) from None


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
        return [_scalar(action, item) for item in items]
    return _scalar(action, value)


def _scalar(action: argparse.Action, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a string or a number, got {value!r}")
    text = os.fsdecode(str(value))
    converted: object = action.type(text) if callable(action.type) else text
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"expected one of {', '.join(map(str, action.choices))}, got {value!r}")
    return converted
