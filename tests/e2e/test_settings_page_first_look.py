"""The installed bridge's settings page as a newcomer first sees it, in headless Chromium: a loading
line before its script runs, "evidence-only: no model needed" when that is the mode in use, no
message over a field, and a layout checked by its structure (the accessibility tree), not pixels."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.processes import Service, start_bridge, stop_checked
from tests.e2e.test_settings_page_sources import CHROMIUM, CHROMIUM_ARGS, WAIT_MS

# The overview's structure as a screen reader (and a person scanning it) meets it: the same
# headings, metrics and wording whatever the fonts and pixels of the machine.
OVERVIEW = """
- heading "Bridge overview" [level=2]
- paragraph: /it answers evidence-only, so no model is needed/
- term: Runtime
- definition: /model hermes-agent/
- definition: /^evidence-only. no model needed/
- term: Knowledge Sources
- definition: 1 registered, 1 selected
- definition: /Not tested yet/
- term: Bridge access
- definition: /No bearer token/
- term: Source policy
- definition: /private-http/
"""


@pytest.fixture
def demo_bridge(tmp_path: Path, our_serve: Service) -> Iterator[Service]:
    """A bridge set up as the demo sets it up: evidence-only, one source, no model anywhere."""
    settings = {"version": 1, "config": {"defaultOrchestrationMode": "evidence-only"},
                "sources": [{"id": "sample-wiki", "name": "Sample wiki", "protocol": "llmwiki-http",
                             "status": "ready", "selected": True, "url": our_serve.url}]}
    service = start_bridge(tmp_path, settings=settings)
    yield service
    stop_checked(service)


@pytest.fixture
async def browser(demo_bridge: Service) -> AsyncIterator[Any]:
    if not CHROMIUM.exists():  # CI installs it (./scripts/bootstrap test): not a silent skip there
        pytest.fail("Debian's chromium is not installed: run ./scripts/bootstrap test")
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=WAIT_MS)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


async def _page(browser: Any, javascript: bool = True) -> tuple[Any, list[str]]:
    context = await browser.new_context(service_workers="block", java_script_enabled=javascript,
                                        viewport={"width": 1000, "height": 700})
    context.set_default_timeout(WAIT_MS)
    errors: list[str] = []

    async def loopback_only(route: Any) -> None:
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost", "::1"):
            await route.continue_()
        else:
            errors.append(f"blocked {route.request.url}")
            await route.abort()

    await context.route("**/*", loopback_only)
    page = await context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


async def test_before_its_script_runs_the_page_says_it_is_loading(browser: Any, demo_bridge: Service) -> None:
    from playwright.async_api import expect

    page, errors = await _page(browser, javascript=False)
    await page.goto(f"{demo_bridge.url}/settings")
    await expect(page.locator("#loading")).to_be_visible()
    await expect(page.locator("#loading")).to_have_text("Loading the bridge settings…")
    await expect(page.get_by_role("heading", name="LLMWiki Agent Bridge Settings")).to_be_visible()
    assert not errors, errors


async def test_the_demo_setup_says_no_model_is_needed(browser: Any, demo_bridge: Service,
                                                      tmp_path: Path) -> None:
    from playwright.async_api import expect

    page, errors = await _page(browser)
    await page.goto(f"{demo_bridge.url}/settings")
    await expect(page.locator("#unlocked")).to_be_visible()
    await expect(page.locator("#loading")).to_be_hidden()
    status = page.locator("#metric-runtime-status")
    await expect(status).to_contain_text("evidence-only: no model needed")
    await expect(status).to_have_class("metric-status status-ok")
    await expect(page.locator("#overview-hero")).to_have_class("hero hero-ready")
    await expect(page.locator("#overview-hero")).not_to_contain_text("not usable")
    await expect(page.locator("#overview-section")).to_match_aria_snapshot(OVERVIEW)
    # For a person looking at the run: the rendered page, kept beside the test's logs.
    await page.screenshot(path=str(tmp_path / "settings-first-look.png"), full_page=True)
    assert not errors, errors


async def test_no_message_covers_a_field(browser: Any, demo_bridge: Service) -> None:
    """After an action's message, every field stays where a click lands on it, however the page
    is scrolled (a sticky message once covered the source list)."""
    from playwright.async_api import expect

    page, errors = await _page(browser)
    await page.goto(f"{demo_bridge.url}/settings")
    await expect(page.locator("#unlocked")).to_be_visible()
    await page.get_by_role("button", name="Add source").click()
    await expect(page.locator("#status")).to_have_text("Added source 2. Fill it in, then save.")
    fields = page.locator("#sources-section input, #sources-section select")
    covered = []
    for index in range(await fields.count()):
        field = fields.nth(index)
        if not await field.is_visible():
            continue
        # Each field at the very top of the window, where a sticky message would sit.
        covered += await field.evaluate("""(element) => {
            window.scrollTo(0, window.scrollY + element.getBoundingClientRect().top - 2);
            const box = element.getBoundingClientRect();
            const hit = document.elementFromPoint(box.left + box.width / 2,
                                                  box.top + Math.min(box.height / 2, 8));
            const shown = (node) => (node ? node.outerHTML.slice(0, 80) : 'nothing');
            return hit === element || element.contains(hit) || (hit && hit.htmlFor === element.id)
                ? [] : [`${shown(element)} is under ${shown(hit)}`];
        }""")
    assert not covered, covered
    assert not errors, errors
