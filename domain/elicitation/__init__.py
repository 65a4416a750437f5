"""ACP form elicitations: the question and answer types (`forms`), parsing an agent's
ACP request into them (`acp`), and checking an answer against its question (`answers`).
"""

from __future__ import annotations

__all__: list[str] = []
