"""Running the ``relaystore`` command in this process: the fast lane's command line.

A support module, not a test module: :mod:`tests.actors.cli_support` runs a command
through :func:`run_in_process` (its ``cli``, ``ok``, ``replay``, ``events``, ``show``), so a
case that only parses and prints starts no interpreter. It calls the command line's
``main(argv)`` as ``python -m relaystore.actors.cli`` would, with what a process would
have of its own: the environment it is given (and nothing else), its folder, its stdin
(empty), its stdout and stderr (captured as UTF-8 text) and its exit status (``SystemExit``
from ``--help``, ``--version`` and a usage error taken as the status it carries).

What it cannot give, a subprocess case keeps (``cli_process``, ``start``, ``run_command``):
a terminal, a signal sent from outside, the interpreter's exit (atexit, flushing on the way
out), a second process holding the store, a reader that goes away.

Every run leaves this process as it found it, or the test fails naming what was left: no
new thread still running, no actor, no open file descriptor, no store left open (its exit
hook registered), the same signal handlers, logging handlers, environment, folder
and standard streams.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pykka

from relaystore.actors.exit_hook import OwningProcess

__all__ = ["run_in_process"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGHUP)


def run_in_process(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``relaystore ARGS`` through ``main(ARGS)`` in ``cwd`` with exactly ``env`` as
    the environment; its status, stdout and stderr as a finished process's would be."""
    from relaystore.actors.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    with _leaves_nothing(args, timeout), _as_a_process(cwd, env, out, err):
        try:
            status = main(args)
        except SystemExit as exit_:
            status = _status(exit_.code)
    return subprocess.CompletedProcess(
        ["relaystore", *args],
        status,
        out.getvalue().decode("utf-8", "replace"),
        err.getvalue().decode("utf-8", "replace"),
    )


def _status(code: object) -> int:
    """The exit status ``sys.exit(code)`` gives a process."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextmanager
def _as_a_process(
    cwd: Path, env: dict[str, str], out: io.BytesIO, err: io.BytesIO
) -> Iterator[None]:
    """The command's own environment, folder and streams, put back after it."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    stdout = io.TextIOWrapper(out, encoding="utf-8", line_buffering=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", line_buffering=True)
    with open(os.devnull, encoding="utf-8") as stdin:
        try:
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
            yield
        finally:
            for stream in (stdout, stderr):
                stream.flush()
                stream.detach()
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)


@contextmanager
def _leaves_nothing(args: list[str], timeout: float) -> Iterator[None]:
    """Fail the test if the run left a thread, an actor, a descriptor, a store left
    open, a signal handler or a logging handler behind."""
    threads = set(threading.enumerate())
    actors = set(pykka.ActorRegistry.get_all())
    fds = _open_fds()
    opened: list[OwningProcess] = []
    handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    logs = _log_handlers()
    register, unregister = OwningProcess.register, OwningProcess.unregister

    def registered(owner: OwningProcess) -> None:
        opened.append(owner)
        register(owner)

    def unregistered(owner: OwningProcess) -> None:
        if owner in opened:  # not a store the test opened before the run
            opened.remove(owner)
        unregister(owner)

    OwningProcess.register, OwningProcess.unregister = registered, unregistered  # type: ignore[method-assign]
    try:
        yield
    finally:
        OwningProcess.register, OwningProcess.unregister = register, unregister  # type: ignore[method-assign]
    _stop_tqdm_monitor()  # tqdm's one monitor thread, which the process's exit would end
    deadline = time.monotonic() + timeout
    for thread in set(threading.enumerate()) - threads if not opened else ():
        # a closed store's threads end (an open store's never do: it is named at once)
        thread.join(max(0.0, deadline - time.monotonic()))
    left = {
        "threads": [t.name for t in set(threading.enumerate()) - threads],
        "actors": [a for a in pykka.ActorRegistry.get_all() if a not in actors],
        "file descriptors": sorted(_open_fds() - fds),
        "stores left open": len(opened),
        "signal handlers": [s for s in _SIGNALS if signal.getsignal(s) != handlers[s]],
        "logging handlers": {
            name: now for name, now in _log_handlers().items() if now != logs.get(name)
        },
    }
    leaks = {what: found for what, found in left.items() if found}
    assert not leaks, f"relaystore {' '.join(args)} left {leaks}"


def _stop_tqdm_monitor() -> None:
    tqdm = sys.modules.get("tqdm")
    monitor = getattr(getattr(tqdm, "tqdm", None), "monitor", None)
    if monitor is not None:
        monitor.exit()
        tqdm.tqdm.monitor = None  # type: ignore[union-attr]


def _open_fds() -> set[str]:
    return {
        f"{fd} -> {_target(fd)}" for fd in os.listdir("/proc/self/fd") if _target(fd) is not None
    }


def _target(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the descriptor listing the folder itself, closed meanwhile
        return None


def _log_handlers() -> dict[str, list[logging.Handler]]:
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return {
        log.name: list(log.handlers)
        for log in loggers
        if isinstance(log, logging.Logger) and log.handlers
    }
