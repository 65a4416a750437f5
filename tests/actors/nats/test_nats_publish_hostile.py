"""relaystore publish against hostile conditions (issue 47): an unreachable server with
``--once``, a forged message in a store's subjects, a store's subjects emptied under it.

Each case runs the real command against a real ``nats-server -js`` on a loopback port
(or none at all), and reads the stream back with nats-py.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.cli_support import ENV, TIMEOUT, command
from tests.actors.nats_support import (
    NatsServer,
    attempt,
    journal_root,
    latest_seq,
    run,
    running_server,
    store_id,
    stream_messages,
)

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes

STREAM = "RELAYSTORE"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    with running_server(tmp_path) as server:
        yield server


def new_store(tmp_path: Path, name: str = "store", turns: int = 10) -> Path:
    db = tmp_path / f"{name}.sqlite3"
    run(db, "replay", str(journal_root(tmp_path / f"{name}-roots", f"{name}-s", turns)))
    return db


def publish_once(db: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return attempt(db, "publish", "--nats", url, "--once", *extra)


# -- B: --once against a server nobody answers on ---------------------------------------


def test_publish_once_gives_up_on_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    db = new_store(tmp_path)
    url = "nats://publisher:s3cret-word@127.0.0.1:1"
    started = time.monotonic()
    result = subprocess.run(
        command(db, "publish", "--nats", url, "--once", "--connect-attempts", "3"),
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started < TIMEOUT
    last = result.stderr.splitlines()[-1]
    assert last.startswith(
        "relaystore: cannot reach a NATS server at nats://publisher:***@127.0.0.1:1 after "
        "3 attempts ("
    ), result.stderr
    assert last.endswith("); is it running, and is --nats right?")
    assert "s3cret" not in result.stderr
    # The default bound of --once: it ends by itself.
    default = publish_once(db, url)
    assert default.returncode == 1
    assert "after 5 attempts" in default.stderr.splitlines()[-1]
    assert "s3cret" not in default.stderr


def test_connect_attempts_is_checked_as_a_usage_error(tmp_path: Path) -> None:
    db = new_store(tmp_path)
    for bad in ("0", "-1", "x", "1000001"):
        result = publish_once(db, "nats://127.0.0.1:1", "--connect-attempts", bad)
        assert result.returncode == 2, result.stderr
        assert "--connect-attempts" in result.stderr


# -- C: a forged message in a store's subjects ----------------------------------------


async def _forge(url: str, subject: str, headers: dict[str, str] | None) -> int:
    """Publish one message nobody's publisher sent; its stream seq."""
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        ack = await nc.jetstream().publish(subject, b'{"forged": true}', headers=headers)
    finally:
        await nc.close()
    return ack.seq


def forge(url: str, subject: str, headers: dict[str, str] | None = None) -> int:
    return asyncio.run(_forge(url, subject, headers))


def store_stream(url: str, sid: str) -> list[bytes]:
    """The events the stream holds for store ``sid``, in stream order."""
    return [m.data for m in stream_messages(url, STREAM, f"relaystore.{sid}.*.*")]


def test_a_forged_message_is_named_and_removed_with_remove_foreign(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    url = nats_server.url
    db = new_store(tmp_path)
    assert publish_once(db, url).returncode == 0
    sid = store_id(db)
    subject = f"relaystore.{sid}.default.store-s"
    forged = forge(url, subject)
    run(db, "replay", str(journal_root(tmp_path / "more", "more", 5)))

    refused = publish_once(db, url)
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == (
        f"relaystore: stream {STREAM} holds a message on {subject} (stream seq {forged}) "
        f"that relaystore did not publish for store {sid}; remove it with `relaystore "
        f"publish --remove-foreign {forged}` (or `nats stream rmm {STREAM} {forged}`) and "
        "publish again"
    )

    # A message relaystore published is never removed, nor another store's.
    mine = publish_once(db, url, "--remove-foreign", "1")
    assert mine.returncode == 1
    line = mine.stderr.splitlines()[-1]
    assert line.startswith(f"relaystore: --remove-foreign 1: the message on relaystore.{sid}.")
    assert line.endswith(f" is one relaystore published for store {sid}; nothing removed")
    elsewhere = forge(url, "relaystore.0123456789abcdef0123456789abcdef.w.s")
    other = publish_once(db, url, "--remove-foreign", str(elsewhere))
    assert other.returncode == 1
    assert "not on this store's subjects" in other.stderr.splitlines()[-1]

    fixed = publish_once(db, url, "--remove-foreign", str(forged))
    assert fixed.returncode == 0, fixed.stderr
    assert (
        f"removed the foreign message on {subject} (stream seq {forged}) from stream {STREAM}"
        in fixed.stderr
    )
    assert store_stream(url, sid) == run(db, "events").stdout.splitlines()
    assert latest_seq(db) == 30
    # Gone already: a repeat of the command is harmless.
    assert publish_once(db, url, "--remove-foreign", str(forged)).returncode == 0
    assert store_stream(url, sid) == run(db, "events").stdout.splitlines()


def test_a_forged_change_with_a_store_header_but_no_number_is_named(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    url = nats_server.url
    db = new_store(tmp_path)
    assert publish_once(db, url).returncode == 0
    sid = store_id(db)
    subject = f"relaystore.{sid}.default.store-s.record"
    forged = forge(url, subject, {"Relaystore-Store": sid, "Relaystore-Change": "x"})
    refused = publish_once(db, url)
    assert refused.returncode == 1
    assert f"on {subject} (stream seq {forged})" in refused.stderr.splitlines()[-1]
    assert publish_once(db, url, "--remove-foreign", str(forged)).returncode == 0
    assert publish_once(db, url).returncode == 0


# -- D: a store's subjects emptied under it (47.3) ----------------------------------------


async def _purge(url: str, subject: str) -> None:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        assert await nc.jsm().purge_stream(STREAM, subject=subject)
    finally:
        await nc.close()


def _lost_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "but it acknowledged events" in line]


def test_a_publisher_says_when_the_stream_lost_what_it_had_acknowledged(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Before: after a purge of its subjects the store was published again from seq 1,
    and nothing said the stream had lost what it held."""
    url = nats_server.url
    db = new_store(tmp_path)
    sid = store_id(db)
    first = publish_once(db, url)
    assert first.returncode == 0, first.stderr
    assert _lost_lines(first.stderr) == []  # a new store: nothing was lost
    published = len(store_stream(url, sid))
    assert published == latest_seq(db) > 0
    again = publish_once(db, url)  # the stream holds all of it: nothing to say
    assert again.returncode == 0, again.stderr
    assert _lost_lines(again.stderr) == []

    asyncio.run(_purge(url, f"relaystore.{sid}.>"))
    told = publish_once(db, url)
    assert told.returncode == 0, told.stderr
    lines = _lost_lines(told.stderr)
    assert len(lines) == 1, told.stderr
    assert lines[0].startswith(
        f"relaystore: stream {STREAM} holds store {sid}'s events up to seq 0 and its changes "
        f"up to 0, but it acknowledged events up to seq {published} and changes up to "
    ), lines
    assert "it was purged or its limits (max_age, max_msgs, max_bytes) removed them" in lines[0]
    assert "publishing them again from seq 1 and change 1" in lines[0]


def test_a_server_that_refuses_the_record_costs_one_warning_and_nothing_else(
    tmp_path: Path,
) -> None:
    """A user whose permissions deny the key-value bucket: the publisher says once that
    it cannot keep the record, and publishes everything as before."""
    from tests.actors.nats_support import _free_port, nats_server

    port = _free_port()
    config = tmp_path / "nats.conf"
    config.write_text(
        f"listen: 127.0.0.1:{port}\n"
        f'jetstream {{ store_dir: "{tmp_path / "js"}" }}\n'
        "authorization { users = [ { user: pub, password: pw, permissions: {\n"
        '  publish: { allow: [">"], deny: ["$KV.>", "$JS.API.STREAM.CREATE.KV_>"] },\n'
        '  subscribe: { allow: [">"] } } } ] }\n'
    )
    log = (tmp_path / "server.log").open("ab")
    server = subprocess.Popen([nats_server(), "-c", str(config)], stdout=log, stderr=log)
    log.close()
    url = f"nats://pub:pw@127.0.0.1:{port}"
    try:
        db = new_store(tmp_path)
        sid = store_id(db)
        deadline = time.monotonic() + TIMEOUT
        while True:  # until the server listens (as the fixture's servers are waited for)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nats-server never listened"
                time.sleep(0.05)
        done = publish_once(db, url)
        assert done.returncode == 0, done.stderr
        said = [line for line in done.stderr.splitlines() if "cannot keep the record" in line]
        assert len(said) == 1, done.stderr
        assert said[0].startswith(
            f"relaystore: cannot keep the record of what stream {STREAM} acknowledged of "
            f"store {sid} in bucket {STREAM}_published ("
        ), said
        assert "pub:pw@" not in done.stderr
        assert "Traceback" not in done.stderr
        assert len(store_stream(url, sid)) == latest_seq(db)
    finally:
        server.terminate()
        server.wait(timeout=TIMEOUT)


async def _put_record(url: str, key: str, value: bytes) -> None:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        kv = await nc.jetstream().key_value(f"{STREAM}_published")
        await kv.put(key, value)
    finally:
        await nc.close()


@pytest.mark.parametrize("value", [b"\xff not json", b'{"seq": -5, "change": 0}'])
def test_a_record_that_is_not_relaystores_is_written_over_without_a_word(
    tmp_path: Path, nats_server: NatsServer, value: bytes
) -> None:
    """Garbage, or a negative seq, in the store's record: read as no record (nothing was
    lost that the publisher knows of), then written over with what the stream holds."""
    url = nats_server.url
    db = new_store(tmp_path)
    sid = store_id(db)
    assert publish_once(db, url).returncode == 0
    asyncio.run(_put_record(url, f"relaystore.{sid}", value))
    again = publish_once(db, url)
    assert again.returncode == 0, again.stderr
    assert _lost_lines(again.stderr) == []
    assert "Traceback" not in again.stderr
    asyncio.run(_purge(url, f"relaystore.{sid}.>"))  # the record was written over: it tells
    told = publish_once(db, url)
    assert len(_lost_lines(told.stderr)) == 1, told.stderr
