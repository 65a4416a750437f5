"""`relaystore serve`: the HTTP server (`server`), its connections (`protocol`), the route
table (`app`), the one preamble every read route passes (`preamble`), the event stream
(`events`), the origin's read routes (`reads`), search (`search`) and the viewer (`viewer`).

Needs the `http` extra. The runtime a supervisor imports never loads this package.
"""

from __future__ import annotations

__all__: list[str] = []
