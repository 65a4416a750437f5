"""The base of every relaystore message: ``Request[R]`` names its reply type ``R``.

It lives apart from :mod:`relaystore.domain.messages` so that modules defining messages of their
own (:mod:`relaystore.domain.reads`) need not import the module that gathers them into unions.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

__all__ = ["Request"]

R = TypeVar("R")


class Request(msgspec.Struct, Generic[R], frozen=True, kw_only=True):
    """A message whose reply is an ``R``."""
