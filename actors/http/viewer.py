"""``relaystore serve``'s web viewer: the page, sign-in by cookie, and the browser's guards.

* ``GET /`` answers the viewer, a read-only page over the read routes and the feed;
  ``/viewer/viewer.css``, ``/viewer/viewer.js`` and ``/viewer/icon.svg`` its style, script
  and icon. Plain files shipped in the wheel (package data of ``relaystore``), read once
  when the application is made; no build step, nothing from another origin.
* ``POST /session`` with the form field ``token`` exchanges the bearer token for a
  sign-in cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over https) and answers
  303 to ``/``; a wrong token answers 303 to ``/?signin=refused``. ``POST /session/end``
  forgets the sign-in on the server and clears the cookie (303 to ``/``).
* :class:`Access` is the one check of who may read: the bearer header or a sign-in
  cookie, for every route that needs either.
* :class:`OriginGuard` answers 403 to a request whose ``Origin`` is neither this server
  nor one ``serve --cors-origin`` names (those get CORS headers from Starlette's
  ``CORSMiddleware``: ``GET`` with ``Authorization`` and ``Last-Event-ID``, no cookies).

Guarantees: the token never travels in a URL and never reaches script-readable storage
(the page posts it in a form; the cookie holds a signed sign-in, not the token, and
script cannot read it). Sign-in and sign-out are state-changing requests a cookie could
be ridden for, so they are refused (403) unless the browser says they come from this
server's own page: ``Sec-Fetch-Site: same-origin``, or, from a browser that does not send
it, an ``Origin`` that is this server. A sign-in is valid for :data:`SIGN_IN_SECONDS`;
its cookie is signed with a key derived from the token, so a ``serve`` restarted with
the same token keeps every browser signed in, and a new token signs them all out. A
sign-out is remembered in this process's memory (at most :data:`MAX_SIGN_INS`, the oldest
forgotten first): a restart forgets it, so a copy of a signed-out cookie that a client
kept reads again until it expires; a new token ends every sign-in. The form body is read to at most :data:`MAX_FORM_BYTES`; no message names the
token.

Must not: answer anything but the viewer's files and sign-in (the read routes and the feed
are their own modules; the token check and error bodies are the preamble's,
:mod:`relaystore.actors.http.preamble`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Collection
from importlib import resources
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ...domain.errors import InvalidInput
from .preamble import Page, error, once

__all__ = [
    "COOKIE",
    "MAX_FORM_BYTES",
    "MAX_SIGN_INS",
    "SECURITY_HEADERS",
    "SIGN_IN_SECONDS",
    "Access",
    "OriginGuard",
    "sign_in",
    "sign_out",
    "viewer_files",
]

COOKIE = "relaystore_signin"
"""The sign-in cookie's name."""
MAX_SIGN_INS = 256
SIGN_IN_SECONDS = 12 * 3600
MAX_FORM_BYTES = 4096

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
        b"form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]
"""On every response: nothing but this server's own files runs, loads or frames it."""

_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/viewer/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
    "/viewer/viewer.js": ("viewer.js", "text/javascript; charset=utf-8"),
    "/viewer/icon.svg": ("icon.svg", "image/svg+xml"),
}
_FORM = "application/x-www-form-urlencoded"


class _SignIns:
    """Sign-in cookies signed with a key derived from the token, and those signed out.

    A cookie is ``ISSUED.NONCE.MAC``: its issue time (Unix seconds, hex), a random nonce
    and an HMAC-SHA256 over both with a key derived from the bearer token (never the
    token itself). It is valid for :data:`SIGN_IN_SECONDS` from its issue time unless
    signed out, so a server restarted with the same token accepts the cookies the old one
    handed out, and one started with another token accepts none. Sign-outs are kept (by
    the SHA-256 of their cookie, oldest first) until their cookie would expire, at most
    :data:`MAX_SIGN_INS` (the oldest is forgotten first), in this process's memory.
    """

    def __init__(self, token: bytes, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._key = hmac.new(token, b"relaystore viewer sign-in v1", hashlib.sha256).digest()
        self._ended: dict[bytes, float] = {}

    def _mac(self, signed: str) -> str:
        digest = hmac.new(self._key, signed.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def start(self) -> str:
        signed = f"{int(self._clock()):x}.{secrets.token_urlsafe(16)}"
        return f"{signed}.{self._mac(signed)}"

    def _until(self, cookie: str) -> float | None:
        """When a well-signed ``cookie`` expires; None for any other text."""
        signed, _, mac = cookie.rpartition(".")
        issued, _, nonce = signed.partition(".")
        if not (nonce and mac and 0 < len(issued) <= 12):
            return None
        try:
            issued_at = int(issued, 16)
        except ValueError:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac(signed).encode()):
            return None
        return issued_at + SIGN_IN_SECONDS

    def valid(self, cookie: str | None) -> bool:
        if not cookie or len(cookie) > 100:
            return False
        until = self._until(cookie)
        if until is None or until <= self._clock():
            return False
        return _digest(cookie) not in self._ended

    def end(self, cookie: str | None) -> None:
        if not cookie or len(cookie) > 100:
            return
        until = self._until(cookie)
        now = self._clock()
        if until is None or until <= now:
            return
        ended = self._ended
        while ended and (len(ended) >= MAX_SIGN_INS or next(iter(ended.values())) <= now):
            del ended[next(iter(ended))]
        # Kept in sign-out order; expiry order differs, so an expired one may wait its turn.
        ended[_digest(cookie)] = until


def _digest(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode()).digest()


class Access:
    """Who may read: the bearer token, or a sign-in cookie the token was exchanged for.

    The one check every route that needs the token calls (:meth:`authorized`).
    """

    def __init__(self, token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._token = token.encode()
        self._sign_ins = _SignIns(self._token, clock)

    def token_matches(self, presented: str) -> bool:
        """Whether ``presented`` is the bearer token (compared in constant time)."""
        return hmac.compare_digest(presented.strip().encode(), self._token)

    def authorized(self, request: Request) -> bool:
        """A request bearing ``Authorization: Bearer TOKEN`` or a live sign-in cookie."""
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_matches(presented):
            return True
        return self._sign_ins.valid(request.cookies.get(COOKIE))

    def sign_in(self, presented: str) -> str | None:
        """A new sign-in's cookie value for the right token; None for a wrong one."""
        return self._sign_ins.start() if self.token_matches(presented) else None

    def sign_out(self, request: Request) -> None:
        """Forget the sign-in the request's cookie names (if any)."""
        self._sign_ins.end(request.cookies.get(COOKIE))


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


def _from_here(scope: Scope) -> bool:
    """Whether the browser says the request comes from this server's own pages.

    ``Sec-Fetch-Site`` (which no script can set) decides where the browser sends it;
    without it, ``Origin`` must be this server's ``scheme://Host``. (A form posted from a
    page under ``Referrer-Policy: no-referrer`` carries ``Origin: null``.)
    """
    site = _header(scope, b"sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    host = _header(scope, b"host")
    own = f"{scope.get('scheme', 'http')}://{host}"
    return host is not None and _header(scope, b"origin") == own


class OriginGuard:
    """Refuses (403) a request from another origin unless it is one of ``allowed``."""

    def __init__(self, app: ASGIApp, allowed: Collection[str]) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is not None and origin not in self.allowed and not _from_here(scope):
            refusal = error(
                403,
                f"requests from origin {origin[:100]!r} are refused; "
                "relaystore serve --cors-origin ORIGIN allows one",
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _from_own_page(request: Request) -> Response | None:
    """None for a request the browser says comes from this server's own page; else 403."""
    if _from_here(request.scope):
        return None
    return error(
        403,
        "sign-in and sign-out are accepted only from this server's own page "
        f"(Origin {request.url.scheme}://{request.headers.get('host', 'this server')})",
    )


async def _form_token(request: Request) -> str:
    """The ``token`` field of a small url-encoded form; InvalidInput otherwise."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != _FORM:
        raise InvalidInput(f"sign in with a form ({_FORM}) holding the field token")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise InvalidInput(f"the sign-in form is larger than {MAX_FORM_BYTES} bytes")
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    except ValueError:
        raise InvalidInput("the sign-in form has more than 8 fields") from None
    return once("token", fields.get("token", [])) or ""


def viewer_files() -> dict[str, Page]:
    """``GET /`` and the viewer's files, by path (read once, here)."""
    folder = resources.files("relaystore").joinpath("viewer")

    def static(name: str, media_type: str) -> Page:
        content = folder.joinpath(name).read_bytes()

        async def answer(request: Request) -> Response:
            return Response(content, media_type=media_type)

        return answer

    return {path: static(name, media_type) for path, (name, media_type) in _FILES.items()}


def sign_in(access: Access) -> Page:
    """``POST /session``: the form's token for a sign-in cookie (303 to ``/``)."""

    async def answer(request: Request) -> Response:
        refusal = _from_own_page(request)
        if refusal is not None:
            return refusal
        cookie = access.sign_in(await _form_token(request))
        if cookie is None:
            return RedirectResponse("/?signin=refused", status_code=303)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=SIGN_IN_SECONDS,
            path="/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    return answer


def sign_out(access: Access) -> Page:
    """``POST /session/end``: forget the sign-in, clear the cookie (303 to ``/``)."""

    async def answer(request: Request) -> Response:
        refusal = _from_own_page(request)
        if refusal is not None:
            return refusal
        access.sign_out(request)
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(
            COOKIE,
            path="/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    return answer
