"""The roles a transcript item plays, as the origin's read API names them.

Its own module, importing nothing, so the command line can offer the roles as choices
without loading the codec.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["TranscriptRole"]

TranscriptRole = Literal[
    "user", "agent", "thought", "tool", "terminal", "plan", "plan_proposal", "system"
]
