"""Projection in worker processes: the pool (`pool`), the child process (`child`), the
framing of their pipe (`protocol`, `pipe`), the parent's proxy of one session
(`proxy`) and the runner threads that feed them (`runners`).
"""

from __future__ import annotations

__all__: list[str] = []
