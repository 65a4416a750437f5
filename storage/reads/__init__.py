"""The read side's statements, one module per topic.

* :mod:`.sessions`: the session list, one session's detail, the workspaces;
* :mod:`.transcript`: transcript pages, history and whole-item pages;
* :mod:`.turns`: turn summaries and projection tails;
* :mod:`.usage`: usage pages (typed and raw);
* :mod:`.elicitations`: pending structured questions (typed and raw) and the answers
  recorded for them;
* :mod:`.search`: transcript text found by the full-text index.

Each function reads in one transaction (one snapshot: a page and its cursors agree) and
returns the reply type of its message in :mod:`relaystore.domain.reads`. Storage reads
rows; the domain decides what they mean (seq, roles, text, turns, titles, usage coverage
and totals in :mod:`relaystore.domain.transcript_views` and :mod:`relaystore.domain.usage`,
limits and cursors in :mod:`relaystore.domain.paging`). No dispatcher lives here: the
reader actor (:mod:`relaystore.actors.reader`) matches each message to its function.
This package re-exports nothing; import from the topic modules.
"""

from __future__ import annotations

__all__: list[str] = []
