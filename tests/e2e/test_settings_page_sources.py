"""The installed bridge's settings page in headless Chromium: a first-time user tests a source of
each protocol before saving it, and the run through the saved registry gives citations."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.processes import Service, start_bridge, stop_checked

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 20_000
FORMS = [("llmwiki-http", ""), ("mcp", "/mcp/stream"), ("a2a", "")]


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[Service]:
    service = start_bridge(tmp_path)
    yield service
    stop_checked(service)


@pytest.fixture
async def page(bridge: Service, our_serve: Service) -> AsyncIterator[Any]:
    """A Chromium page that may reach loopback only; it fails the test on any console error.

    It takes the services so that it is torn down first: the page may still be fetching (the
    overview refreshes after a save) when the test ends, and a service stopped under it would
    show as a console error that is the test's doing, not the page's."""
    if not CHROMIUM.exists():  # CI installs it (./scripts/bootstrap test): not a silent skip there
        pytest.fail("Debian's chromium is not installed: run ./scripts/bootstrap test")
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=WAIT_MS)
    errors: list[str] = []
    blocked: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = await browser.new_context(service_workers="block")
        context.set_default_timeout(WAIT_MS)

        async def guard(route: Any) -> None:
            host = urlsplit(route.request.url).hostname or ""
            if host in ("127.0.0.1", "localhost", "::1"):
                await route.continue_()
            else:
                blocked.append(route.request.url)
                await route.abort()

        await context.route("**/*", guard)
        new_page = await context.new_page()
        new_page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        new_page.on("pageerror", lambda e: errors.append(str(e)))
        yield new_page
        await browser.close()
    assert not blocked, blocked
    assert not errors, errors


async def test_a_source_of_each_protocol_is_tested_before_it_is_saved(page: Any, bridge: Service,
                                                                     our_serve: Service) -> None:
    from playwright.async_api import expect

    config = Path(bridge.extra["config"])
    await page.goto(f"{bridge.url}/settings")
    await expect(page.locator("#unlocked")).to_be_visible()
    before = config.read_bytes() if config.exists() else None
    for number, (protocol, suffix) in enumerate(FORMS, start=1):
        if number > 1:
            await page.get_by_role("button", name="Add source").click()
        row = page.locator("#source-rows > li").nth(number - 1)
        await row.get_by_label("ID", exact=True).fill(f"wiki-{protocol}")
        await row.get_by_label("Protocol", exact=True).select_option(protocol)
        await row.get_by_label("URL", exact=True).fill(our_serve.url + suffix)
        await row.get_by_role("button", name=f"Test source {number}").click()
        probe = row.locator("[data-probe]")
        await expect(probe).to_contain_text("Reachable")
        assert "Not reachable" not in (await probe.text_content() or "")
    assert (config.read_bytes() if config.exists() else None) == before  # testing saves nothing
    await page.get_by_role("button", name="Save sources").click()
    await expect(page.locator("#status")).to_have_text("Saved 3 Knowledge Sources.")
    saved = json.loads(config.read_text())
    assert [(s["id"], s["protocol"]) for s in saved["sources"]] == [
        (f"wiki-{p}", p) for p, _ in FORMS]
