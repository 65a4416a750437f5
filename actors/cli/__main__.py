"""``python -m relaystore.actors.cli``: the ``relaystore`` command (:func:`main`).

Owns nothing but the call; the command line is the package's.
"""

from __future__ import annotations

import sys

from . import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
