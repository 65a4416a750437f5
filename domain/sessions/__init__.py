"""Sessions: the durable record (`records`), what a record may say (`checks`), its
mounts and provisioning (`provisioning`), where a session runs (`targets`) and the
views the read routes answer with (`views`).
"""

from __future__ import annotations

__all__: list[str] = []
