"""A ``relaystore serve`` process for HTTP tests: started on a free port, stopped by pid."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["Server", "start_server", "stop_server"]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def get(self, path: str, **params: object) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.auth, params=params, timeout=10)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(db: Path, *extra: str, port: int | None = None) -> Server:
    """Serve ``db`` read-only (``extra``: more ``serve`` options) on ``port`` (default: a
    free one); returns once ``/healthz`` answers."""
    port = port or _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relaystore.actors.cli",
            "--db",
            str(db),
            "serve",
            "--port",
            str(port),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        if process.poll() is not None:
            raise AssertionError(process.communicate()[1].decode())
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("the server did not start within 20 s")
        time.sleep(0.05)
    return Server(process, url, Path(f"{db}.api-token").read_text().strip())


def stop_server(server: Server) -> str:
    """SIGINT the server, wait for it, and return what it printed on stderr."""
    server.process.send_signal(signal.SIGINT)
    try:
        _, err = server.process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.communicate()
        raise
    return err.decode()
