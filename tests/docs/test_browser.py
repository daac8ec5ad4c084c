"""The built site in a real headless Chromium (the system's package; ci/test.sh's full lane installs it), driven
through its DevTools protocol: the home page renders, the navigation reaches a how-to page, and Material's search
(client-side: a web worker indexing search/search_index.json) finds that page when a query is typed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import aiohttp
import pytest

from tests.docs.test_site import site  # noqa: F401 - the strictly built site, a module fixture

pytestmark = pytest.mark.slow
CHROMIUM = next(
    (
        shutil.which(name)
        for name in ("chromium", "chromium-browser", "google-chrome")
        if shutil.which(name)
    ),
    None,
)


@pytest.fixture(scope="module")
def served(site):  # noqa: F811
    """The site over HTTP (the search worker fetches its index; file:// forbids that)."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def devtools():
    """A headless Chromium with a DevTools endpoint; yields its browser websocket URL."""
    if CHROMIUM is None:
        pytest.skip(
            "no chromium binary on PATH: apt-get install -y chromium (ci/test.sh's full lane does)"
        )
    profile = tempfile.mkdtemp(prefix="tritonbuild-chromium-")
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read_stderr():
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read_stderr, daemon=True).start()
    try:
        deadline, endpoint = time.monotonic() + 60, None
        while endpoint is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail("chromium printed no DevTools endpoint in 60 s")
            if line is None:
                pytest.fail(
                    f"chromium exited ({process.wait()}) before its DevTools endpoint came up"
                )
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            endpoint = found.group(1) if found else None
        yield endpoint
    finally:
        with contextlib.suppress(ProcessLookupError):  # the browser and its renderer processes
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """One page target over the DevTools protocol: navigate, evaluate JavaScript, type."""

    def __init__(self, socket):
        self.socket, self.next_id = socket, 0

    async def call(self, method: str, **params) -> dict:
        self.next_id += 1
        await self.socket.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = json.loads((await self.socket.receive()).data)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message.get("result", {})

    async def evaluate(self, expression: str):
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        return result["result"].get("value")

    async def type_text(self, text: str) -> None:
        """Key by key, as a person types (Material's search reads the query on key events)."""
        for char in text:
            await self.call("Input.dispatchKeyEvent", type="keyDown", key=char, text=char)
            await self.call("Input.dispatchKeyEvent", type="keyUp", key=char)

    async def wait_for(self, expression: str, seconds: float = 60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.2)
        raise AssertionError(f"never true in {seconds} s: {expression}")


async def open_page(browser_url: str, session) -> tuple[Page, object]:
    browser = await session.ws_connect(browser_url, max_msg_size=0)
    await browser.send_json(
        {"id": 1, "method": "Target.createTarget", "params": {"url": "about:blank"}}
    )
    target = json.loads((await browser.receive()).data)["result"]["targetId"]
    host = re.match(r"ws://([^/]+)/", browser_url).group(1)
    socket = await session.ws_connect(f"ws://{host}/devtools/page/{target}", max_msg_size=0)
    return Page(socket), browser


def run_in_browser(browser_url: str, scenario):
    async def main():
        async with aiohttp.ClientSession() as session:
            page, browser = await open_page(browser_url, session)
            try:
                await page.call("Page.enable")
                await page.call("Runtime.enable")
                return await scenario(page)
            finally:
                await page.socket.close()
                await browser.close()

    return asyncio.run(main())


def test_home_page_renders_and_navigation_reaches_a_how_to(devtools, served):
    async def scenario(page: Page):
        await page.call("Page.navigate", url=f"{served}/index.html")
        title = await page.wait_for(
            "document.readyState === 'complete' && document.querySelector('h1')?.innerText"
        )
        sections = await page.evaluate(
            "[...document.querySelectorAll('.md-nav__item--section > label, .md-nav__item--section > a')]"
            ".map(e => e.innerText.trim())"
        )
        visible = await page.evaluate(
            "document.querySelector('.md-content').getBoundingClientRect().height"
        )
        await page.evaluate(
            "document.querySelector('nav.md-nav a[href$=\"howto/rollback.html\"]').click()"
        )
        landed = await page.wait_for(
            "location.pathname.endsWith('/howto/rollback.html') && "
            "document.querySelector('h1')?.innerText"
        )
        return title, sections, visible, landed

    title, sections, visible, landed = run_in_browser(devtools, scenario)
    assert title.strip().startswith("tritonbuild")
    assert {"How-to", "Reference", "Explanation"} <= {s.split("\n")[0] for s in sections}, sections
    assert visible > 200, "the home page's content has no height: it did not render"
    assert landed.strip().startswith("Roll back")


def test_search_finds_a_how_to_page(devtools, served):
    async def scenario(page: Page):
        await page.call("Page.navigate", url=f"{served}/index.html")
        await page.wait_for("document.readyState === 'complete'")
        # the worker has indexed the site when the result meta stops saying "Initializing search"
        await page.evaluate(
            "document.querySelector('label.md-search__icon, [for=__search]')?.click(); "
            "document.querySelector('[data-md-component=search-query]').focus()"
        )
        await page.wait_for(
            "!document.querySelector('.md-search-result__meta').innerText.includes('Initializing')"
        )
        await page.type_text("rollback")
        return await page.wait_for(
            "(() => { const links = [...document.querySelectorAll('.md-search-result__item a')].map(a => a.href);"
            " return links.some(h => h.includes('howto/rollback.html')) && links; })()"
        )

    links = run_in_browser(devtools, scenario)
    assert any("howto/rollback.html" in link for link in links), links
