"""Usage: what a usage page totals and how it counts the reports it holds.

Owns the rules of a usage page's summary, stated once: the token counters it totals
(:data:`USAGE_COUNTERS`, in the origin's order); its **coverage**
(:func:`usage_coverage`): how many recorded turns carry a whole-turn report (scope
``turn``), a last-request report, a report of another scope, or none; and its **totals**
(:func:`usage_totals`): only whole-turn reports (:data:`TOTALLED_SCOPE`) count, and a
counter no such report carries is absent.

Pure: storage counts the stored turns by report scope and sums the counters of the
scope named here (:data:`TOTALLED_SCOPE`); these functions decide what the numbers mean.
"""

from __future__ import annotations

from collections.abc import Iterable

from .read_replies import UsageCounterTotal, UsageCoverage

__all__ = ["TOTALLED_SCOPE", "USAGE_COUNTERS", "usage_coverage", "usage_totals"]

USAGE_COUNTERS = (
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "thought_tokens",
    "cached_read_tokens",
    "cached_write_tokens",
)
"""The token counters a usage page totals, in the order the origin reports them."""


TOTALLED_SCOPE = "turn"
"""The report scope whose counters a usage page totals: whole-turn reports only (a
last-request report covers part of a turn, so adding it would mix measures)."""


def usage_coverage(scope_counts: Iterable[tuple[object, int]]) -> UsageCoverage:
    """How many recorded turns carry which kind of report, from the number of turns of
    each stored ``usage.scope`` (``None``: turns without a report)."""
    coverage = UsageCoverage()
    for scope, n in scope_counts:
        coverage.recorded_turns += n
        if scope == TOTALLED_SCOPE:
            coverage.full_turn_reports += n
        elif scope == "last_request":
            coverage.last_request_reports += n
        elif scope is not None:
            coverage.unspecified_reports += n
        else:
            coverage.missing_reports += n
    return coverage


def usage_totals(
    sums: Iterable[tuple[int | float | None, int]],
) -> dict[str, UsageCounterTotal]:
    """The page's totals from each of :data:`USAGE_COUNTERS` summed over the
    :data:`TOTALLED_SCOPE` reports (in that order: the sum, ``None`` when no report
    carries the counter, and how many reports carry it); an absent counter is left out."""
    return {
        counter: UsageCounterTotal(tokens=int(tokens), reported_turns=reported)
        for counter, (tokens, reported) in zip(USAGE_COUNTERS, sums, strict=True)
        if tokens is not None
    }
