"""The web viewer's server side through a real ``relaystore serve`` process and httpx:
the page and its headers, sign-in by cookie, the guards against other origins.

The browser itself is ``test_viewer_browser.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.actors.http.viewer import COOKIE, MAX_SIGN_INS, SIGN_IN_SECONDS, Access
from relaystore.domain.api_events import API_EVENT_KINDS
from relaystore.domain.errors import InvalidInput
from relaystore.domain.origins import validate_origin, validate_origins
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import command
from tests.actors.http_support import Server, start_server, stop_server
from tests.paths import ROOT

pytestmark = (
    pytest.mark.integration
)  # relaystore serve processes and the store's projection workers

APP = "http://app.example:3000"
VIEWER = ROOT / "src" / "relaystore" / "viewer"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("viewer") / "store.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
        journal = JournalBuilder()
        store.ask(ObserveRelayEvents(session_id="session-1", events=journal.prompt_turn("hello")))
    return path


LONG = "long-session"


@pytest.fixture(scope="module")
def long_session(store_path: Path) -> None:
    """A session of 3 + 10 x 2 items (a user message and an answer a turn)."""
    with EventStore.open(store_path) as store:
        store.ask(SaveSession(record=example_session(LONG)))
        journal = JournalBuilder()
        events = [e for n in range(10) for e in journal.prompt_turn(f"turn {n}")]
        store.ask(ObserveRelayEvents(session_id=LONG, events=events))


@pytest.fixture(scope="module")
def server(store_path: Path, long_session: None) -> Iterator[Server]:
    running = start_server(store_path, "--cors-origin", APP)
    yield running
    assert "Traceback" not in stop_server(running)


def _same_origin(server: Server) -> dict[str, str]:
    """What a browser sends with a form posted from the viewer's own page."""
    return {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}


def _sign_in(server: Server, token: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        server.url + "/session",
        data={"token": token},
        headers=_same_origin(server) if headers is None else headers,
        timeout=10,
    )


def _cookie(response: httpx.Response) -> str:
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/"
    match = re.match(r"relaystore_signin=([^;]+);", response.headers["set-cookie"])
    assert match is not None, response.headers["set-cookie"]
    return match[1]


# -- the page and its headers -------------------------------------------------------------


def test_the_page_and_every_response_carry_the_security_headers(server: Server) -> None:
    for response in (
        httpx.get(server.url + "/", timeout=10),
        httpx.get(server.url + "/viewer/viewer.js", timeout=10),
        server.get("/api/v1/sessions"),
        httpx.get(server.url + "/api/v1/sessions", timeout=10),  # a 401 too
        httpx.get(server.url + "/nowhere", timeout=10),  # and a 404
    ):
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp
        assert "script-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["Mj-Api-Version"] == "1"
        assert response.headers["Cache-Control"] == "no-store"


def test_the_viewer_is_served_without_a_token_as_the_files_shipped(server: Server) -> None:
    for path, name, media_type in (
        ("/", "index.html", "text/html"),
        ("/viewer/viewer.css", "viewer.css", "text/css"),
        ("/viewer/viewer.js", "viewer.js", "text/javascript"),
        ("/viewer/icon.svg", "icon.svg", "image/svg+xml"),
    ):
        response = httpx.get(server.url + path, timeout=10)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(media_type)
        assert response.content == (VIEWER / name).read_bytes()
    page = (VIEWER / "index.html").read_text()
    # Nothing inline that the CSP would block, and nothing from another origin.
    assert "<script>" not in page
    assert "style=" not in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)


def test_the_viewer_follows_every_kind_of_api_event() -> None:
    script = (VIEWER / "viewer.js").read_text()
    listed = re.search(r"const EVENT_KINDS = \[(.*?)\];", script, re.S)
    assert listed is not None
    assert sorted(re.findall(r'"([a-z_]+)"', listed[1])) == sorted(API_EVENT_KINDS)


def test_stats_answers_the_stats_commands_object(server: Server, store_path: Path) -> None:
    response = server.get("/stats")
    assert response.status_code == 200, response.text
    printed = subprocess.run(
        command(store_path, "stats", "--json"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert response.json() == json.loads(printed)
    assert httpx.get(server.url + "/stats", timeout=10).status_code == 401


# -- sign-in ------------------------------------------------------------------------------


def _window(server: Server, **params: object) -> Any:
    response = server.get(f"/api/v1/sessions/{LONG}/items", **params)
    assert response.status_code == 200, response.text
    return response.json()


def _ids(page: Any) -> list[str]:
    return [item["stable_id"] for item in page["items"]]


def test_the_window_opens_at_the_newest_items_and_pages_both_ways(server: Server) -> None:
    whole = server.get(f"/api/v1/sessions/{LONG}/transcript", limit=1000).json()
    in_order = sorted(whole["items"], key=lambda item: (item["position"], item["stable_id"]))
    every = [item["stable_id"] for item in in_order]
    assert len(every) > 14

    newest = _window(server, limit=4)
    assert _ids(newest) == every[-4:]
    assert newest["total"] == len(every)
    assert newest["older"] is True
    assert newest["newer"] is False
    assert newest["follow_after_seq"] >= whole["latest_seq"]
    assert newest["items"] == in_order[-4:]  # the /transcript shape

    # Back to the start a page at a time, then forward to the end again.
    pages, page = [newest], newest
    while page["older"]:
        first = page["items"][0]
        page = _window(
            server, limit=4, before_position=first["position"], before_id=first["stable_id"]
        )
        assert 0 < len(_ids(page)) <= 4
        assert page["newer"] is True
        assert "total" not in page
        pages.insert(0, page)
    assert [i for p in pages for i in _ids(p)] == every
    seen, page = _ids(pages[0]), pages[0]
    while page["newer"]:
        last = page["items"][-1]
        page = _window(server, limit=4, after_position=last["position"], after_id=last["stable_id"])
        seen += _ids(page)
    assert seen == every


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"before_position": "3"}, "give before_position and before_id together"),
        ({"after_id": "x"}, "give after_position and after_id together"),
        (
            {"before_position": "3", "before_id": "x", "after_position": "1", "after_id": "y"},
            "not both",
        ),
        ({"limit": "-1"}, "limit must be a non-negative integer"),
    ],
)
def test_a_bad_window_cursor_is_a_400_naming_it(
    server: Server, params: dict[str, str], says: str
) -> None:
    response = server.get(f"/api/v1/sessions/{LONG}/items", **params)
    assert response.status_code == 400
    assert says in response.json()["error"]
    assert server.get("/api/v1/sessions/no-such-session/items").status_code == 404


def test_sign_in_exchanges_the_token_for_a_cookie_the_api_accepts(server: Server) -> None:
    response = _sign_in(server, server.token)
    cookie = _cookie(response)
    attributes = response.headers["set-cookie"].lower()
    assert "httponly" in attributes
    assert "samesite=strict" in attributes
    assert "path=/" in attributes
    assert f"max-age={SIGN_IN_SECONDS}" in attributes
    assert server.token not in response.headers["set-cookie"]
    assert server.token not in response.headers["location"]

    jar = {"relaystore_signin": cookie}
    sessions = httpx.get(server.url + "/api/v1/sessions", cookies=jar, timeout=10)
    assert sessions.status_code == 200
    assert [s["id"] for s in sessions.json()["sessions"]] == [LONG, "session-1"]
    with httpx.stream(
        "GET", server.url + "/api/v1/events?after_seq=0", cookies=jar, timeout=10
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        first = next(line for line in stream.iter_lines() if line.startswith("event:"))
        assert first == "event: turn_started"


def test_sign_out_forgets_the_sign_in_on_the_server(server: Server) -> None:
    cookie = _cookie(_sign_in(server, server.token))
    jar = {"relaystore_signin": cookie}
    response = httpx.post(
        server.url + "/session/end", cookies=jar, headers=_same_origin(server), timeout=10
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    cleared = response.headers["set-cookie"].lower()
    assert cleared.startswith('relaystore_signin="";') or "max-age=0" in cleared
    # The old cookie, kept by a client that ignored the clearing, no longer reads.
    again = httpx.get(server.url + "/api/v1/sessions", cookies=jar, timeout=10)
    assert again.status_code == 401
    assert again.json()["code"] == "unauthorized"


def test_a_wrong_token_or_cookie_is_refused(server: Server) -> None:
    response = _sign_in(server, "not-the-token")
    assert response.status_code == 303
    assert response.headers["location"] == "/?signin=refused"
    assert "set-cookie" not in response.headers
    assert "not-the-token" not in response.text
    forged = httpx.get(
        server.url + "/api/v1/sessions", cookies={"relaystore_signin": server.token}, timeout=10
    )
    assert forged.status_code == 401  # the cookie is a sign-in id, never the token


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "same-site"},
        {},  # no word from the browser where it comes from
        {"Origin": APP, "Sec-Fetch-Site": "cross-site"},  # allowed to read, not to sign in
    ],
)
def test_sign_in_is_refused_unless_it_comes_from_the_viewers_own_page(
    server: Server, headers: dict[str, str]
) -> None:
    response = _sign_in(server, server.token, headers)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "forbidden"
    assert "set-cookie" not in response.headers
    assert server.token not in response.text


def test_a_form_posted_under_no_referrer_signs_in(server: Server) -> None:
    # Under Referrer-Policy: no-referrer a browser posts a form with Origin: null; its
    # Sec-Fetch-Site says where it comes from.
    _cookie(_sign_in(server, server.token, {"Origin": "null", "Sec-Fetch-Site": "same-origin"}))
    # A browser that sends no Sec-Fetch-Site: the Origin decides.
    _cookie(_sign_in(server, server.token, {"Origin": server.url}))


@pytest.mark.parametrize(
    ("content", "content_type", "says"),
    [
        (b"token=" + b"x" * 5000, "application/x-www-form-urlencoded", "larger than 4096"),
        (b'{"token": "x"}', "application/json", "sign in with a form"),
        (b"token=a&token=b", "application/x-www-form-urlencoded", "token was given 2 times"),
    ],
)
def test_a_malformed_sign_in_form_is_a_400_naming_it(
    server: Server, content: bytes, content_type: str, says: str
) -> None:
    response = httpx.post(
        server.url + "/session",
        content=content,
        headers={**_same_origin(server), "Content-Type": content_type},
        timeout=10,
    )
    assert response.status_code == 400
    assert says in response.json()["error"]


def _with_cookie(cookie: str) -> Request:
    return Request({"type": "http", "headers": [(b"cookie", f"{COOKIE}={cookie}".encode())]})


def test_sign_ins_expire_and_sign_outs_are_bounded() -> None:
    now = [1_700_000_000.0]
    access = Access("the-token", clock=lambda: now[0])
    assert access.sign_in("wrong") is None
    first = access.sign_in(" the-token\n")
    assert first is not None
    live = [first, *(access.sign_in("the-token") for _ in range(MAX_SIGN_INS + 1))]
    cookies = [cookie for cookie in live if cookie is not None]
    assert len(set(cookies)) == MAX_SIGN_INS + 2
    assert all(access.authorized(_with_cookie(cookie)) for cookie in cookies)
    # Signed out: refused; the remembered sign-outs are bounded, the oldest forgotten.
    for cookie in cookies[:-1]:
        access.sign_out(_with_cookie(cookie))
    assert not any(access.authorized(_with_cookie(cookie)) for cookie in cookies[1:-1])
    assert access.authorized(_with_cookie(cookies[0]))  # the oldest sign-out, forgotten
    assert access.authorized(_with_cookie(cookies[-1]))
    now[0] += SIGN_IN_SECONDS
    assert not any(access.authorized(_with_cookie(cookie)) for cookie in cookies)


def test_a_sign_in_outlives_a_restart_with_the_same_token_only() -> None:
    now = [1_700_000_000.0]
    cookie = Access("the-token", clock=lambda: now[0]).sign_in("the-token")
    assert cookie is not None
    assert "the-token" not in cookie
    restarted = Access("the-token", clock=lambda: now[0] + 60)
    assert restarted.authorized(_with_cookie(cookie))
    assert not Access("a-new-token", clock=lambda: now[0]).authorized(_with_cookie(cookie))
    issued, nonce, mac = cookie.split(".")
    for forged in (
        f"{int(issued, 16) + 3600:x}.{nonce}.{mac}",  # a later issue time, same signature
        f"{issued}.{nonce}x.{mac}",
        f"{issued}.{nonce}",
        "the-token",
        "",
    ):
        assert not restarted.authorized(_with_cookie(forged)), forged


def test_serve_restarted_with_the_same_token_keeps_the_cookie(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
    first = start_server(path)
    try:
        cookie = _cookie(_sign_in(first, first.token))
    finally:
        assert "Traceback" not in stop_server(first)
    again = start_server(path)
    try:
        jar = {"relaystore_signin": cookie}
        sessions = httpx.get(again.url + "/api/v1/sessions", cookies=jar, timeout=10)
        assert sessions.status_code == 200, sessions.text
    finally:
        assert "Traceback" not in stop_server(again)


# -- other origins ------------------------------------------------------------------------


def test_another_origin_is_refused_unless_named(server: Server) -> None:
    refused = httpx.get(
        server.url + "/api/v1/sessions",
        headers={**server.auth, "Origin": "http://evil.example"},
        timeout=10,
    )
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert "--cors-origin" in refused.json()["error"]
    assert "access-control-allow-origin" not in refused.headers

    allowed = httpx.get(
        server.url + "/api/v1/sessions", headers={**server.auth, "Origin": APP}, timeout=10
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == APP
    assert "access-control-allow-credentials" not in allowed.headers
    assert "Mj-Api-Version" in allowed.headers["access-control-expose-headers"]

    preflight = httpx.options(
        server.url + "/api/v1/events",
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization, last-event-id",
        },
        timeout=10,
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == APP
    assert "GET" in preflight.headers["access-control-allow-methods"]


def test_without_cors_origin_every_other_origin_is_refused(store_path: Path) -> None:
    running = start_server(store_path)
    try:
        response = httpx.get(
            running.url + "/api/v1/sessions", headers={**running.auth, "Origin": APP}, timeout=10
        )
        assert response.status_code == 403
        # The server's own pages are no other origin.
        own = httpx.get(
            running.url + "/api/v1/sessions",
            headers={**running.auth, "Origin": running.url},
            timeout=10,
        )
        assert own.status_code == 200
    finally:
        assert "Traceback" not in stop_server(running)


@pytest.mark.parametrize(
    "origin",
    [
        "*",
        "app.example",
        "http://app.example/",
        "http://app.example/path",
        "HTTP://APP.EXAMPLE",
        "ftp://app.example",
        "https://app.example:443",
        "http://app.example:99999",
        "http://user@app.example",
        "null",
    ],
)
def test_an_origin_no_browser_sends_is_refused(origin: str) -> None:
    with pytest.raises(InvalidInput, match="is not a web origin"):
        validate_origin(origin)


def test_serve_cors_origin_refuses_one_in_a_usage_line(tmp_path: Path) -> None:
    result = subprocess.run(
        command(
            tmp_path / "s.sqlite3",
            *("serve", "--cors-origin", APP, "--cors-origin", "https://app.example/"),
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--cors-origin" in result.stderr
    assert "'https://app.example/' is not a web origin" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "s.sqlite3.api-token").exists()


def test_web_origins_as_browsers_send_them_are_accepted() -> None:
    given = ["http://localhost:3000", "https://app.example", "http://[::1]:8080", "http://10.0.0.2"]
    assert validate_origins(given) == tuple(given)
    with pytest.raises(InvalidInput, match="as a list"):
        validate_origins("https://app.example")
