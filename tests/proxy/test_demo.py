"""The demo chat app's routes (fast tier, in-process): the page and its assets, nothing else, no API key, no
external URL. The page in a browser: tests/proxy/test_demo_e2e.py."""

from __future__ import annotations

import re
import typing
from importlib.resources import files
from pathlib import Path

import httpx

from keproxy.editors.history.registry import EditorRegistry
from keproxy.proxy.demo import ASSETS
from keproxy.proxy.protocol import KeproxyOptions
from keproxy.settings import load_settings
from tests.conftest import client_for


def _static(name: str) -> str:
    return files("keproxy.proxy").joinpath("static", name).read_text(encoding="utf-8")


def _options(html: str, select_id: str) -> list[str]:
    block = re.search(rf'<select id="{select_id}">(.*?)</select>', html, re.S)
    assert block is not None, select_id
    return re.findall(r'<option value="([^"]+)"', block.group(1))


async def test_page_and_assets_are_served(mock_client: httpx.AsyncClient) -> None:
    resp = await mock_client.get("/demo")
    assert resp.status_code == 307 and resp.headers["location"] == "demo/"
    page = await mock_client.get("/demo/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert '<script type="module" src="demo.js"></script>' in page.text
    for name, media_type in ASSETS.items():
        resp = await mock_client.get(f"/demo/{name}")
        assert resp.status_code == 200, name
        assert resp.headers["content-type"] == media_type
        assert resp.text == _static(name)


async def test_unknown_asset_is_an_openai_404(mock_client: httpx.AsyncClient) -> None:
    for path in ("/demo/demo.py", "/demo/..%2Fdemo.py", "/demo/static"):
        resp = await mock_client.get(path)
        assert resp.status_code == 404, path
        assert resp.json()["error"]["type"] == "invalid_request_error"


async def test_page_needs_no_api_key_but_the_api_does(tmp_path: Path) -> None:
    settings = load_settings(mock_response="ok", data_dir=tmp_path, api_keys=["sk-kp-demo"])
    async for client in client_for(settings):
        assert (await client.get("/demo/")).status_code == 200
        assert (await client.get("/demo/demo.js")).status_code == 200
        assert (await client.get("/v1/models")).status_code == 401


def test_static_files_fetch_nothing_from_elsewhere() -> None:
    for name in ASSETS:
        text = _static(name)
        assert not re.search(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}", text), f"{name} names an external URL"
        assert "@import" not in text and "url(" not in text, name


def test_pickers_offer_the_strategies_and_edit_modes_that_exist() -> None:
    html = _static("demo.html")
    assert set(_options(html, "strategy")) <= set(EditorRegistry().names())
    assert _options(html, "strategy") == [
        "otc",
        "patch",
        "reiterate-oracle",
        "verification",
        "reiterate",
        "deletion",
    ]
    edit_mode = KeproxyOptions.model_fields["edit_mode"].annotation
    modes = typing.get_args(typing.get_args(edit_mode)[0])  # Literal[...] | None
    assert _options(html, "edit-mode") == list(modes)
