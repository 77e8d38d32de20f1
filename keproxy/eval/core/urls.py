"""The proxy URL an eval is pointed at: the root (``http://host:8000``) or the OpenAI base URL (``…/v1``).

Users copy the base URL they give their OpenAI client (``http://127.0.0.1:8000/v1``); keproxy's own routes
(``/keproxy/transcripts/…``, ``/health``) live at the root. :func:`proxy_root` accepts both forms.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

__all__ = ["ProxyRoot", "base_url_option", "proxy_root"]


def proxy_root(url: str) -> str:
    """``url`` without trailing slashes and without a final ``/v1`` path segment.

    "http://h:8000/v1/" -> "http://h:8000"; "http://h:8000" -> "http://h:8000";
    "https://h/gw/v1" -> "https://h/gw". Raises ValueError for a URL that is not http(s).
    """
    root = url.strip().rstrip("/")
    if not root.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r} (e.g. http://127.0.0.1:8000/v1)")
    if root.lower().endswith("/v1"):
        root = root[: -len("/v1")]
    return root


#: A pydantic field type: the proxy root, normalised by :func:`proxy_root`.
ProxyRoot = Annotated[str, AfterValidator(proxy_root)]


def base_url_option(value: str | None) -> str | None:
    """A typer callback for ``--base-url``: :func:`proxy_root` of the value; a bad URL is a usage error
    (exit code 2, the option named)."""
    if value is None:
        return None
    import typer

    try:
        return proxy_root(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
