"""``python -m relaystore``: the ``relaystore`` command (:mod:`relaystore.actors.cli`)."""

from __future__ import annotations

import sys

from relaystore.actors.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
