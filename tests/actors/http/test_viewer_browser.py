"""The web viewer in a real browser: Debian's headless Chromium, driven by Selenium through
Debian's chromedriver, on a store replayed from the example worker roots while
``relaystore serve`` runs in its own process.

Selenium is pointed at ``/usr/bin/chromedriver`` and ``/usr/bin/chromium`` (so Selenium
Manager never runs and no browser is downloaded). The tests skip only when those two are
not installed (``apt-get install chromium chromium-driver``; ``.ci/run`` installs them).
Set ``RELAYSTORE_VIEWER_SCREENSHOTS`` to a folder to keep a screenshot of each state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from relaystore import (
    ApiActivityState,
    EventStore,
    ObserveRelayEvents,
    RecordActivities,
    RecordElicitationAnswer,
    SaveSession,
)
from relaystore.domain.elicitation.forms import ElicitationAccept
from relaystore.domain.messages import SaveSubagent
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.relay import (
    CommandInterrupted,
    CommandRejected,
    PromptCommand,
    RelayCommandKind,
    SessionFault,
    encode_relay_event,
)
from relaystore.domain.sessions.records import SessionState
from relaystore.domain.subagents import SubagentRecord
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import WORKER_ROOTS, cli, replay
from tests.actors.http_support import Server, start_server, stop_server

pytestmark = pytest.mark.integration  # Chromium through chromedriver, and relaystore serve

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

SESSION = WORKER_ROOTS[0].name  # 17 transcript items, 3 turns
LIVE = "live-session"
ASKED = "asked-session"
"""A session of its own whose questions carry recorded answers."""
TURNS = "turns-session"
"""A session of its own for the turns table's live reads (the store is the module's)."""
WAIT = 20.0


@pytest.fixture(scope="module")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("RELAYSTORE_VIEWER_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screens")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("viewer-browser") / "store.sqlite3"
    replay(path, *WORKER_ROOTS)
    return path


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Server]:
    running = start_server(db)
    yield running
    assert "Traceback" not in stop_server(running)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """Debian's headless Chromium: missing is a failure, not a skip (``.ci/run`` installs
    it; locally ``apt-get install chromium chromium-driver``)."""
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        pytest.fail(
            "the browser tests need /usr/bin/chromium and /usr/bin/chromedriver: "
            "apt-get install chromium chromium-driver (.ci/run does)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,900",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(autouse=True)
def no_script_errors(browser: WebDriver) -> Iterator[None]:
    """Every test ends with no script error and no Content-Security-Policy violation."""
    browser.get_log("browser")  # what an earlier test left
    yield
    problems = [
        entry["message"]
        for entry in browser.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Uncaught" in entry["message"]
    ]
    assert not problems


def _until(browser: WebDriver, condition: Callable[[WebDriver], Any]) -> Any:
    """Wait for ``condition``; an element of a page being replaced (a form's redirect)
    is stale for a moment, which is no answer yet."""
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(browser, WAIT, poll_frequency=0.05, ignored_exceptions=ignored).until(
        condition
    )


def _shown(browser: WebDriver, element_id: str) -> bool:
    return bool(browser.find_element(By.ID, element_id).is_displayed())


def _text(browser: WebDriver, element_id: str) -> str:
    return str(browser.find_element(By.ID, element_id).text)


def _all(browser: WebDriver, selector: str, attribute: str) -> list[str]:
    """``attribute`` of every element ``selector`` finds, read in one step (the page
    re-renders its lists as the feed moves, so elements found earlier may be gone)."""
    found = browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.getAttribute(arguments[1]))",
        selector,
        attribute,
    )
    return [str(value) for value in found]


def _texts(browser: WebDriver, selector: str) -> list[str]:
    """The text of every element ``selector`` finds, read in one step."""
    found = browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", selector
    )
    return [str(value) for value in found]


def _click(browser: WebDriver, selector: str) -> None:
    browser.execute_script("document.querySelector(arguments[0]).click()", selector)


def _sessions(browser: WebDriver) -> list[str]:
    return _all(browser, "#session-list .session", "data-session-id")


def _items(browser: WebDriver) -> list[str]:
    return _all(browser, "#transcript article", "data-stable-id")


def _sign_in(browser: WebDriver, token: str) -> None:
    field = browser.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    browser.find_element(By.ID, "signin-button").click()


def _signed_in(browser: WebDriver, server: Server, path: str = "/") -> None:
    """Open ``path`` signed in (signing in first when the page asks)."""
    browser.get(server.url + path)
    _until(browser, lambda b: _shown(b, "signin-view") or _shown(b, "app"))
    if _shown(browser, "signin-view"):
        _sign_in(browser, server.token)
        _until(browser, lambda b: _shown(b, "app"))
        if path != "/":
            browser.get(server.url + path)
    _until(browser, lambda b: _shown(b, "app") and len(_sessions(b)) > 0)


def _without_cookie(browser: WebDriver, server: Server) -> None:
    """Open the viewer with no cookie; wait for what it shows."""
    browser.get(server.url + "/")
    browser.delete_all_cookies()
    browser.refresh()
    _until(browser, lambda b: _shown(b, "signin-view"))


def test_a_page_without_the_cookie_shows_the_sign_in(
    browser: WebDriver, server: Server, screens: Path
) -> None:
    _without_cookie(browser, server)
    assert not _shown(browser, "app")
    assert _sessions(browser) == []
    browser.save_screenshot(str(screens / "01-sign-in.png"))

    _sign_in(browser, "not-the-token")
    _until(browser, lambda b: _shown(b, "signin-refused"))
    assert "not accepted" in _text(browser, "signin-refused")
    assert browser.current_url == server.url + "/"  # the refusal's flag is gone
    assert browser.get_cookies() == []
    browser.save_screenshot(str(screens / "02-sign-in-refused.png"))


def test_signed_in_the_list_renders_and_the_feed_follows(
    browser: WebDriver, server: Server, screens: Path
) -> None:
    _without_cookie(browser, server)
    _sign_in(browser, server.token)
    _until(browser, lambda b: len(_sessions(b)) == len(WORKER_ROOTS))
    assert sorted(_sessions(browser)) == sorted(root.name for root in WORKER_ROOTS)

    (cookie,) = browser.get_cookies()
    assert cookie["name"] == "relaystore_signin"
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert server.token not in cookie["value"]
    assert server.token not in browser.current_url
    readable = browser.execute_script(
        "return [document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage)]"
    )
    assert readable == ["", "{}", "{}"]

    badges = _all(browser, "#session-list .session .badge", "class")
    assert "badge lifecycle v-suspended" in badges
    assert "badge phase v-idle" in badges
    # The feed's EventSource signs in with the cookie alone.
    _until(browser, lambda b: _text(b, "feed-state") == "live")
    _until(browser, lambda b: len(_all(b, "#feed li", "data-seq")) > 0)
    _until(browser, lambda b: _text(b, "health-state") == "healthy")
    assert "3 sessions" in _text(browser, "health-figures")
    browser.save_screenshot(str(screens / "03-sessions-and-feed.png"))


def _page(browser: WebDriver, button: str, end: int) -> None:
    """Click ``button`` and wait until the item at ``end`` of the window changes."""
    seen = _items(browser)[end]
    _click(browser, button)
    _until(browser, lambda b: _items(b)[end] != seen)


def _in_order(server: Server, session_id: str) -> list[str]:
    whole: list[dict[str, Any]] = []
    after = 0
    while True:
        page = server.get(f"/api/v1/sessions/{session_id}/transcript", after_seq=after, limit=1000)
        body = page.json()
        whole += body["items"]
        if not body["items"] or body["next_after_seq"] >= body["latest_seq"]:
            break
        after = body["next_after_seq"]
    return [
        item["stable_id"] for item in sorted(whole, key=lambda i: (i["position"], i["stable_id"]))
    ]


def _contiguous(shown: list[str], every: list[str]) -> bool:
    """Whether ``shown`` is a run of ``every`` in its order."""
    if not shown or shown[0] not in every:
        return False
    start = every.index(shown[0])
    return every[start : start + len(shown)] == shown


def test_a_transcript_opens_at_its_newest_items_with_its_turns_and_usage(
    browser: WebDriver, server: Server, screens: Path
) -> None:
    in_order = _in_order(server, SESSION)
    assert len(in_order) > 10

    _signed_in(browser, server, f"/?page_size=5#session={SESSION}")
    _until(browser, lambda b: len(_items(b)) >= 5)
    shown = _items(browser)
    assert shown[-1] == in_order[-1]
    assert _contiguous(shown, in_order)
    assert f"of {len(in_order)}" in _text(browser, "tab-transcript-count")
    assert _text(browser, "transcript-status").startswith("Items ")
    browser.save_screenshot(str(screens / "04-transcript-newest.png"))

    while _shown(browser, "transcript-older"):
        _page(browser, "#transcript-older", 0)
    assert _items(browser) == in_order  # 17 items fit the window (4 pages of 5)
    browser.save_screenshot(str(screens / "05-transcript-whole.png"))

    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="usage"]').click()
    _until(browser, lambda b: len(_all(b, "#usage-rows tr", "class")) == 3)
    totals = _text(browser, "usage-totals").replace(",", "")
    usage = server.get(f"/api/v1/sessions/{SESSION}/usage").json()["totals"]
    assert str(usage["total_tokens"]["tokens"]) in totals
    browser.save_screenshot(str(screens / "06-turns-and-usage.png"))


def _replay(db: Path, root: Path, session: str = LIVE) -> None:
    """``relaystore replay`` in its own process, into the store the server reads."""
    result = cli(
        db, "replay", str(root), "--session", session, "--projection", "thread", "--no-progress"
    )
    assert result.returncode == 0, result.stderr


def _at_end(browser: WebDriver) -> bool:
    return bool(
        browser.execute_script(
            "const b = document.getElementById('transcript-scroll');"
            "return b.scrollHeight - b.scrollTop - b.clientHeight < 40"
        )
    )


def _scroll_top(browser: WebDriver) -> int:
    return int(
        browser.execute_script("return document.getElementById('transcript-scroll').scrollTop")
    )


def test_a_replay_in_another_process_appears_live(
    browser: WebDriver, server: Server, db: Path, tmp_path: Path, screens: Path
) -> None:
    _signed_in(browser, server)
    _until(browser, lambda b: _text(b, "feed-state") == "live")
    journal = JournalBuilder()
    journal.prompt_turn("Which tests cover the viewer?", chunks=("The browser ", "tests do."))
    journal.question("Run them now?", action="accept")
    journal.question("Delete the screenshots?", action="decline")
    for n in range(15):
        journal.prompt_turn(f"Step {n}: and then?", chunks=("Then the next step.",))
    journal.question("Push the branch?", action=None)
    _replay(db, journal.write_worker_root(tmp_path / "root", LIVE))

    _until(browser, lambda b: LIVE in _sessions(b))
    _until(browser, lambda b: f"#session={LIVE}" in _all(b, "#feed .feed-session", "href"))
    # A session new to the page: the feed names it by its title once the list knows it.
    title = server.get(f"/api/v1/sessions/{LIVE}").json()["title"]
    assert title
    feed_names = f'#feed .feed-session[data-session-id="{LIVE}"]'
    _until(browser, lambda b: set(_texts(b, feed_names)) == {title})
    browser.save_screenshot(str(screens / "07-replay-appears-live.png"))

    _click(browser, f'.session[data-session-id="{LIVE}"]')
    _until(browser, lambda b: "Step 14: and then?" in _text(b, "transcript"))
    _until(browser, lambda b: "following live" in _text(b, "transcript-status"))
    _until(browser, _at_end)
    shown = len(_items(browser))

    # Scrolled to its end, the transcript follows what the session adds.
    journal.prompt_turn("And the server side?", chunks=("test_http_viewer.py",))
    _replay(db, journal.write_worker_root(tmp_path / "root", LIVE))
    _until(browser, lambda b: "And the server side?" in _text(b, "transcript"))
    assert len(_items(browser)) > shown
    _until(browser, _at_end)
    assert not _shown(browser, "transcript-new")
    browser.save_screenshot(str(screens / "08-transcript-follows-live.png"))

    # Scrolled up, it stays where the reader is and says that new items wait below.
    browser.execute_script("document.getElementById('transcript-scroll').scrollTop = 0")
    _until(browser, lambda b: _scroll_top(b) == 0)
    journal.prompt_turn("One more thing?", chunks=("Yes.",))
    _replay(db, journal.write_worker_root(tmp_path / "root", LIVE))
    _until(browser, lambda b: _shown(b, "transcript-new"))
    assert "new item" in _text(browser, "transcript-new")
    assert _scroll_top(browser) == 0
    browser.save_screenshot(str(screens / "09-new-items-marker.png"))
    _click(browser, "#transcript-new")
    _until(browser, lambda b: _at_end(b) and not _shown(b, "transcript-new"))
    assert "One more thing?" in _text(browser, "transcript")

    # Every question in order, each with how it was resolved.
    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="questions"]').click()
    _until(browser, lambda b: len(_all(b, "#questions .question", "class")) == 3)
    cards = browser.execute_script(
        "return [...document.querySelectorAll('#questions .question')].map(q => q.innerText)"
    )
    assert ["Run them now?" in cards[0], "Delete the screenshots?" in cards[1]] == [True, True]
    assert "Push the branch?" in cards[2]
    assert "Answered (accepted)" in cards[0]
    assert "Declined" in cards[1]
    assert "Waiting for an answer" in cards[2]
    assert _all(browser, "#questions .question", "class") == [
        "question resolved",
        "question resolved",
        "question waiting",
    ]
    browser.save_screenshot(str(screens / "10-questions-and-answers.png"))


_SECRET_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "pin": {"type": "string", "title": "PIN", "_meta": {"codex": {"isSecret": True}}},
    },
    "required": ["name", "pin"],
}


def test_each_question_shows_who_answered_and_what(
    browser: WebDriver, server: Server, db: Path, screens: Path
) -> None:
    """Before: an answered question showed the journal's action only ("who answered and
    what: not recorded"), even when the embedder had recorded both."""
    with EventStore.open(db, projection="thread") as store:
        store.ask(SaveSession(record=example_session(ASKED)))
        journal = JournalBuilder()
        events = journal.question("Who signs off?", request_id="sign", schema=_SECRET_FORM)
        events += journal.question("Keep the logs?", request_id="logs", action="decline")
        events += journal.question("Ship it?", request_id="ship", action=None)
        store.ask(ObserveRelayEvents(session_id=ASKED, events=events))
        store.ask(
            RecordElicitationAnswer(
                session_id=ASKED,
                elicitation_id="sign",
                answered_by="ada@example.com",
                response=ElicitationAccept(content={"name": "Ada", "pin": "8642"}),
                answered_at_ms=int(time.time() * 1000),
            )
        )
    _signed_in(browser, server, f"/?answers=1#session={ASKED}")  # a page of its own
    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="questions"]').click()
    _until(browser, lambda b: len(_all(b, "#questions .question", "class")) == 3)
    _until(browser, lambda b: len(_all(b, "#questions .answered-by", "class")) == 1)
    cards = _texts(browser, "#questions .question")
    assert "Who signs off?" in cards[0]
    assert "Answered (accepted)" in cards[0]  # the journal's outcome stays
    assert "answered by ada@example.com at " in cards[0]
    assert "accepted: name = Ada; pin = ***" in cards[0]
    assert "not recorded" not in cards[0]
    assert "8642" not in " ".join(cards)  # a secret answer is never shown
    assert "Declined" in cards[1]
    assert "who answered and what: not recorded" in cards[1]  # no record: said so
    assert "Waiting for an answer" in cards[2]
    browser.save_screenshot(str(screens / "10b-who-answered-and-what.png"))


_SPY_USAGE = """
window.usageReads = [];
const fetched = window.fetch;
window.fetch = (url, ...rest) => {
  if (String(url).includes('/usage?')) window.usageReads.push(String(url));
  return fetched(url, ...rest);
};
"""


def _usage_rows(browser: WebDriver) -> list[str]:
    return cast(
        list[str],
        browser.execute_script(
            "return [...document.querySelectorAll('#usage-rows tr')].map(r => r.innerText)"
        ),
    )


def test_the_turns_table_reads_only_the_turns_a_live_session_adds(
    browser: WebDriver, server: Server, db: Path, tmp_path: Path
) -> None:
    """Before: every event of the open session read the whole turns table again from
    its first page (and a long session re-read every page per event)."""
    _signed_in(browser, server)
    _until(browser, lambda b: _text(b, "feed-state") == "live")
    journal = JournalBuilder()
    for n in range(5):
        journal.prompt_turn(f"Turn {n}?", chunks=("Done.",))
    _replay(db, journal.write_worker_root(tmp_path / "root", TURNS), TURNS)
    _until(browser, lambda b: TURNS in _sessions(b))
    _click(browser, f'.session[data-session-id="{TURNS}"]')
    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="usage"]').click()
    _until(browser, lambda b: len(_usage_rows(b)) == 5)
    cursor = server.get(f"/api/v1/sessions/{TURNS}/usage").json()["next_after_seq"]
    browser.execute_script(_SPY_USAGE)

    for n in range(5, 7):
        journal.prompt_turn(f"Turn {n}?", chunks=("Done.",))
    _replay(db, journal.write_worker_root(tmp_path / "root", TURNS), TURNS)
    _until(browser, lambda b: len(_usage_rows(b)) == 7)
    reads = cast(list[str], browser.execute_script("return window.usageReads"))
    assert reads, "the live events read the turns table"
    firsts = [int(url.split("after_seq=")[1].split("&")[0]) for url in reads]
    assert min(firsts) >= cursor > 0, reads  # never from the first page again
    rows = _usage_rows(browser)
    assert [row.split("\t")[0] for row in rows] == [str(n) for n in range(1, 8)]
    assert _text(browser, "tab-usage-count") == "7"
    totals = server.get(f"/api/v1/sessions/{TURNS}/usage").json()["coverage"]
    assert totals["recorded_turns"] == 7


def test_sign_out_forgets_the_cookie(browser: WebDriver, server: Server, screens: Path) -> None:
    _signed_in(browser, server)
    cookie = browser.get_cookie("relaystore_signin")
    assert cookie is not None
    browser.find_element(By.CSS_SELECTOR, "#signout button").click()
    _until(browser, lambda b: _shown(b, "signin-view"))
    assert browser.get_cookie("relaystore_signin") is None
    assert not _shown(browser, "app")
    browser.save_screenshot(str(screens / "11-signed-out.png"))
    # The server forgot it too: the old value no longer reads.
    stale = httpx.get(
        server.url + "/api/v1/sessions",
        cookies={"relaystore_signin": cookie["value"]},
        timeout=10,
    )
    assert stale.status_code == 401


BEHIND = "behind-session"
FUTURE_LINE = b'{"type":"mailbox_digest_sent","data":{"count":3}}'
"""A line of a kind this build does not know: its session's projection waits before it."""


def _badges(browser: WebDriver, session_id: str) -> list[str]:
    return _all(browser, f'#session-list .session[data-session-id="{session_id}"] .badge', "class")


def test_the_list_shows_each_sessions_activity_and_a_behind_mark(
    browser: WebDriver, server: Server, db: Path, tmp_path: Path, screens: Path
) -> None:
    _signed_in(browser, server)
    _until(browser, lambda b: _text(b, "feed-state") == "live")
    assert not any("activity" in badge for badge in _badges(browser, SESSION))

    # The supervisor records an activity (through the embedding store, in this process):
    # the list shows it on that session alone, without a reload.
    state = ApiActivityState(
        state="thinking", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    with EventStore.open(db, projection="thread") as store:
        store.ask(
            RecordActivities(activities=[(SESSION, state)], recorded_at_ms=int(time.time() * 1000))
        )
    _until(browser, lambda b: "badge activity v-thinking" in _badges(b, SESSION))
    others = [root.name for root in WORKER_ROOTS if root.name != SESSION]
    assert not any("v-thinking" in badge for other in others for badge in _badges(browser, other))

    # A journal from a newer worker: its session is held behind the line this build does
    # not know, and the list marks it so (and no other session).
    journal = JournalBuilder()
    journal.prompt_turn("Before the newer line")
    newer = journal.newer_line(FUTURE_LINE)
    path = tmp_path / "newer.jsonl"
    path.write_bytes(journal.to_bytes() + encode_relay_event(newer) + b"\n")
    result = cli(db, "replay", str(path), "--session", BEHIND, "--projection", "thread")
    assert result.returncode == 0, result.stderr
    assert f"warning: session {BEHIND}: " in result.stderr
    _until(browser, lambda b: "badge behind v-behind" in _badges(b, BEHIND))
    assert not any("v-behind" in badge for badge in _badges(browser, SESSION))
    assert "1 behind" in _text(browser, "health-figures")
    browser.save_screenshot(str(screens / "12-activity-and-behind.png"))

    _click(browser, f'.session[data-session-id="{BEHIND}"]')
    _until(browser, lambda b: _shown(b, "detail-behind"))
    assert _text(browser, "detail-behind").startswith(
        f"Projection behind at ordinal {newer.ordinal} (unknown "
    )
    browser.save_screenshot(str(screens / "13-behind-detail.png"))


# -- every width ------------------------------------------------------------------------

WIDTHS = [(360, 640), (390, 844), (800, 700), (1024, 768), (1440, 900)]
"""Two phones, a small laptop, a laptop, a desktop (CSS pixels)."""


@pytest.fixture
def viewport(browser: WebDriver) -> Iterator[Callable[[int, int], None]]:
    """Sets the page's viewport exactly (a phone's is a mobile one); undone afterwards."""

    def size(width: int, height: int) -> None:
        browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800},
        )

    yield size
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


_LAYOUT = """
const box = (id) => { const r = document.getElementById(id).getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height}; };
const split = [...document.querySelectorAll('#detail-facts dd')].filter(dd => /^\\w+$/.test(dd.textContent))
  .filter(dd => { const range = document.createRange(); range.selectNodeContents(dd);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1; })
  .map(dd => dd.textContent);
return {width: innerWidth, height: innerHeight,
  page: document.documentElement.scrollWidth,
  scroller: box('transcript-scroll'), signout: box('signout'),
  tabs: [...document.querySelectorAll('.tab')].map(t => t.getBoundingClientRect())
    .reduce((a, r) => ({right: Math.max(a.right, r.right), bottom: Math.max(a.bottom, r.bottom)}), {right: 0, bottom: 0}),
  split: split};
"""


def _layout(browser: WebDriver) -> dict[str, Any]:
    found: dict[str, Any] = browser.execute_script(_LAYOUT)
    return found


@pytest.mark.parametrize(("width", "height"), WIDTHS, ids=[f"{w}x{h}" for w, h in WIDTHS])
def test_at_every_width_the_transcript_is_reachable_and_readable(
    browser: WebDriver,
    server: Server,
    screens: Path,
    viewport: Callable[[int, int], None],
    width: int,
    height: int,
) -> None:
    viewport(width, height)
    _signed_in(browser, server, f"/?width={width}#session={SESSION}")  # a page of its own
    _until(browser, lambda b: len(_items(b)) > 0 and _shown(b, "transcript-scroll"))
    _click(browser, "#detail-more summary")  # the facts, opened
    _until(browser, lambda b: len(_all(b, "#detail-facts dd", "class")) > 3)
    layout = _layout(browser)
    assert layout["width"] == width
    assert layout["page"] <= width, "the page is wider than the screen"
    signout = layout["signout"]
    assert signout["left"] >= 0
    assert signout["right"] <= width
    assert signout["bottom"] <= height
    tabs = layout["tabs"]
    assert tabs["right"] <= width, "the tabs are out of reach"
    assert tabs["bottom"] <= height, "the tabs are out of reach"
    assert layout["split"] == [], "a fact breaks in the middle of a word"
    _click(browser, "#detail-more summary")  # closed again: the room goes to the transcript
    _until(browser, lambda b: _layout(b)["scroller"]["height"] >= 0.4 * height)
    scroller = _layout(browser)["scroller"]
    assert scroller["left"] >= 0
    assert scroller["right"] <= width
    assert scroller["bottom"] <= height
    browser.save_screenshot(str(screens / f"23-width-{width}.png"))

    # Its first item can be scrolled to and read.
    browser.execute_script("document.getElementById('transcript-scroll').scrollTop = 0")
    first = browser.find_element(By.CSS_SELECTOR, "#transcript article")
    top = first.rect["y"]
    assert scroller["top"] <= top < scroller["bottom"]
    assert first.is_displayed()

    if width < 800:  # one pane at a time: the bar of panes reaches the others
        _click(browser, '.pane-button[data-pane="sessions"]')
        _until(browser, lambda b: _shown(b, "session-list") and not _shown(b, "transcript-scroll"))
        browser.save_screenshot(str(screens / f"24-width-{width}-sessions.png"))
        _click(browser, f'.session[data-session-id="{SESSION}"]')
        _until(browser, lambda b: _shown(b, "transcript-scroll") and not _shown(b, "session-list"))
        _click(browser, '.pane-button[data-pane="feed"]')
        _until(browser, lambda b: _shown(b, "feed") and not _shown(b, "transcript-scroll"))
    else:
        assert _shown(browser, "session-list")
        assert _shown(browser, "feed")


# -- long transcripts -------------------------------------------------------------------

LONG = "long-session"


def _long_session(db: Path, session_id: str, turns: int) -> None:
    """A session of ``turns`` prompt turns (a user message and an answer each), recorded
    through the embedding store in this process."""
    with EventStore.open(db, projection="thread", synchronous="OFF") as store:
        store.ask(SaveSession(record=example_session(session_id)))
        journal = JournalBuilder()
        batch: list[Any] = []
        for turn in range(turns):
            batch += journal.prompt_turn(f"question {turn}?", chunks=(f"answer {turn}.",))
            if len(batch) >= 2048:
                store.ask(ObserveRelayEvents(session_id=session_id, events=batch))
                batch = []
        if batch:
            store.ask(ObserveRelayEvents(session_id=session_id, events=batch))


def _window_holds(browser: WebDriver, every: list[str], most: int) -> list[str]:
    shown = _items(browser)
    assert 0 < len(shown) <= most, f"{len(shown)} items on the page, at most {most} wanted"
    assert _contiguous(shown, every)
    return shown


def test_a_long_transcript_opens_at_its_newest_and_pages_both_ways_in_a_bounded_window(
    browser: WebDriver, server: Server, db: Path, screens: Path
) -> None:
    _long_session(db, LONG, 100)
    every = _in_order(server, LONG)
    assert len(every) >= 200
    page = 10
    most = 4 * page  # the window: four pages

    _signed_in(browser, server, f"/?page_size={page}#session={LONG}")
    _until(browser, lambda b: every[-1] in _items(b))
    _until(browser, _at_end)
    _window_holds(browser, every, most)
    assert _text(browser, "tab-transcript-count").endswith(f"of {len(every)}")
    assert "following live" in _text(browser, "transcript-status")
    browser.save_screenshot(str(screens / "14-long-transcript-newest.png"))

    # Scrolling up to the top loads the page before it by itself.
    first = _items(browser)[0]
    browser.execute_script("document.getElementById('transcript-scroll').scrollTop = 0")
    _until(browser, lambda b: _items(b)[0] != first)
    _window_holds(browser, every, most)

    # Back to the oldest item a page at a time; the page never holds more than the window.
    while _shown(browser, "transcript-older"):
        _page(browser, "#transcript-older", 0)
        _window_holds(browser, every, most)
    assert _items(browser)[0] == every[0]
    assert _text(browser, "transcript-status").startswith(
        f"Items 1\N{EN DASH}{len(_items(browser))} of"
    )
    assert _shown(browser, "transcript-newer")
    count = _text(browser, "tab-transcript-count")
    assert count == f"{len(_items(browser))} of {len(every)}"
    browser.save_screenshot(str(screens / "15-long-transcript-oldest.png"))

    # And forward again to the newest.
    while _shown(browser, "transcript-newer"):
        _page(browser, "#transcript-newer", -1)
        _window_holds(browser, every, most)
    assert _items(browser)[-1] == every[-1]
    _until(browser, lambda b: "following live" in _text(b, "transcript-status"))


# -- errors and faults ------------------------------------------------------------------

ERRORS = "errors-session"
FAILED = "failed-session"


def _troubled_journal() -> JournalBuilder:
    """A session with one of each trouble: a prompt rejected for quota, a turn interrupted
    by the provider, a session fault, a failed command; and one good turn."""
    journal = JournalBuilder()
    journal.prompt_turn("A good turn first", chunks=("Fine.",))
    rejected = journal.command(PromptCommand.of(prompt=[{"type": "text", "text": "Over quota"}]))
    prompt_id = rejected[0].command_id
    journal.add(
        CommandRejected.of(
            reason=OutcomeReason.QUOTA_LIMIT,
            command_id=prompt_id,
            command=RelayCommandKind.PROMPT,
            message="quota exhausted until 14:00",
        ),
        command_id=prompt_id,
    )
    started = journal.start_prompt("Interrupted by the provider")
    cut_id = started[0].command_id
    journal.say("Half an ans")
    journal.add(
        CommandInterrupted.of(
            reason=OutcomeReason.PROVIDER_FAILURE,
            command_id=cut_id,
            command=RelayCommandKind.PROMPT,
            message="the provider answered 502",
        ),
        command_id=cut_id,
    )
    journal.add(
        SessionFault.of(reason=OutcomeReason.RUNTIME_FAILURE, message="the runtime lost its socket")
    )
    journal.shell_command("make lint", stderr="lint: 3 problems", exit_code=2)
    return journal


def test_errors_and_faults_stand_out_in_the_transcript_the_turns_and_the_feed(
    browser: WebDriver, server: Server, db: Path, tmp_path: Path, screens: Path
) -> None:
    _signed_in(browser, server)
    _until(browser, lambda b: _text(b, "feed-state") == "live")
    root = _troubled_journal().write_worker_root(tmp_path / "root", ERRORS)
    result = cli(
        db, "replay", str(root), "--session", ERRORS, "--projection", "thread", "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    _until(browser, lambda b: ERRORS in _sessions(b))

    # The feed: the fault, the failed command and the two bad turns, each marked in words.
    feed_errors = f'#feed .feed-item.is-error .feed-session[data-session-id="{ERRORS}"]'
    _until(browser, lambda b: len(_all(b, feed_errors, "href")) == 4)
    marked = _texts(browser, "#feed .feed-item.is-error .badge.alarm")
    assert all(text.startswith("⚠ ") for text in marked)
    assert not _all(browser, "#feed .feed-item:not(.is-error) .badge.alarm", "class")

    _click(browser, f'.session[data-session-id="{ERRORS}"]')
    _until(browser, lambda b: "make lint" in _text(b, "transcript"))
    lines = {
        "quota exhausted until 14:00": "rejected",
        "the provider answered 502": "interrupted",
        "the runtime lost its socket": "session fault",
        "make lint": "command failed",
    }

    def marks(b: WebDriver) -> dict[str, str]:
        found = b.execute_script(
            "return [...document.querySelectorAll('#transcript article.is-error')]"
            ".map(a => [a.querySelector('.text, .tool').textContent, a.querySelector('.badge.alarm').textContent])"
        )
        return dict(found)

    def marked_all(b: WebDriver) -> bool:
        found = marks(b)
        return all(
            any(line in text and word in badge for text, badge in found.items())
            for line, word in lines.items()
        )

    _until(browser, marked_all)
    assert len(marks(browser)) == len(lines)  # and nothing else: the good turn is plain
    assert all(badge.startswith("⚠ ") for badge in marks(browser).values())
    browser.save_screenshot(str(screens / "16-errors-in-the-transcript.png"))

    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="usage"]').click()
    _until(browser, lambda b: len(_all(b, "#usage-rows tr.turn-error", "class")) == 2)
    rows = _texts(browser, "#usage-rows tr.turn-error")
    assert any("⚠ rejected" in row and "quota_limit" in row for row in rows)
    assert any("⚠ interrupted" in row and "provider_failure" in row for row in rows)
    assert len(_all(browser, "#usage-rows tr:not(.turn-error)", "class")) == 1
    browser.save_screenshot(str(screens / "17-errors-in-the-turns.png"))

    # A session in error: marked in the list (a border and a word) and in its detail.
    record = msgspec.structs.replace(
        example_session(FAILED), state=SessionState.ERROR, last_error="the sandbox did not start"
    )
    with EventStore.open(db, projection="thread") as store:
        store.ask(SaveSession(record=record))
    _signed_in(browser, server, f"/?reopened=1#session={FAILED}")  # a page of its own
    failed = f'.session[data-session-id="{FAILED}"]'
    _until(browser, lambda b: _all(b, failed, "class") == ["session selected has-error"])
    assert _texts(browser, f"{failed} .badge.alarm") == ["⚠ error"]
    assert not _all(browser, f'.session.has-error:not([data-session-id="{FAILED}"])', "class")
    _until(browser, lambda b: _text(b, "detail-error") == "⚠ the sandbox did not start")


# -- the server goes away and comes back ------------------------------------------------


def test_the_header_says_when_serve_is_down_and_a_restart_keeps_the_sign_in(
    browser: WebDriver, tmp_path: Path, screens: Path
) -> None:
    path = tmp_path / "store.sqlite3"
    replay(path, WORKER_ROOTS[0])
    first = start_server(path)
    port = int(first.url.rsplit(":", 1)[1])
    try:
        _signed_in(browser, first)
        _until(browser, lambda b: _text(b, "health-state") == "healthy")
        _until(browser, lambda b: _text(b, "feed-state") == "live")
    finally:
        assert "Traceback" not in stop_server(first)

    # Down: the header says so (in words, not a colour alone) and keeps asking.
    _until(browser, lambda b: "unreachable" in _text(b, "health-state"))
    assert _shown(browser, "app")
    browser.save_screenshot(str(screens / "18-server-unreachable.png"))

    # Back with the same token: healthy again by itself, still signed in, the feed live.
    again = start_server(path, port=port)
    try:
        assert again.token == first.token
        _until(browser, lambda b: _text(b, "health-state") == "healthy")
        _until(browser, lambda b: _text(b, "feed-state") == "live")
        assert _shown(browser, "app")
        assert not _shown(browser, "signin-view")
        assert _sessions(browser) == [SESSION]
        browser.save_screenshot(str(screens / "19-server-back.png"))
    finally:
        assert "Traceback" not in stop_server(again)

    # Back with a new token: the page says why it asks for the token again.
    Path(f"{path}.api-token").unlink()
    renewed = start_server(path, port=port)
    try:
        assert renewed.token != first.token
        _until(browser, lambda b: _shown(b, "signin-view"))
        assert _shown(browser, "signin-expired")
        assert "another token" in _text(browser, "signin-expired")
        browser.save_screenshot(str(screens / "22-server-new-token.png"))
    finally:
        assert "Traceback" not in stop_server(renewed)


# -- the long-transcript figure (slow) ----------------------------------------------------

_PAGE_TIMED = """
const [button, end] = [arguments[0], arguments[1]];
const done = arguments[arguments.length - 1];
const box = document.getElementById('transcript');
const at = () => (end === 0 ? box.firstElementChild : box.lastElementChild).dataset.stableId;
const seen = at();
const started = performance.now();
const watch = new MutationObserver(() => {
  if (at() !== seen) { watch.disconnect(); done(performance.now() - started); }
});
watch.observe(box, {childList: true});
document.getElementById(button).click();
"""
_OPEN_TIMED = """
const [hash, newest] = [arguments[0], arguments[1]];
const done = arguments[arguments.length - 1];
const box = document.getElementById('transcript');
const started = performance.now();
const watch = new MutationObserver(() => {
  const last = box.lastElementChild;
  if (last && last.dataset.stableId === newest) { watch.disconnect(); done(performance.now() - started); }
});
watch.observe(box, {childList: true});
location.hash = hash;
"""


@pytest.mark.slow
def test_a_20000_item_session_opens_in_under_a_second_and_pages_at_a_flat_rate(
    browser: WebDriver, tmp_path: Path, screens: Path
) -> None:
    """Prints the figure of benchmarks/README.md's viewer line (``-m slow -s``)."""
    path = tmp_path / "long.sqlite3"
    started = time.perf_counter()
    _long_session(path, LONG, 10_000)
    built = time.perf_counter() - started
    running = start_server(path)
    try:
        every = _in_order(running, LONG)
        assert len(every) == 20_000
        _signed_in(browser, running)
        browser.set_script_timeout(60)
        opened = float(browser.execute_async_script(_OPEN_TIMED, f"#session={LONG}", every[-1]))
        _until(browser, _at_end)
        assert _text(browser, "tab-transcript-count").endswith("of 20,000")
        _until(browser, lambda b: _text(b, "tab-usage-count") == "10000")  # all loaded
        back = [
            float(browser.execute_async_script(_PAGE_TIMED, "transcript-older", 0))
            for _ in range(len(every) // 50 - 1)
            if _shown(browser, "transcript-older")
        ]
        assert _items(browser)[0] == every[0]
        kept = len(_items(browser))
        forth = [
            float(browser.execute_async_script(_PAGE_TIMED, "transcript-newer", -1))
            for _ in range(len(every) // 50 - 1)
            if _shown(browser, "transcript-newer")
        ]
        assert _items(browser)[-1] == every[-1]
        heap = browser.execute_script("return performance.memory.usedJSHeapSize") / 2**20
        browser.save_screenshot(str(screens / "25-20000-items.png"))
    finally:
        assert "Traceback" not in stop_server(running)

    def rate(ms: float) -> str:
        return f"{50 / ms * 1000:,.0f}"

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    print(
        f"\nviewer: 20,000-item session (built in {built:.0f} s): opened at its newest in "
        f"{opened:.0f} ms; {len(back)} pages back, items/s first {rate(back[0])}, "
        f"last {rate(back[-1])}, median {rate(median(back))} (first and last 50 pages: "
        f"{rate(median(back[:50]))}, {rate(median(back[-50:]))}); {len(forth)} pages forward, "
        f"first {rate(forth[0])}, last {rate(forth[-1])}, median {rate(median(forth))}; "
        f"{kept} items kept on the page; JS heap {heap:.0f} MiB"
    )
    assert opened < 1000
    assert kept <= 200


def test_a_session_shows_its_sub_agents_under_it_and_each_opens(
    browser: WebDriver, tmp_path: Path, screens: Path
) -> None:
    """Issue 44: the viewer lists a session's sub-agents (``GET .../subagents``, answered
    as the origin's ``mj-controller/src/server/api/subagents.rs``@04067804) under it, and a
    session without any shows no such list."""
    path = tmp_path / "store.sqlite3"
    with EventStore.open(path) as store:
        for session_id in ("parent-1", "child-1", "child-2"):
            store.ask(SaveSession(record=example_session(session_id)))
        for child, task in (("child-1", "audit deps"), ("child-2", "write <docs>")):
            store.ask(
                SaveSubagent(
                    record=SubagentRecord(
                        child_session_id=child,
                        parent_session_id="parent-1",
                        task_name=task,
                        profile_id="helper",
                        initial_prompt="check the lockfile",
                        request_key=f"request-{child}",
                        created_at="2026-09-24T00:00:00Z",
                    )
                )
            )
    running = start_server(path)
    try:
        _signed_in(browser, running, "/#session=parent-1")
        _until(browser, lambda b: _shown(b, "detail-subagents"))
        links = "#subagent-list .subagent"
        _until(browser, lambda b: len(_texts(b, links)) == 2)
        assert _all(browser, links, "data-session-id") == ["child-1", "child-2"]
        tasks = _texts(browser, f"{links} .subagent-task")
        assert tasks == ["audit deps", "write <docs>"]  # text, never markup
        assert _text(browser, "subagent-count") == "2"
        browser.save_screenshot(str(screens / "26-sub-agents.png"))

        _click(browser, '#subagent-list .subagent[data-session-id="child-2"]')
        _until(browser, lambda b: b.execute_script("return location.hash") == "#session=child-2")
        facts = "return document.getElementById('detail-facts').textContent"
        _until(browser, lambda b: "child-2" in b.execute_script(facts))
        _until(browser, lambda b: not _shown(b, "detail-subagents"))
    finally:
        assert "Traceback" not in stop_server(running)
