"""relaystore's benchmark suite: one module per benchmark, run by ``benchmarks/run.py``.

Each module has ``NAME`` and ``run(ctx) -> list[Figure]``; every figure carries a
baseline measured in the same run. Modules are imported only when selected, so this
package stays light (the memory benchmark's children import it too).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["BENCHMARKS", "load"]

BENCHMARKS = {
    "replay": "suite.replay",
    "writer": "suite.writer",
    "peer": "suite.peer",
    "roundtrip": "suite.roundtrip",
    "reads": "suite.reads",
    "memory": "suite.memory",
    "open": "suite.opening",
    "sessions": "suite.sessions",
    "embedding": "suite.embedding",
    "toolcalls": "suite.toolcalls",
    "pages": "suite.pages",
    "nats": "suite.nats",
    "relaylog": "suite.relaylog",
    "search": "suite.search",
    "wal": "suite.walpages",
}
"""Benchmark name -> module, in the order a full run takes them."""


def load(name: str) -> ModuleType:
    return importlib.import_module(BENCHMARKS[name])
