"""What the README and the pages under ``docs/`` show is what a newcomer gets.

- Every ```` ```python ```` snippet runs, as written (twice), right after the README's own
  set-up command (``relaystore replay examples/worker-root`` into the default store of a
  fresh folder), and one that calls ``print`` prints (the asyncio one, its feed's lines).
- Every ```` ```console ```` block is a session to replay: each ``$ COMMAND`` runs in a
  fresh folder holding the examples (after the set-up replay, unless the block's first
  command is that replay), and prints what the block shows below it (``…`` stands for
  any text, a rate say). ``relaystore serve &`` starts a real server on a free port (the
  block's ``127.0.0.1:8040`` is that port), whose announcement is checked when
  ``kill %1`` stops it; so the ``curl`` examples, with their ``Authorization: Bearer``
  header read from the token file ``serve`` wrote, run against a real server.
  ```` ```sh ```` blocks are not run (they install things).
- The README keeps its two set-up commands, the test command is the one CI runs, every
  command of the parser has a line in the README's table and in ``docs/cli.md``, and every
  relative link (and ``#anchor``) points at something that exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.http_support import Server, start_server, stop_server

pytestmark = pytest.mark.integration  # the README's snippets run as processes

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI_PAGE = ROOT / "docs" / "cli.md"
DOCUMENTS = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_CONSOLE = re.compile(r"^```console\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SH = re.compile(r"^```sh\n(.*?)^```", re.DOTALL | re.MULTILINE)
TIMEOUT = 120.0
SET_UP = "relaystore replay examples/worker-root"
SHOWN_PORT = "http://127.0.0.1:8040"


def _env() -> dict[str, str]:
    """The environment a newcomer's shell has: this interpreter's ``relaystore`` on the
    path, and no ``RELAYSTORE_DB`` pointing elsewhere."""
    env = {k: v for k, v in os.environ.items() if k != "RELAYSTORE_DB"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _blocks(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for number, match in enumerate(pattern.finditer(text), start=1):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{document.name}:{line} (block {number})", match.group(1)))
    return found


SNIPPETS = _blocks(_BLOCK)
CONSOLES = _blocks(_CONSOLE)


def test_the_documents_have_snippets() -> None:
    assert len(SNIPPETS) >= 3
    assert len(CONSOLES) >= 3


def _replay_the_examples(folder: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "relaystore", "replay", "examples/worker-root"],
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def _fresh_folder(parent: Path) -> Path:
    folder = parent / "newcomer"
    shutil.copytree(ROOT / "examples", folder / "examples")
    return folder


@pytest.fixture(scope="module")
def set_up(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where the README's set-up has run: the examples replayed into the default
    store, and the example worker roots where the README's paths point."""
    folder = _fresh_folder(tmp_path_factory.mktemp("snippets"))
    _replay_the_examples(folder)
    return folder


@pytest.mark.parametrize(("where", "code"), SNIPPETS, ids=[where for where, _ in SNIPPETS])
def test_every_snippet_runs_after_the_set_up(set_up: Path, where: str, code: str) -> None:
    for attempt in range(2):  # a snippet must also survive being run a second time
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=set_up,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, f"{where}, run {attempt + 1}:\n{result.stderr}"
        if "print(" in code:  # a snippet that says it prints does print
            assert result.stdout.strip(), f"{where}, run {attempt + 1}: printed nothing"
        if "async for event in store.follow(" in code:  # the asyncio snippet's feed lines
            lines = result.stdout.splitlines()
            assert lines, where
            assert all(re.fullmatch(r"\d+ [a-z_]+", line) for line in lines), lines
            assert "turn_ended" in {line.split()[1] for line in lines}, lines


def _session(block: str) -> Iterator[tuple[str, list[str]]]:
    """The block's commands (``$ `` lines, joined across trailing backslashes), each with
    the lines shown below it."""
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        assert line.startswith("$ "), f"output before any command: {line!r}"
        command = line[2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + lines[index].strip()
        index += 1
        shown = []
        while index < len(lines) and not lines[index].startswith("$ "):
            shown.append(lines[index])
            index += 1
        yield command.strip(), shown


def _matches(shown: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in shown.split("…"))
    return re.fullmatch(pattern, actual) is not None


def _assert_prints(where: str, command: str, shown: list[str], printed: list[str]) -> None:
    message = f"{where}: `{command}` printed\n" + "\n".join(printed) + "\nnot\n" + "\n".join(shown)
    assert len(printed) == len(shown), message
    assert all(map(_matches, shown, printed)), message


@pytest.mark.parametrize(("where", "block"), CONSOLES, ids=[where for where, _ in CONSOLES])
def test_every_console_session_prints_what_it_shows(tmp_path: Path, where: str, block: str) -> None:
    steps = list(_session(block))
    if any("curl " in command for command, _ in steps) and shutil.which("curl") is None:
        pytest.fail(
            f"{where} runs curl, which is not installed: apt-get install curl (.ci/run does)"
        )
    folder = _fresh_folder(tmp_path)
    if steps[0][0] != SET_UP:
        _replay_the_examples(folder)
    server: Server | None = None
    announced: list[str] = []
    try:
        for command, shown in steps:
            if command == "relaystore serve &":
                assert server is None, f"{where}: a second server"
                server = start_server(folder / "relaystore.sqlite3")
                announced = [line.replace(SHOWN_PORT, server.url) for line in shown]
                continue
            if command == "kill %1":
                assert server is not None, f"{where}: no server to stop"
                # start_server names the store by its absolute path; the block, by its name
                said = stop_server(server).replace(f"{folder}{os.sep}", "").splitlines()
                server = None
                assert shown == [], f"{where}: `kill %1` prints nothing"
                assert [line for line in said if line in announced] == announced, (
                    f"{where}: serve said\n" + "\n".join(said)
                )
                continue
            if server is not None:
                command = command.replace(SHOWN_PORT, server.url)
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=folder,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            _assert_prints(where, command, shown, done.stdout.splitlines())
        assert server is None, f"{where}: the block leaves its server running (`kill %1`)"
    finally:
        if server is not None:
            stop_server(server)


def test_the_readme_curl_example(tmp_path: Path) -> None:
    """The README's ``curl`` request, made with httpx (no curl needed): the bearer token is
    the file ``serve`` wrote beside the store, and the answer starts as shown."""
    readme = README.read_text(encoding="utf-8")
    match = re.search(
        r'^\$ curl -s -H "Authorization: Bearer \$\(cat (\S+)\)" \\\n\s+(\S+) \| head -c (\d+)\n(.*)$',
        readme,
        re.MULTILINE,
    )
    assert match is not None, "the README's curl example"
    token_file, url, count, shown = match.groups()
    folder = _fresh_folder(tmp_path)
    _replay_the_examples(folder)
    server = start_server(folder / "relaystore.sqlite3")
    try:
        import httpx

        token = (folder / token_file).read_text(encoding="utf-8").strip()
        answer = httpx.get(
            url.replace(SHOWN_PORT, server.url),
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert answer.status_code == 200
        assert answer.text[: int(count)] == shown
    finally:
        stop_server(server)


def test_the_readme_keeps_its_two_set_up_commands_and_ci_runs_its_test_command() -> None:
    commands = [block.strip() for _, block in _blocks(_SH) if _.startswith("README.md")]
    assert len(commands) >= 2
    main_job, tests = commands[0], commands[1]
    assert main_job.endswith(f"&& {SET_UP} && relaystore events")
    test_command = tests.rsplit("&& ", 1)[-1]
    assert test_command.startswith("python -m pytest ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci


def _parser_commands() -> set[str]:
    """Every command ``relaystore --help`` lists (``fleet``'s as ``fleet events``)."""
    names = set()
    for arguments in (["--help"], ["fleet", "--help"]):
        printed = subprocess.run(
            [sys.executable, "-m", "relaystore", *arguments],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        ).stdout
        prefix = "fleet " if arguments[0] == "fleet" else ""
        names |= {prefix + name for name in re.findall(r"^    ([a-z][a-z-]*)", printed, re.M)}
    names.discard("fleet")
    return names | {"--version"}


def _table_commands(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    names = set()
    for cell in re.findall(r"^\| `([^`]+)`", text, re.MULTILINE):
        words = cell.split()
        if words[0].startswith("--"):
            names.add(words[0])
            continue
        name = [w for w in words[:2] if re.fullmatch(r"[a-z][a-z-]*", w)]
        names.add(" ".join(name if name[0] == "fleet" else name[:1]))
    return names


@pytest.mark.parametrize("page", [README, CLI_PAGE], ids=["README.md", "docs/cli.md"])
def test_every_command_has_a_line_in_the_tables(page: Path) -> None:
    commands = _parser_commands()
    assert len(commands) >= 20
    assert commands <= _table_commands(page)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return {_anchor(h) for h in re.findall(r"^#+ (.*)$", text, re.MULTILINE)}


def test_every_relative_link_points_at_something() -> None:
    broken = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (document.parent / path).resolve() if path else document
            if not file.exists():
                broken.append(f"{document.name}: {target}")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                broken.append(f"{document.name}: {target} (no such heading)")
    assert broken == []
