"""Maintenance: carrying out one request and wording its answer (`runs`), and the desk a
live store keeps for requests other processes leave (`desk`).
"""

from __future__ import annotations

__all__: list[str] = []
