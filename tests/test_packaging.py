"""The distribution installs one import package, ``relaystore``, and lives beside others.

A wheel is built from this checkout and installed, together with a neighbouring
distribution that ships top-level ``domain``, ``storage`` and ``actors`` packages (the
names relaystore's layers had before 0.2), into one fresh folder. relaystore must work
there unchanged, and a user's ``mypy --strict`` must see its types.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.integration  # pip, build and mypy processes

NEIGHBOUR_NAMES = ("domain", "storage", "actors")


def _neighbour_wheel(folder: Path) -> Path:
    """A minimal wheel of a distribution that owns top-level domain/storage/actors."""
    wheel = folder / "neighbour-1.0-py3-none-any.whl"
    info = "neighbour-1.0.dist-info"
    files = {
        f"{name}/__init__.py": f"OWNER = 'neighbour'\nNAME = '{name}'\n" for name in NEIGHBOUR_NAMES
    }
    files[f"{info}/METADATA"] = "Metadata-Version: 2.1\nName: neighbour\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def _copy_of_the_checkout(folder: Path) -> Path:
    """The checkout's tracked files, copied: a build leaves its ``build/`` and
    ``*.egg-info`` there, never a stale copy of the package inside the checkout."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        source = ROOT / name.decode()
        if source.is_file():
            target = folder / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return folder


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_of_the_checkout(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def relaystore_wheel(tmp_path_factory: pytest.TempPathFactory, checkout: Path) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(checkout),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("relaystore-*.whl")
    return wheel


def test_the_wheel_holds_one_top_level_package(relaystore_wheel: Path) -> None:
    with zipfile.ZipFile(relaystore_wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"relaystore"}
    assert "relaystore/py.typed" in names
    assert "relaystore/domain/py.typed" in names
    assert any(name.startswith("relaystore/domain/projection/") for name in names)
    assert any(name.startswith("relaystore/actors/journal/") for name in names)
    # The web viewer's static files ship as package data: every one of them.
    viewer = sorted(path.name for path in (ROOT / "src" / "relaystore" / "viewer").iterdir())
    assert {"index.html", "viewer.css", "viewer.js", "icon.svg"} <= set(viewer)
    assert all(f"relaystore/viewer/{name}" in names for name in viewer)


@pytest.mark.parametrize("neighbour_first", [False, True])
def test_relaystore_works_beside_a_neighbour_with_the_old_layer_names(
    tmp_path: Path, relaystore_wheel: Path, neighbour_first: bool
) -> None:
    target = tmp_path / "site"
    wheels = [str(relaystore_wheel), str(_neighbour_wheel(tmp_path))]
    for wheel in reversed(wheels) if neighbour_first else wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                "--upgrade",
                wheel,
            ],
            check=True,
            capture_output=True,
        )
    program = textwrap.dedent(
        f"""
        import domain, storage, actors
        assert (domain.OWNER, storage.OWNER, actors.OWNER) == ("neighbour",) * 3
        import relaystore
        assert relaystore.__file__.startswith({str(target)!r}), relaystore.__file__
        from relaystore import EventStore, LoadState, ObserveRelayEvents, SaveSession
        from relaystore.testing import JournalBuilder, example_session
        with EventStore.open({str(tmp_path / "store.sqlite3")!r}) as store:
            store.ask(SaveSession(record=example_session("s-1")))
            assert list(store.ask(LoadState()).sessions) == ["s-1"]
        # The projection worker imports this relaystore, not the neighbour's layers.
        journal = JournalBuilder()
        journal.prompt_turn("Hello")
        with EventStore.open({str(tmp_path / "store.sqlite3")!r}, projection="process") as store:
            report = store.ask(ObserveRelayEvents(session_id="s-1", events=journal.events))
            assert report.applied == len(journal.events), report
        print("ok")
        """
    )
    environment = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", program],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_users_mypy_sees_the_installed_types(tmp_path: Path, relaystore_wheel: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(relaystore_wheel),
        ],
        check=True,
        capture_output=True,
    )
    user = tmp_path / "user.py"
    user.write_text(
        textwrap.dedent(
            """
            from relaystore import EventStore, LoadState

            def sessions(store: EventStore) -> int:
                return store.ask(LoadState())
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        env={**os.environ, "MYPYPATH": str(target)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    # The reply type of LoadState is State, so returning it as an int is an error:
    # mypy can only say so when it sees relaystore's real types (not Any).
    assert 'Incompatible return value type (got "State", expected "int")' in result.stdout


def test_the_sdist_carries_the_whole_suite_examples_and_contract(
    tmp_path: Path, checkout: Path
) -> None:
    out = tmp_path / "sdist"
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; build_meta.build_sdist({str(out)!r})",
        ],
        cwd=checkout,
        check=True,
        capture_output=True,
    )
    (archive_path,) = out.glob("relaystore-*.tar.gz")
    import tarfile

    with tarfile.open(archive_path) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    tracked = subprocess.run(
        ["git", "ls-files", "tests", "examples", "docs"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    missing = sorted(set(tracked) - names)
    assert missing == []
    assert "docs/relaystore-api.md" in names
    assert "LICENSE" in names
