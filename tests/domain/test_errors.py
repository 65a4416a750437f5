"""The error tree: the module's map names every error it defines, and each is exported."""

from __future__ import annotations

import relaystore
from relaystore.domain import errors


def _store_errors() -> list[str]:
    return [
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), errors.StoreError)
    ]


def test_the_tree_in_the_module_docstring_names_every_error() -> None:
    tree = errors.__doc__ or ""
    missing = [name for name in _store_errors() if name not in tree.split()]
    assert missing == []


def test_every_error_is_part_of_the_contract() -> None:
    assert [name for name in _store_errors() if name not in relaystore.__all__] == []


def test_store_busy_is_a_store_error_and_says_it_is_retryable() -> None:
    assert issubclass(relaystore.StoreBusy, relaystore.StoreError)
    assert "retry" in (relaystore.StoreBusy.__doc__ or "").lower()


def test_store_closed_says_one_thing_unless_told_more() -> None:
    assert str(relaystore.StoreClosed()) == errors.STORE_CLOSED
