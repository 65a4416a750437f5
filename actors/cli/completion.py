"""``relaystore completion SHELL``: a shell completion script made from the parser.

Owns: the command and the shells it speaks (bash, zsh, tcsh). Path arguments complete
as files (:func:`.options.file_argument` marks them).

Must not: use a store (``--db`` given to it is refused). shtab is the optional extra
``relaystore[completion]``: it is imported when the command runs, so the rest of the
command line works without it.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from typing import TYPE_CHECKING

from ...domain.errors import InvalidInput

if TYPE_CHECKING:
    from . import Commands

__all__ = ["register"]

_SHELLS = ("bash", "zsh", "tcsh")


def register(commands: Commands) -> None:
    completion = commands.add(
        "completion",
        "print a shell completion script (needs shtab)",
        functools.partial(_completion, commands.root),
        no_store="prints a shell script",
    )
    completion.add_argument("shell", choices=_SHELLS, help="the shell the script is for")


def _completion(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        shtab = importlib.import_module("shtab")  # optional: relaystore[completion]
    except ImportError:
        raise InvalidInput(
            'completion needs shtab, which is not installed: pip install "relaystore[completion]"'
        ) from None
    script: str = shtab.complete(parser, shell=args.shell)
    sys.stdout.write(script if script.endswith("\n") else script + "\n")
    return 0
