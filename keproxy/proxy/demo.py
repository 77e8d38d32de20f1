"""The demo chat app: one static page at ``GET /demo/`` that chats through this proxy.

    GET /demo            -> 307 to /demo/ (so the page's relative URLs resolve under /demo/)
    GET /demo/           -> demo.html
    GET /demo/{asset}    -> demo.js, diff.js, demo.css (404 for anything else)

The files live in ``keproxy/proxy/static/`` (package data): plain HTML, CSS and JavaScript, no build step and
nothing fetched from elsewhere (the page's Content-Security-Policy allows this origin only). The page itself
holds no secret and needs no API key; the calls it makes (``/v1/models``, ``/v1/chat/completions``,
``/keproxy/transcripts/{id}``, ``/v1/edits``) send the key typed into the page as ``Authorization: Bearer``.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from keproxy.errors import NotFoundError

__all__ = ["demo_router"]

demo_router = APIRouter(prefix="/demo", tags=["demo"], include_in_schema=False)

#: asset name -> media type; nothing else under static/ is served.
ASSETS: dict[str, str] = {
    "demo.html": "text/html; charset=utf-8",
    "demo.js": "text/javascript; charset=utf-8",
    "diff.js": "text/javascript; charset=utf-8",
    "demo.css": "text/css; charset=utf-8",
}

_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
}


def _asset(name: str) -> Response:
    """``static/<name>`` as a response; raises NotFoundError (404) for a name not in ``ASSETS``."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFoundError(f"no demo asset {name!r}", param="asset")
    body = files("keproxy.proxy").joinpath("static", name).read_bytes()
    return Response(body, media_type=media_type, headers=_HEADERS)


@demo_router.get("")
async def demo_root() -> RedirectResponse:
    """Redirect to ``/demo/`` (relative Location, so it works behind a path prefix)."""
    return RedirectResponse("demo/", status_code=307)


# plain ``def``: the small file reads run in the threadpool, off the event loop
@demo_router.get("/")
def demo_page() -> Response:
    """The demo page."""
    return _asset("demo.html")


@demo_router.get("/{asset}")
def demo_asset(asset: str) -> Response:
    """The page's script and style sheet; 404 (OpenAI error body) for any other name."""
    return _asset(asset)
