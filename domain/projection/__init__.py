"""The projection: relay events folded into a session's materialized state and API events.

Each module answers "where is X projected?":

=================  ====================================================================
module             holds
=================  ====================================================================
``session``        :class:`SessionProjection`: one session, its index, ``apply(event)``
``observations``   one handler per observation kind, and the handler table
``commands``       the command lifecycle: queued, started, completed, refused
``goal``           the projected goal state
``feed``           the API events one relay event yields (:func:`derive_api_events`)
``tools``          tool calls and terminal output
``calls``          what a stored ACP tool call says (terminal ids, fallback, raw result)
``streams``        agent and thought chunks, plans
``text``           terminal sanitizing, hidden prompt context, titles, shell lines
``context``        the projection context and transcript item helpers
``index``          the transcript index
``frozen``         the transcript list, its items behind a window of the newest kept as bytes
``integrity``      item-change, queue and title rules (the only statement of them)
``page``           :class:`PageDelta`: a page of mutations coalesced for the store
``page_wire``      a sealed page as msgpack bytes: how it crosses a worker's pipe
``markers``        stable-id prefixes and fixed texts (wire data)
=================  ====================================================================
"""

from __future__ import annotations

from .feed import derive_api_events
from .goal import GOAL_STATE_KEY
from .page import PageDelta
from .session import SessionProjection

__all__ = ["GOAL_STATE_KEY", "PageDelta", "SessionProjection", "derive_api_events"]
