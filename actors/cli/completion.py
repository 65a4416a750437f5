"""``relaystore completion SHELL``: a shell completion script made from the parser.

Owns: the command and the shells it speaks (bash, zsh, fish, tcsh: those shtab
writes). Path arguments complete as files (:func:`.options.file_argument` marks them);
session arguments (``SESSION``, ``--session``) complete, in bash, zsh and fish, with the
ids ``relaystore sessions`` lists from the store the command line names (its ``--db``,
else ``RELAYSTORE_DB`` or the default store).

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
from ...domain.wording import install_extra

if TYPE_CHECKING:
    from . import Commands

__all__ = ["register"]

_SHELLS = ("bash", "zsh", "fish", "tcsh")

_SESSION_TYPE = "session id"
"""How :func:`.options.checked_id` names a session argument's type (argparse's name)."""

# Each shell's function listing the session ids of the store named on the line being
# completed (its --db, if given). A store that cannot be read completes nothing.
_BASH_SESSIONS = """\
_relaystore_sessions() {
  local i db=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ ${COMP_WORDS[i]} == --db ]] && db=(--db "${COMP_WORDS[i + 1]}")
  done
  compgen -W "$(relaystore "${db[@]}" sessions 2>/dev/null | cut -f1)" -- "$1"
}"""
_ZSH_SESSIONS = """\
_relaystore_sessions() {
  local -a db ids
  local at=${words[(I)--db]}
  (( at )) && db=(--db "${words[at + 1]}")
  ids=(${(f)"$(relaystore $db sessions 2>/dev/null | cut -f1)"})
  compadd -a ids
}"""
_FISH_SESSIONS = """\
function _relaystore_sessions
  set -l words (commandline -opc)
  set -l db
  set -l at (contains -i -- --db $words)
  and set db --db $words[(math $at + 1)]
  relaystore $db sessions 2>/dev/null | string split -f1 \t
end"""
_SESSIONS = {"bash": "_relaystore_sessions", "zsh": "_relaystore_sessions"}
_SESSIONS["fish"] = "(_relaystore_sessions)"
_PREAMBLES = {"bash": _BASH_SESSIONS, "zsh": _ZSH_SESSIONS, "fish": _FISH_SESSIONS}


def register(commands: Commands) -> None:
    completion = commands.add(
        "completion",
        "print a shell completion script (needs shtab)",
        functools.partial(_completion, commands.root),
        no_store="prints a shell script",
    )
    completion.add_argument(
        "shell", choices=_SHELLS, help=f"the shell the script is for: {', '.join(_SHELLS)}"
    )


def _completion(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        shtab = importlib.import_module("shtab")  # optional: relaystore[completion]
    except ImportError:
        raise InvalidInput(
            f"completion needs shtab, which is not installed: {install_extra('completion')}"
        ) from None
    _complete_sessions(parser)
    script: str = shtab.complete(parser, shell=args.shell, preamble=_PREAMBLES)
    sys.stdout.write(script if script.endswith("\n") else script + "\n")
    return 0


def _complete_sessions(parser: argparse.ArgumentParser) -> None:
    """Mark every session argument of ``parser`` and its subcommands' for shtab."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                _complete_sessions(subparser)
        elif getattr(action.type, "__name__", None) == _SESSION_TYPE:
            action.complete = _SESSIONS  # type: ignore[attr-defined]  # read by shtab
