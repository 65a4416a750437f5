"""Where a relay journal lives on disk: worker roots, journal folders, segments.

A *source* is a worker root (``relay-journal/`` beside ``relay-state.json``), a
``relay-journal/`` folder (``active.jsonl`` plus sealed
``segment-{first:020}-{last:020}.jsonl.gz`` files), or one ``.jsonl`` / ``.jsonl.gz``
file. :func:`resolve_source` turns a path into a :class:`JournalSource`: the session it
belongs to and its files, each with the ordinal range it holds (from a sealed segment's
name, or from a scan of ``active.jsonl`` at both ends).

Resolving never raises anything but :class:`~relaystore.domain.errors.InvalidInput`
naming the path: a missing path, a folder holding no journal, an impossible segment
name, an unreadable folder or file (every ``OSError``), and a file whose blank lines
pass :data:`MAX_BLANK_LINES` before its first record.

The names of a worker root's files are :mod:`relaystore.domain.worker_root`'s; a file's
ordinal range comes from :mod:`.ranges`; the line splitter the reader streams with is
:mod:`relaystore.actors.journal.lines`. Resolving only finds and sizes files: it must not
read events or judge the chain (:mod:`.reader` does).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ...domain.errors import InvalidInput
from ...domain.seed import RelaySeed, decode_relay_seed
from ...domain.wire import decode_json
from ...domain.worker_root import (
    ACTIVE_JOURNAL_NAME,
    JOURNAL_DIR_NAME,
    RELAY_STATE_NAME,
    SEED_NAME,
    SEGMENT_NAME,
)
from .ranges import first_ordinal, scan_range, segment_range

__all__ = [
    "JournalFile",
    "JournalSource",
    "gather_sources",
    "resolve_source",
    "worker_roots",
]


@dataclass(frozen=True, slots=True)
class JournalFile:
    """One file of a source. ``first``/``last`` are its ordinal range when known.

    Sealed segments take the range from their name, ``active.jsonl`` from a scan; both
    are ``None`` for a file given on its own, or an active file with no record.
    """

    path: Path
    first: int | None = None
    last: int | None = None
    active: bool = False


@dataclass(frozen=True, slots=True)
class JournalSource:
    """A resolved source: its session id and the files to read.

    ``folder`` is true for a journal folder (files are chosen by range); otherwise the
    files are read in the order given. ``ignored`` lists files of the folder not read.
    """

    path: Path
    session_id: str
    files: tuple[JournalFile, ...]
    folder: bool
    ignored: tuple[Path, ...] = ()
    state_ordinal: int | None = None
    """The ``latest_ordinal`` of the worker root's ``relay-state.json``, when it has one."""
    seed: RelaySeed | None = None
    """The worker root's ``relay-seed.json`` (left by a checkpoint restore), if any."""
    seed_path: Path | None = None
    """Where :attr:`seed` was read from."""

    @property
    def size_bytes(self) -> int:
        """The files' size on disk (compressed for segments), for progress display."""
        return sum(_size(file.path) for file in self.files)

    @property
    def last_ordinal(self) -> int | None:
        """The last ordinal the source holds, for progress display: the files' ranges
        when they tell it, else ``relay-state.json``'s ``latest_ordinal``, else None."""
        known = [file.last for file in self.files if file.last is not None]
        if known and self.folder:
            return max(known)
        return self.state_ordinal


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# -- resolving a source -----------------------------------------------------------------


class _RelayState(msgspec.Struct):
    session_id: str


_STATE_WHAT = f"{RELAY_STATE_NAME} (expected a JSON object with a string session_id)"


def _read_session_id(state_path: Path) -> str:
    try:
        data = state_path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {RELAY_STATE_NAME}: {exc}", path=str(state_path)) from exc
    try:
        state = decode_json(data, _RelayState, what=_STATE_WHAT)
    except InvalidInput as exc:
        raise InvalidInput(
            f"{exc.detail}; pass the session id explicitly to read the journal anyway",
            path=str(state_path),
        ) from exc.__cause__  # the decode error itself, as before
    if not state.session_id:
        raise InvalidInput(f"{RELAY_STATE_NAME} has an empty session_id", path=str(state_path))
    return state.session_id


class _StateOrdinal(msgspec.Struct):
    latest_ordinal: int


_STATE_ORDINAL_DECODER = msgspec.json.Decoder(_StateOrdinal)


def _state_ordinal(root: Path) -> int | None:
    """``latest_ordinal`` of ``root``'s ``relay-state.json``; None when it cannot tell.

    Only a progress bar's total depends on it, so nothing here ever refuses a source.
    """
    try:
        state = _STATE_ORDINAL_DECODER.decode((root / RELAY_STATE_NAME).read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return state.latest_ordinal if state.latest_ordinal >= 0 else None


def _seed(root: Path) -> RelaySeed | None:
    """The worker root's ``relay-seed.json``; None when there is none.

    Raises :class:`InvalidInput` naming the file when it is there but unreadable or
    malformed: replaying past a seed that cannot be read would start from the wrong place.
    """
    path = root / SEED_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode_relay_seed(data)
    except InvalidInput as exc:
        raise exc.located(path=str(path)) from exc


def _file_stem(path: Path) -> str:
    name = path.name
    for suffix in (".jsonl.gz", ".jsonl", ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return path.stem or name


def _is_journal_folder(path: Path) -> bool:
    if path.name == JOURNAL_DIR_NAME:
        return True
    if (path / ACTIVE_JOURNAL_NAME).is_file():
        return True
    return any(SEGMENT_NAME.fullmatch(entry.name) for entry in path.iterdir())


def resolve_source(path: str | os.PathLike[str], *, session_id: str | None = None) -> JournalSource:
    """Resolve ``path`` into the journal files to read and the session they belong to.

    The session id is ``session_id`` when given, else the ``session_id`` of the
    ``relay-state.json`` of the worker root, else the worker root's folder name (for a
    folder) or the file's stem (for a file). Raises :class:`InvalidInput` naming the path
    when it does not exist, holds no journal, has a segment name with a reversed range,
    cannot be read (any ``OSError``: permissions, a broken link, a file where a folder
    belongs), or holds more blank lines than a journal may before its first record.
    """
    source = Path(path)
    try:
        return _resolve(source, session_id)
    except OSError as exc:
        where = exc.filename if exc.filename is not None else source
        reason = exc.strerror or str(exc)
        raise InvalidInput(
            f"cannot read the journal source: {reason}", path=os.fsdecode(where)
        ) from exc


def _resolve(source: Path, session_id: str | None) -> JournalSource:
    if source.is_dir():
        if (source / JOURNAL_DIR_NAME).is_dir():
            folder = source / JOURNAL_DIR_NAME
        elif _is_journal_folder(source):
            folder = source
        else:
            raise InvalidInput(
                f"not a relay journal: expected a worker root holding {JOURNAL_DIR_NAME}/, or a "
                f"folder holding {ACTIVE_JOURNAL_NAME} or segment-*.jsonl.gz",
                path=str(source),
            )
        files, ignored = _folder_files(folder)
        resolved = folder.resolve()
        return JournalSource(
            path=source,
            session_id=session_id or _session_of_folder(resolved),
            files=files,
            folder=True,
            ignored=ignored,
            state_ordinal=_state_ordinal(resolved.parent)
            if resolved.name == JOURNAL_DIR_NAME
            else None,
            seed=_seed(resolved.parent) if resolved.name == JOURNAL_DIR_NAME else None,
            seed_path=resolved.parent / SEED_NAME if resolved.name == JOURNAL_DIR_NAME else None,
        )
    if source.is_file():
        parent = source.parent
        in_root = parent.name == JOURNAL_DIR_NAME
        if session_id is None:
            if in_root:
                session_id = _session_of_root(parent.parent, default=_file_stem(source))
            else:
                session_id = _file_stem(source)
        return JournalSource(
            path=source,
            session_id=session_id,
            files=(JournalFile(path=source),),
            folder=False,
            # Only the active journal ends where the worker's state says it does.
            state_ordinal=_state_ordinal(parent.parent)
            if in_root and source.name == ACTIVE_JOURNAL_NAME
            else None,
        )
    if source.is_symlink():
        raise InvalidInput(
            "a broken link: it points at nothing; give a worker root, a relay-journal/ "
            "folder, or .jsonl / .jsonl.gz files",
            path=str(source),
        )
    if source.exists():
        raise InvalidInput(
            "neither a file nor a folder; give a worker root, a relay-journal/ folder, or "
            ".jsonl / .jsonl.gz files",
            path=str(source),
        )
    raise InvalidInput(
        "no such journal file or folder; give a worker root, a relay-journal/ folder, or "
        ".jsonl / .jsonl.gz files",
        path=str(source),
    )


def _is_worker_root(path: Path) -> bool:
    return (path / JOURNAL_DIR_NAME).is_dir() or (path / RELAY_STATE_NAME).is_file()


def worker_roots(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The worker roots in ``path`` when it is a folder of worker roots, sorted by name.

    A folder of worker roots is a folder that is neither a worker root nor a journal
    folder itself and whose children include worker roots (folders holding
    ``relay-journal/`` or ``relay-state.json``); its other entries are left alone.
    Anything else (a file, a worker root, a journal folder, a missing or unreadable
    path, a folder holding no worker root) gives ``()``: :func:`resolve_source` judges it.
    """
    folder = Path(path)
    try:
        if not folder.is_dir() or _is_worker_root(folder) or _is_journal_folder(folder):
            return ()
        return tuple(
            sorted(
                (child for child in folder.iterdir() if child.is_dir() and _is_worker_root(child)),
                key=lambda child: child.name,
            )
        )
    except OSError:
        return ()


def _session_of_folder(folder: Path) -> str:
    if folder.name == JOURNAL_DIR_NAME:
        return _session_of_root(folder.parent, default=folder.parent.name)
    return folder.name


def _session_of_root(root: Path, *, default: str) -> str:
    state = root / RELAY_STATE_NAME
    if state.is_file():
        return _read_session_id(state)
    return default


def _folder_files(folder: Path) -> tuple[tuple[JournalFile, ...], tuple[Path, ...]]:
    files: list[JournalFile] = []
    ignored: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        segment = segment_range(entry)
        if segment is not None and entry.is_file():
            files.append(JournalFile(path=entry, first=segment[0], last=segment[1]))
        elif entry.name == ACTIVE_JOURNAL_NAME and entry.is_file():
            first_seen, last_seen = scan_range(entry)
            files.append(JournalFile(path=entry, first=first_seen, last=last_seen, active=True))
        else:
            ignored.append(entry)
    return tuple(files), tuple(ignored)


# -- files given one by one --------------------------------------------------------------


def gather_sources(
    paths: Iterable[str | os.PathLike[str]], *, session_id: str | None = None
) -> list[JournalSource]:
    """Resolve ``paths``; the files given one by one that belong to one session become
    one source, read in ordinal order whatever order they were given in.

    So a shell glob of ``relay-journal/*`` reads as the folder does: a file's range comes
    from its segment name, else from a scan (its first and last ordinal; only the first
    for a gzip file of another name). When every file's range is known the files are read
    by the folder's rule (from the cursor, the file reaching furthest; the crash overlap
    skipped); otherwise in order of their first ordinal. Files the folder itself would not
    read (``*.new`` temporaries, ``stale-active-*`` leftovers: any other name in a
    ``relay-journal/`` folder) are left out when given with others, and a group whose files
    all lie in one worker root's ``relay-journal/`` takes its ``relay-seed.json`` and
    ``relay-state.json`` as the folder would. Folders stay sources of their own. The
    sources come in the order of their first path. Raises what :func:`resolve_source`
    raises.
    """
    resolved = [resolve_source(path, session_id=session_id) for path in paths]
    groups: dict[str, list[JournalSource]] = {}
    for source in resolved:
        if not source.folder:
            groups.setdefault(source.session_id, []).append(source)
    gathered: list[JournalSource] = []
    for source in resolved:
        group = groups.get(source.session_id) if not source.folder else None
        if group is None or len(group) == 1:
            gathered.append(source)
        elif source is group[0]:
            gathered.append(_merged(group))
    return gathered


def _merged(group: list[JournalSource]) -> JournalSource:
    """One source of the single files of one session (see :func:`gather_sources`)."""
    try:
        return _merge(group)
    except OSError as exc:
        where = exc.filename if exc.filename is not None else group[0].path
        raise InvalidInput(
            f"cannot read the journal source: {exc.strerror or exc}", path=os.fsdecode(where)
        ) from exc


def _merge(group: list[JournalSource]) -> JournalSource:
    files: list[JournalFile] = []
    ignored: list[Path] = []
    for source in group:
        path = source.path
        if _in_journal_folder(path) and not _folder_reads(path):
            ignored.append(path)
            continue
        files.append(_ranged(path))
    if not files:  # only leftovers were given: read them as given
        files = [_ranged(source.path) for source in group]
        ignored = []
    files.sort(key=lambda file: (file.first is None, file.first or 0, -(file.last or 0)))
    folders = {file.path.parent.resolve() for file in files}
    folder = folders.pop() if len(folders) == 1 else None
    root = folder.parent if folder is not None and folder.name == JOURNAL_DIR_NAME else None
    ranged = all(file.first is not None and file.last is not None for file in files)
    return JournalSource(
        path=group[0].path.parent if folder is not None else group[0].path,
        session_id=group[0].session_id,
        files=tuple(files),
        folder=ranged,
        ignored=tuple(ignored),
        state_ordinal=_state_ordinal(root) if root is not None else None,
        seed=_seed(root) if root is not None else None,
        seed_path=root / SEED_NAME if root is not None else None,
    )


def _in_journal_folder(path: Path) -> bool:
    parent = path.parent
    return parent.name == JOURNAL_DIR_NAME or _is_journal_folder(parent)


def _folder_reads(path: Path) -> bool:
    """Whether a journal folder reads ``path`` (a sealed segment or ``active.jsonl``)."""
    return path.name == ACTIVE_JOURNAL_NAME or SEGMENT_NAME.fullmatch(path.name) is not None


def _ranged(path: Path) -> JournalFile:
    """``path`` with its ordinal range: from a segment name, else from a scan."""
    segment = segment_range(path)
    if segment is not None:
        return JournalFile(path=path, first=segment[0], last=segment[1])
    active = path.name == ACTIVE_JOURNAL_NAME
    if path.name.endswith(".gz"):
        return JournalFile(path=path, first=first_ordinal(path), active=active)
    scanned_first, scanned_last = scan_range(path)
    return JournalFile(path=path, first=scanned_first, last=scanned_last, active=active)
