"""Stores on read-only media (a mounted snapshot, a backup) can be read (issue 11).

A WAL store normally needs its ``-shm`` beside it; where none can be created the reader
opens the file *immutable*: it reads every commit the main file holds, takes no locks
and assumes the file never changes (it is not meant to follow later commits). A ``-wal``
still holding committed frames is never read that way.

Tests run as root, for whom ``chmod`` denies nothing, so the decision is pinned through
its seams (:func:`choose_read_mode`, the folder check, a failing shared open); a real
read-only bind mount is used too where ``unshare`` allows one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

import relaystore.storage.connection as connection_module
from relaystore.domain.errors import StoreError
from relaystore.storage.connection import choose_read_mode, open_reader, open_writer
from relaystore.storage.events import insert_api_event
from relaystore.storage.paging import load_latest_seq
from relaystore.storage.sessions import load_session, save_session
from relaystore.testing import example_session
from tests.storage.builders import turn_started

CANT_OPEN = apsw.CantOpenError("unable to open database file")

# -- the decision ------------------------------------------------------------------------

DECISIONS = [
    # wal_bytes, directory writable, failure of a shared open, mode
    (None, True, None, "shared"),
    (0, True, None, "shared"),
    (None, False, None, "immutable"),
    (0, False, None, "immutable"),
    (None, True, CANT_OPEN, "immutable"),
    (0, True, apsw.ReadOnlyError("attempt to write a readonly database"), "immutable"),
    (None, True, apsw.BusyError("database is locked"), "shared"),
    (None, True, apsw.CorruptError("database disk image is malformed"), "shared"),
    (4096, False, None, "shared"),  # frames an immutable open would miss
    (4096, True, CANT_OPEN, "shared"),
]


@pytest.mark.parametrize(("wal", "writable", "failure", "mode"), DECISIONS)
def test_choose_read_mode(
    wal: int | None, writable: bool, failure: apsw.Error | None, mode: str
) -> None:
    assert choose_read_mode(wal_bytes=wal, directory_writable=writable, failure=failure) == mode


# -- through the seams -------------------------------------------------------------------


def closed_store(path: Path) -> None:
    """A store with one session and one event, closed cleanly (no -wal, no -shm)."""
    with open_writer(path) as writer:
        save_session(writer.connection, example_session())
        insert_api_event(writer.connection, "session-1", 1, turn_started())
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, f"{path.name}.lock"]


def sidecars(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith(("-wal", "-shm")))


def test_a_reader_opens_immutable_where_the_folder_is_not_writable(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_store(store_path)
    monkeypatch.setattr(connection_module, "_directory_writable", lambda where: False)
    reader = open_reader(store_path)
    try:
        assert load_session(reader, "session-1") == example_session()
        assert load_latest_seq(reader) == 1
        assert reader.pragma("journal_mode") == "delete"  # no WAL machinery at all
        assert reader.pragma("query_only") == 1
        assert sidecars(store_path) == []
    finally:
        reader.close()
    assert sidecars(store_path) == []


@pytest.mark.parametrize("name", ["with space.sqlite3", "odd?#%25&=.sqlite3", "čaj ☕.sqlite3"])
def test_an_immutable_open_finds_files_whose_names_need_uri_quoting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = tmp_path / name
    closed_store(path)
    monkeypatch.setattr(connection_module, "_directory_writable", lambda where: False)
    reader = open_reader(path)
    try:
        assert load_latest_seq(reader) == 1
    finally:
        reader.close()
    assert sidecars(path) == []


def test_a_shared_open_that_cannot_open_its_sidecars_falls_back_to_immutable(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_store(store_path)
    real_connect = connection_module._connect_reader
    modes: list[str] = []

    def connect(where: str, mode: str, *, touch: bool = True) -> apsw.Connection:
        modes.append(mode)
        if mode == "shared" and touch:
            raise apsw.CantOpenError("unable to open database file")
        return real_connect(where, mode, touch=touch)  # type: ignore[arg-type]

    monkeypatch.setattr(connection_module, "_connect_reader", connect)
    reader = open_reader(store_path)
    try:
        assert load_latest_seq(reader) == 1
    finally:
        reader.close()
    assert modes == ["immutable", "shared", "immutable"]  # recognise, try, fall back


def test_a_wal_with_frames_on_read_only_media_is_refused_with_a_typed_error(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_writer(store_path)
    save_session(writer.connection, example_session())
    assert Path(f"{store_path}-wal").stat().st_size > 0
    real_connect = connection_module._connect_reader

    def connect(where: str, mode: str, *, touch: bool = True) -> apsw.Connection:
        if mode == "shared" and touch:
            raise apsw.CantOpenError("unable to open database file")
        return real_connect(where, mode, touch=touch)  # type: ignore[arg-type]

    monkeypatch.setattr(connection_module, "_connect_reader", connect)
    try:
        with pytest.raises(StoreError, match="-wal still holds") as caught:
            open_reader(store_path)
        assert isinstance(caught.value.__cause__, apsw.CantOpenError)
        assert caught.value.path == str(store_path)
    finally:
        writer.close()


def test_chmod_read_only_store_and_folder_can_still_be_read(store_path: Path) -> None:
    closed_store(store_path)
    Path(f"{store_path}.lock").unlink()
    folder = store_path.parent
    store_path.chmod(0o400)
    folder.chmod(0o500)
    try:
        reader = open_reader(store_path)  # immutable for a user; root may still write
        try:
            assert load_latest_seq(reader) == 1
        finally:
            reader.close()
    finally:
        folder.chmod(0o700)
        store_path.chmod(0o600)
    if os.geteuid() != 0:
        assert sidecars(store_path) == []


# -- a real read-only mount --------------------------------------------------------------

READ_ON_MOUNT = textwrap.dedent(
    """
    import sys
    import apsw
    from relaystore.storage.connection import open_reader
    from relaystore.storage.paging import load_latest_seq
    path = sys.argv[1]
    try:  # what a plain read-only open does there (the issue)
        plain = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        plain.execute("SELECT count(*) FROM sqlite_schema").get
        print("plain: ok")
    except apsw.Error as exc:
        print("plain:", type(exc).__name__)
    reader = open_reader(path)
    print("relaystore:", load_latest_seq(reader))
    reader.close()
    """
)


def read_only_mount_available(folder: Path) -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        [
            unshare,
            "-m",
            "sh",
            "-c",
            f"mount --bind '{folder}' '{folder}' && "
            f"mount -o remount,bind,ro '{folder}' && ! touch '{folder}/probe' 2>/dev/null",
        ],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return probe.returncode == 0 and not (folder / "probe").exists()


@pytest.mark.integration
def test_a_store_on_a_read_only_bind_mount_can_be_read(tmp_path: Path) -> None:
    folder = tmp_path / "snapshot"
    folder.mkdir()
    # This machine and CI run as root with util-linux's unshare: a real read-only mount
    # is always there to test on (the seam tests above cover the decision itself).
    assert read_only_mount_available(folder), "unshare -m with a read-only bind mount failed"
    store = folder / "store.sqlite3"
    closed_store(store)
    mode = stat.S_IMODE(store.stat().st_mode)
    script = f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}' && exec "
    result = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            script + '"$0" -c "$1" "$2"',
            sys.executable,
            READ_ON_MOUNT,
            str(store),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "plain: CantOpenError"  # the issue, reproduced
    assert lines[1] == "relaystore: 1"
    assert sidecars(store) == []
    assert stat.S_IMODE(store.stat().st_mode) == mode
