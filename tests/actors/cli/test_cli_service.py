"""Running relaystore as a service: the config file of ``serve`` and ``publish``, the
systemd units, TLS, the access log, the warning beyond loopback, and metrics that say
which process they describe."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from relaystore.testing import JournalBuilder
from tests.actors import cli_support as support
from tests.actors.cli_support import LineReader, cli, command, ok, start

DEPLOY = support.ROOT / "examples" / "deploy"
ANNOUNCED = re.compile(r" at (https?://\S+)/api/v1/events ")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    journal = JournalBuilder()
    journal.prompt_turn("served")
    root = tmp_path / "worker"
    journal.write_worker_root(root, "session-1")
    store = tmp_path / "store.sqlite3"
    ok(store, "replay", str(root))
    return store


class Serving:
    """A ``relaystore serve`` process, its announced URL and what it said before it."""

    def __init__(self, spawned: list[subprocess.Popen[str]], args: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            args,
            cwd=cwd,
            env=support.ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        spawned.append(self.process)
        assert self.process.stderr is not None
        self.lines = LineReader(self.process.stderr)
        self.said: list[str] = []
        deadline = time.monotonic() + support.TIMEOUT
        while True:
            got = self.lines.take(1, deadline=deadline)
            assert got, f"serve announced nothing: {self.said}"
            self.said.extend(got)
            match = ANNOUNCED.search(got[0])
            if match is not None:
                self.url = match[1]
                return

    def stop(self) -> list[str]:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=support.TIMEOUT) == 0
        self.lines.join()
        rest = []
        while not self.lines.lines.empty():
            rest.append(self.lines.lines.get())
        assert not any("Traceback" in line for line in rest), rest
        return rest


def usage_failure(result: subprocess.CompletedProcess[str]) -> str:
    """Check a refusal of an option's value (the command line's or the config file's):
    exit 2, one line on stderr, no traceback; return it."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def token_of(path: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {path.read_text().strip()}"}


# -- the config file ------------------------------------------------------------------------


@pytest.mark.integration
def test_serve_reads_its_config_and_the_command_line_overrides_it(
    db: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    config = tmp_path / "relaystore.toml"
    config.write_text(
        f"db = {json.dumps(str(db))}\n"
        "[serve]\n"
        'host = "127.0.0.1"\n'
        "port = 0\n"
        'token-file = "from-config.token"\n'
        "access-log = true\n"
        'cors-origin = ["https://viewer.example"]\n'
        "[publish]\n"
        'nats = "nats://127.0.0.1:4222"\n'
    )
    # No --db: the file names the store; --token-file here wins over the file's.
    args = command(db, "serve", "--config", str(config), "--token-file", "cli.token")
    server = Serving(spawned, [*args[:3], *args[5:]], cwd=tmp_path)
    assert (tmp_path / "cli.token").exists()
    assert not (tmp_path / "from-config.token").exists()
    assert str(db) in server.said[-1]
    answer = httpx.get(f"{server.url}/api/v1/sessions", headers=token_of(tmp_path / "cli.token"))
    assert answer.status_code == 200
    preflight = httpx.get(
        f"{server.url}/healthz", headers={"Origin": "https://viewer.example"}, timeout=10
    )
    assert preflight.headers["access-control-allow-origin"] == "https://viewer.example"
    logged = server.stop()
    assert any('"GET /api/v1/sessions HTTP/1.1" 200' in line for line in logged), logged


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[serve]\nprot = 8040\n", "unknown key 'prot' in [serve]"),
        ("[serv]\nport = 8040\n", "unknown key 'serv'"),
        ("[publish]\nstreem = 'X'\n", "unknown key 'streem' in [publish]"),
        ("[serve]\nport = 70000\n", "[serve] port: a TCP port is 0"),
        ("[serve]\naccess-log = 'yes'\n", "[serve] access-log: expected true or false"),
        ("[serve]\ncors-origin = ['not an origin']\n", "[serve] cors-origin: "),
        ("[publish]\nnats = 'http://x'\n", "[publish] nats: "),
        ("db = 3\n", "db: expected the store's path"),
        ("[serve\n", "not a TOML file"),
        ("[serve]\ntoken-file = 3\n", "[serve] token-file: expected a string, got 3"),
        ("[serve]\ncertfile = 1.5\n", "[serve] certfile: expected a string, got 1.5"),
        ("[serve]\nhost = 127\n", "[serve] host: expected a string, got 127"),
        ("[serve]\nport = 80.5\n", "[serve] port: expected a whole number"),
    ],
)
def test_a_bad_config_file_is_refused_naming_the_key_and_the_file(
    db: Path, tmp_path: Path, text: str, says: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    for name in ("serve", "publish"):  # every table is checked, whichever command reads it
        line = usage_failure(
            cli(db, name, "--config", str(config), "--nats", "nats://127.0.0.1:1")
            if name == "publish"
            else cli(db, name, "--config", str(config))
        )
        assert line.startswith(f"relaystore: {config}: "), line
        assert says in line, line


def test_a_missing_config_file_is_refused_in_one_line(db: Path, tmp_path: Path) -> None:
    line = usage_failure(cli(db, "serve", "--config", str(tmp_path / "none.toml")))
    assert line == f"relaystore: {tmp_path / 'none.toml'}: no such config file"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda path: os.mkfifo(path), "not a regular file"),  # reading it would hang
        (lambda path: path.write_bytes(b"\xff\xfe[serve]\x00\x01port = 1\n"), "not UTF-8 text"),
        (
            lambda path: path.write_text("# padding\n" * 200_000 + "[serve]\nport = 1\n"),
            "larger than 1048576 bytes",
        ),
    ],
    ids=["fifo", "binary", "oversized"],
)
def test_a_config_file_that_is_no_small_text_file_is_refused_in_one_line(
    db: Path, tmp_path: Path, make: Callable[[Path], object], says: str
) -> None:
    config = tmp_path / "config.toml"
    make(config)
    line = usage_failure(cli(db, "serve", "--config", str(config)))
    assert line.startswith(f"relaystore: {config}: "), line
    assert says in line, line
    assert not Path(f"{db}.api-token").exists()  # nothing started


def test_a_device_as_config_file_is_refused_without_reading_it(db: Path) -> None:
    line = usage_failure(cli(db, "serve", "--config", "/dev/zero"))
    assert line == "relaystore: /dev/zero: not a regular file; give a config file", line


@pytest.mark.integration
def test_cors_origins_on_the_command_line_replace_the_files(
    db: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    config = tmp_path / "relaystore.toml"
    config.write_text('[serve]\nport = 0\ncors-origin = ["https://from-file.example"]\n')
    args = command(
        db, "serve", "--config", str(config), "--cors-origin", "https://from-cli.example"
    )
    server = Serving(spawned, args, cwd=tmp_path)
    for origin, status in (("https://from-cli.example", 200), ("https://from-file.example", 403)):
        answer = httpx.get(f"{server.url}/healthz", headers={"Origin": origin}, timeout=10)
        assert answer.status_code == status, (origin, answer.text)
    server.stop()


@pytest.mark.integration
def test_publish_takes_its_nats_server_from_the_config(
    db: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    config = tmp_path / "relaystore.toml"
    config.write_text('[publish]\nnats = "nats://127.0.0.1:1"\n')
    # Without the file, --nats is required (a usage error); with it, publish starts on the
    # file's server (and keeps trying to reach it until stopped).
    assert cli(db, "publish").returncode == 2
    process = start(db, "publish", "--config", str(config), stdout=subprocess.DEVNULL)
    spawned.append(process)
    assert process.stderr is not None
    reader = LineReader(process.stderr)
    said = reader.take(1, deadline=time.monotonic() + support.TIMEOUT)
    assert said, "publish said nothing"
    assert said[0].startswith(f"relaystore: publishing {db} "), said
    assert " on nats://127.0.0.1:1 " in said[0]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=support.TIMEOUT) == 0
    reader.join()


@pytest.mark.integration
def test_the_example_config_and_units_start_serve(
    db: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    for unit, name in (
        ("relaystore-serve.service", "serve"),
        ("relaystore-publish.service", "publish"),
    ):
        parsed = configparser.ConfigParser(strict=False, interpolation=None)
        parsed.read(DEPLOY / unit)
        exec_start = shlex.split(parsed["Service"]["ExecStart"])
        assert exec_start[1:] == [name, "--config", "/etc/relaystore/relaystore.toml"]
        assert parsed["Service"]["KillSignal"] == "SIGTERM"  # a normal stop for both
    # The shipped file, its store and token moved here by the command line.
    args = command(
        db,
        "serve",
        "--config",
        str(DEPLOY / "relaystore.toml"),
        "--port",
        "0",
        "--token-file",
        str(tmp_path / "token"),
    )
    server = Serving(spawned, args, cwd=tmp_path)
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    server.stop()


def _install_steps() -> list[list[str]]:
    """The commands of operations.md's "Installing the units", split as a shell would."""
    text = (support.ROOT / "docs" / "operations.md").read_text()
    section = text.split("### Installing the units", 1)[1].split("```sh", 1)[1]
    block = section.split("```", 1)[0]
    return [shlex.split(line[2:]) for line in block.splitlines() if line.startswith("# ")]


@pytest.mark.integration
def test_the_units_verify_in_a_root_installed_as_the_docs_say(tmp_path: Path) -> None:
    steps = _install_steps()
    units = {}
    for unit in ("relaystore-serve.service", "relaystore-publish.service"):
        parsed = configparser.ConfigParser(strict=False, interpolation=None)
        parsed.read(DEPLOY / unit)
        units[unit] = parsed["Service"]
    command_path = {shlex.split(unit["ExecStart"])[0] for unit in units.values()}
    user = {unit["User"] for unit in units.values()}
    assert command_path == {"/usr/local/bin/relaystore"}
    assert user == {"relaystore"}
    # The docs make that user, put the command there and the config where the units read it.
    assert steps[0][:2] == ["useradd", "--system"]
    assert steps[0][-1] == "relaystore"
    link = next(step for step in steps if step[:2] == ["ln", "-s"])
    assert link[-1] == "/usr/local/bin/relaystore"
    config = next(step for step in steps if step[-1].endswith(".toml"))
    assert config[-1] == "/etc/relaystore/relaystore.toml"
    assert config[-2] == "examples/deploy/relaystore.toml"
    assert any(step[:2] == ["systemd-analyze", "verify"] for step in steps)
    # A root laid out by those steps: the command (linked as the docs link it), the
    # units, and the system's own units they depend on.
    root = tmp_path / "root"
    installed = root / link[-2].lstrip("/")
    installed.parent.mkdir(parents=True)
    installed.write_text(f'#!/bin/sh\nexec {sys.executable} -m relaystore.actors.cli "$@"\n')
    installed.chmod(0o755)
    (root / "usr/local/bin").mkdir(parents=True)
    (root / "usr/local/bin/relaystore").symlink_to(link[-2])
    shutil.copytree("/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    for unit in units:
        shutil.copy(DEPLOY / unit, root / "etc/systemd/system" / unit)
    verified = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", *units],
        capture_output=True,
        text=True,
        timeout=support.TIMEOUT,
        check=False,
    )
    # A warning (an unknown directive, a bad value) exits 0 too: nothing may be said.
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", "")


# -- TLS, the access log, the warning beyond loopback ----------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=support.TIMEOUT,
    )  # fmt: skip
    return cert, key


@pytest.mark.integration
def test_serve_speaks_tls_with_a_certificate_and_key(
    db: Path, certificate: tuple[Path, Path], spawned: list[subprocess.Popen[str]]
) -> None:
    cert, key = certificate
    server = Serving(
        spawned,
        command(db, "serve", "--port", "0", "--certfile", str(cert), "--keyfile", str(key)),
        cwd=db.parent,
    )
    assert server.url.startswith("https://127.0.0.1:")
    answer = httpx.get(
        f"{server.url}/api/v1/sessions",
        headers=token_of(Path(f"{db}.api-token")),
        verify=ssl.create_default_context(cafile=str(cert)),
    )
    assert answer.status_code == 200
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url.replace("https://", "http://") + "/healthz", timeout=5)
    server.stop()


@pytest.mark.integration
def test_bad_tls_files_are_refused_before_serving(
    db: Path, tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    only = usage_failure(cli(db, "serve", "--port", "0", "--certfile", str(cert)))
    assert (
        only == "relaystore: --certfile needs --keyfile too: TLS takes the certificate and its key"
    )
    missing = usage_failure(
        cli(db, "serve", "--port", "0", "--certfile", str(cert), "--keyfile", str(tmp_path / "no"))
    )
    assert missing == f"relaystore: {tmp_path / 'no'}: no such file"
    swapped = usage_failure(
        cli(db, "serve", "--port", "0", "--certfile", str(key), "--keyfile", str(key))
    )
    assert "cannot use" in swapped
    assert not Path(f"{db}.api-token").exists()  # refused before the token file is made


@pytest.fixture
def encrypted_key(tmp_path: Path, certificate: tuple[Path, Path]) -> Path:
    """The certificate's key, protected by the passphrase ``open sesame``."""
    _, key = certificate
    encrypted = tmp_path / "encrypted-key.pem"
    subprocess.run(
        [
            "openssl", "pkey", "-in", str(key), "-aes256", "-passout", "pass:open sesame",
            "-out", str(encrypted),
        ],
        check=True,
        capture_output=True,
        timeout=support.TIMEOUT,
    )  # fmt: skip
    return encrypted


@pytest.mark.integration
def test_an_encrypted_key_is_refused_in_one_line_without_a_prompt(
    db: Path, certificate: tuple[Path, Path], encrypted_key: Path
) -> None:
    cert, _ = certificate
    args = command(
        db, "serve", "--port", "0", "--certfile", str(cert), "--keyfile", str(encrypted_key)
    )
    expected = (
        f"relaystore: {encrypted_key}: the private key is encrypted; give its passphrase "
        "in a file with --keyfile-passphrase-file PATH, or decrypt the key (openssl pkey)"
    )
    assert usage_failure(cli(db, *args[5:])) == expected
    # On a terminal too: OpenSSL would prompt there; nothing must wait for a passphrase.
    on_terminal = subprocess.run(
        ["script", "-qec", shlex.join(args), "/dev/null"],
        cwd=db.parent,
        env=support.ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=support.TIMEOUT,
        check=False,
    )
    assert on_terminal.returncode == 2, on_terminal.stdout
    assert on_terminal.stdout.strip().splitlines() == [expected]
    assert not Path(f"{db}.api-token").exists()


@pytest.mark.integration
def test_an_encrypted_key_is_used_with_its_passphrase_file(
    db: Path,
    tmp_path: Path,
    certificate: tuple[Path, Path],
    encrypted_key: Path,
    spawned: list[subprocess.Popen[str]],
) -> None:
    cert, _ = certificate
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("wrong\n")
    args = ["--port", "0", "--certfile", str(cert), "--keyfile", str(encrypted_key)]
    wrong = usage_failure(cli(db, "serve", *args, "--keyfile-passphrase-file", str(passphrase)))
    assert wrong == (
        f"relaystore: {encrypted_key}: the passphrase of --keyfile-passphrase-file does not "
        "decrypt the private key"
    )
    assert "wrong" not in wrong  # the passphrase is never shown
    passphrase.write_text("open sesame\n")
    config = tmp_path / "relaystore.toml"
    config.write_text(f"[serve]\nkeyfile-passphrase-file = {json.dumps(str(passphrase))}\n")
    server = Serving(spawned, command(db, "serve", *args, "--config", str(config)), cwd=db.parent)
    answer = httpx.get(
        f"{server.url}/healthz", verify=ssl.create_default_context(cafile=str(cert)), timeout=10
    )
    assert answer.status_code == 200
    server.stop()


@pytest.mark.integration
def test_serving_beyond_loopback_without_tls_warns_in_one_line(
    db: Path, certificate: tuple[Path, Path], spawned: list[subprocess.Popen[str]]
) -> None:
    plain = Serving(
        spawned, command(db, "serve", "--host", "0.0.0.0", "--port", "0"), cwd=db.parent
    )
    assert len(plain.said) == 2, plain.said
    assert plain.said[0].startswith("relaystore: warning: serving on 0.0.0.0, beyond loopback")
    assert "--certfile" in plain.said[0]
    plain.stop()
    cert, key = certificate
    for extra in ([], ["--host", "0.0.0.0", "--certfile", str(cert), "--keyfile", str(key)]):
        quiet = Serving(spawned, command(db, "serve", "--port", "0", *extra), cwd=db.parent)
        assert len(quiet.said) == 1, quiet.said  # the announcement alone
        quiet.stop()


@pytest.mark.integration
def test_no_access_log_unless_asked(db: Path, spawned: list[subprocess.Popen[str]]) -> None:
    server = Serving(spawned, command(db, "serve", "--port", "0"), cwd=db.parent)
    httpx.get(f"{server.url}/healthz", timeout=10)
    assert not any("GET /healthz" in line for line in server.stop())


# -- metrics that say which process they describe -------------------------------------------


@pytest.mark.integration
def test_serves_metrics_name_the_store_and_the_reader_role(
    db: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    store_id = json.loads(ok(db, "stats", "--json").stdout)["store_id"]
    server = Serving(spawned, command(db, "serve", "--port", "0"), cwd=db.parent)
    text = httpx.get(
        f"{server.url}/metrics", headers=token_of(Path(f"{db}.api-token")), timeout=10
    ).text
    server.stop()
    assert f'relaystore_info{{role="reader",store_id="{store_id}"}} 1.0' in text
    assert "relaystore_commits_total 0.0" in text  # a reader commits nothing


@pytest.mark.integration
def test_the_embedder_registers_the_writers_metrics_in_its_own_registry(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from relaystore import EventStore, ObserveRelayEvents, SaveSession
    from relaystore.metrics import StoreCollector
    from relaystore.testing import example_session

    registry = CollectorRegistry()
    journal = JournalBuilder()
    journal.prompt_turn("hello")
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        registry.register(StoreCollector(store))
        store.ask(SaveSession(record=example_session("s1")))
        store.ask(ObserveRelayEvents(session_id="s1", events=journal.events))
        text = generate_latest(registry).decode()
        store_id = store.metrics().store_id
    assert f'relaystore_info{{role="writer",store_id="{store_id}"}} 1.0' in text
    commits = re.search(r"^relaystore_commits_total (\S+)$", text, re.MULTILINE)
    assert commits is not None
    assert float(commits[1]) >= 2


# -- deployment: one store, its writer's user and readers run as others ----------------------

WRITER_UID, READER_UID, SHARED_GID = 40001, 40002, 40010
"""Numeric ids no account uses: the writer's user, another user, a group they share."""
WRITE = (
    "import sys\n"
    "from relaystore import EventStore, SaveSession\n"
    "from relaystore.testing import example_session\n"
    "with EventStore.open(sys.argv[1]) as store:\n"
    "    store.ask(SaveSession(record=example_session(sys.argv[2])))\n"
)


def _as(uid: int, gid: int, *args: str) -> list[str]:
    """``args`` run as ``uid`` (primary group ``gid``, also in the shared group).

    It keeps one of root's powers, CAP_DAC_READ_SEARCH: it may read any file, so the
    interpreter, venv and checkout a test runs from need not be readable by that user
    (CI's are in a folder only root may enter). What it writes and makes is checked and
    owned as that user's, which is what these tests are about."""
    keep = "+dac_read_search"
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        f"--groups={SHARED_GID}",
        f"--inh-caps={keep}",
        f"--ambient-caps={keep}",
        *args,
    ]


def _write_as_writer(db: Path, session: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _as(WRITER_UID, SHARED_GID, sys.executable, "-c", WRITE, str(db), session),
        cwd=db.parent,
        env=support.ENV,
        capture_output=True,
        text=True,
        timeout=support.TIMEOUT,
        check=False,
    )


@pytest.fixture
def shared_store() -> Iterator[Path]:
    """A store its writer's user made, in a folder that user's group may write, and
    made readable by the group (as a reader's user in that group would need)."""
    base = Path(tempfile.mkdtemp(prefix="relaystore-users-"))
    try:
        base.chmod(0o711)
        folder = base / "store"
        folder.mkdir()
        os.chown(folder, WRITER_UID, SHARED_GID)
        folder.chmod(0o770)
        db = folder / "store.sqlite3"
        made = _write_as_writer(db, "session-1")
        assert made.returncode == 0, made.stderr
        db.chmod(0o640)
        yield db
    finally:
        shutil.rmtree(base)


@pytest.mark.integration
def test_serve_as_another_user_refuses_rather_than_lock_the_writer_out(
    shared_store: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = shared_store
    process = subprocess.Popen(
        _as(READER_UID, READER_UID, *command(db, "serve", "--port", "0")),
        cwd=db.parent,
        env=support.ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(process)
    assert process.stderr is not None
    reader = LineReader(process.stderr)
    said = reader.take(1, deadline=time.monotonic() + support.TIMEOUT)
    if said and " serving " in said[0]:  # it serves: stop it, the checks below fail
        process.send_signal(signal.SIGTERM)
    process.wait(timeout=support.TIMEOUT)
    reader.join()
    assert process.returncode == 1, said
    assert said == [
        f"relaystore: {db}: refusing to read the store as uid {READER_UID}: opening it would "
        f"make its -wal and -shm owned by uid {READER_UID}, which its writer, uid "
        f"{WRITER_UID}, the store file's owner, could not write; run this as uid {WRITER_UID}"
    ]
    made = {path.name for path in db.parent.iterdir()}
    assert made == {"store.sqlite3", "store.sqlite3.lock"}  # no -wal, -shm or token file
    written = _write_as_writer(db, "session-2")
    assert written.returncode == 0, written.stderr


@pytest.mark.integration
def test_a_reader_run_as_root_leaves_the_writer_its_store(shared_store: Path) -> None:
    # SQLite gives the -wal and -shm that root makes to the store file's owner.
    ok(shared_store, "sessions")
    written = _write_as_writer(shared_store, "session-2")
    assert written.returncode == 0, written.stderr
