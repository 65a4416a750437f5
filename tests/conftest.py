"""Shared fixtures and the two lanes: every test leaves no actor running, and a test that
starts a process is marked ``integration``.

The fast lane (``-m "not integration and not slow"``) is the suite without its processes:
a test not marked ``integration`` that starts one (a ``subprocess.Popen``: the
``relaystore`` command, a projection worker, nats-server, chromedriver, any tool) fails,
naming the marker, so the fast lane stays fast and the marking stays exact in that
direction. The full run (``-m 'not slow'``, the default) runs both lanes.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Generator, Iterator
from typing import Any

import pykka
import pytest

_POPEN_INIT = subprocess.Popen.__init__


@pytest.fixture(autouse=True)
def _stop_all_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def _refuse_process(item: pytest.Item, refused: list[str]) -> Any:
    def refuse(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        refused.append(repr(args)[:200])
        raise AssertionError(_unmarked(item, refused))

    return refuse


def _unmarked(item: pytest.Item, refused: list[str]) -> str:
    return (
        f"{item.nodeid} started a process ({refused[0]}) but is not marked integration: "
        "mark it (pytestmark = pytest.mark.integration, or @pytest.mark.integration) "
        "or run the command in process (tests.actors.cli_support.cli)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A case parametrized ``"process"`` (the projection mode that starts worker
    processes) is ``integration``; its ``"thread"`` twin stays in the fast lane."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "process" in callspec.params.values():
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    with _no_process_unless_integration(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    with _no_process_unless_integration(item):
        return (yield)


@contextlib.contextmanager
def _no_process_unless_integration(item: pytest.Item) -> Iterator[None]:
    """While an unmarked test sets up or runs, ``subprocess.Popen`` refuses to start, and
    the test fails even where the code that tried caught the refusal."""
    if item.get_closest_marker("integration") is not None:
        yield
        return
    refused: list[str] = []
    subprocess.Popen.__init__ = _refuse_process(item, refused)  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = _POPEN_INIT  # type: ignore[method-assign]
    if refused:  # also when the code that tried caught the refusal (a thread, a handler)
        raise AssertionError(_unmarked(item, refused))
