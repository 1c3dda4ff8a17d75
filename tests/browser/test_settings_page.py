"""The bridge's /settings page: served safely over plain HTTP, and driven in headless Chromium against
the real bridge and two real serve instances."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from bridge.web.settings_page import settings_page
from tests.support.fake_openai import running_fake_openai

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "bridge" / "static"
ARTIFACTS = REPO / "test-artifacts"
# Hosts the page may name: loopback (serve's default URL as a placeholder) and a documentation example.
NAMED_HOSTS = {"127.0.0.1", "localhost", "app.example.org"}
BridgeStarter = Callable[..., Awaitable[str]]
API_KEY = "sk-page-test-key-7f3a"
TOKEN = "bridge-page-token-51c2"


def _csp_directives(header: str) -> dict[str, list[str]]:
    directives: dict[str, list[str]] = {}
    for item in header.split(";"):
        name, *values = item.split()
        directives[name] = values
    return directives


def _hash_source(text: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"


# ---------------------------------------------------------------------------- plain HTTP


async def test_settings_html_is_served_without_auth_with_a_strict_csp(start_bridge: BridgeStarter) -> None:
    bridge = await start_bridge(bearer_token=TOKEN, api_key=API_KEY)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{bridge}/settings") as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "text/html; charset=utf-8"
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            csp = response.headers["Content-Security-Policy"]
            html = await response.text()
        async with session.get(f"{bridge}/settings.json") as response:
            assert response.status == 401  # the endpoints the page calls still need the token

    directives = _csp_directives(csp)
    assert directives["default-src"] == ["'none'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp and "*" not in csp
    # Exactly the inlined script and stylesheet are allowed, by hash.
    scripts = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
    assert len(scripts) == 1 and len(styles) == 1
    assert directives["script-src"] == [_hash_source(scripts[0])]
    assert directives["style-src"] == [_hash_source(styles[0])]
    assert "<title>LLMWiki Agent Bridge Settings</title>" in html
    assert API_KEY not in html and TOKEN not in html


def test_page_references_no_external_url() -> None:
    page = settings_page().html.decode("utf-8")
    texts = {name: (STATIC / name).read_text(encoding="utf-8")
             for name in ("settings.html", "settings.css", "settings.js")}
    texts["served page"] = page
    for name, text in texts.items():
        for url in re.findall(r"(?:https?:|wss?:)?//[^\s'\"`)<>]+", text):
            host = urlsplit(url if ":" in url.split("//")[0] else f"http:{url}").hostname
            assert host in NAMED_HOSTS, f"{name} names {url}"
        assert "@import" not in text and "url(" not in text
    # Nothing is loaded from anywhere: no external scripts, stylesheets, images, fonts or frames
    # (the favicon is an empty inline one, so the browser does not ask for /favicon.ico either).
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b[^>]*\b(src|href)=\"(?!data:,\")", page)
    assert re.findall(r"\bhref=\"([^\"]*)\"", page) == [
        "data:,", "#runtime-section", "#runtime-section", "#sources-section", "#verify-section",
        "#advanced-section"]
    script = texts["settings.js"]
    # The token lives in page memory only.
    for storage in ("localStorage", "sessionStorage", "document.cookie", "indexedDB"):
        assert storage not in script
    assert "innerHTML" not in script and "eval(" not in script


def test_page_ships_as_package_data() -> None:
    setup = (REPO / "setup.cfg").read_text(encoding="utf-8")
    assert re.search(r"^\[options\.package_data\]\nbridge\.static = .*\*\.js", setup, re.MULTILINE)


# ---------------------------------------------------------------------------- in the browser


def _expect() -> Any:
    from playwright.async_api import expect

    return expect


async def _open(page: Any, bridge: str) -> None:
    await page.goto(f"{bridge}/settings")
    await _expect()(page.locator("#unlocked")).to_be_visible()


async def _storage(page: Any) -> list[Any]:
    cookies = await page.context.cookies()
    return [await page.evaluate("() => [localStorage.length, sessionStorage.length, document.cookie]"),
            cookies]


async def test_guided_setup_end_to_end(page: Any, start_bridge: BridgeStarter, serve_urls: tuple[str, str],
                                       config_path: Path) -> None:
    expect = _expect()
    sample_url, vault_url = serve_urls
    bridge = await start_bridge()
    await _open(page, bridge)
    await expect(page.locator("#metric-sources")).to_have_text("0 registered, 0 selected")
    await expect(page.locator("#overview-hero")).to_contain_text("register and select")

    # Step 1: the runtime. Switching profile swaps in that profile's default model.
    await page.get_by_label("Runtime profile").select_option("generic")
    await expect(page.get_by_label("Model", exact=True)).to_have_value("local-model")
    await page.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")
    await page.get_by_label("Model", exact=True).fill("tiny-model")
    await page.get_by_label("API key", exact=True).fill(API_KEY)
    await page.get_by_role("button", name="Save runtime").click()
    await expect(page.locator("#status")).to_contain_text("Runtime saved")
    await expect(page.get_by_label("API key", exact=True)).to_have_value("")
    await expect(page.locator("#runtime-api-key-help")).to_contain_text("An API key is saved")
    await expect(page.locator("#metric-runtime")).to_have_text(
        "Generic OpenAI-compatible: model tiny-model, API key saved")
    # Nothing listens on port 9: the overview says so instead of "ready".
    await expect(page.locator("#metric-runtime-status")).to_have_text("Unreachable: request failed.")

    # Step 2: two sources; a repeated id is flagged while typing, and the bridge refuses it (409).
    rows = page.locator("#source-rows > li")
    await expect(rows).to_have_count(1)
    first, second = rows.nth(0), rows.nth(1)
    await expect(first.get_by_label("ID", exact=True)).to_have_value("local-wiki")
    await first.get_by_label("ID", exact=True).fill("sample")
    await first.get_by_label("Name").fill("Sample wiki")
    await first.get_by_label("URL", exact=True).fill(sample_url)
    await page.get_by_role("button", name="Add source").click()
    await expect(rows).to_have_count(2)
    await expect(second.get_by_label("ID", exact=True)).to_be_focused()
    await page.keyboard.type("sample")
    await expect(second.get_by_label("ID", exact=True)).to_have_attribute("aria-invalid", "true")
    await expect(second.locator("[data-error=id]")).to_have_text(
        'Source ids must be unique: source 1 also uses "sample".')
    await expect(page.locator("#sources-problems")).to_have_text(
        'Duplicate source id "sample" (sources 1 and 2).')
    await second.get_by_label("Name").fill("Vault")
    await second.get_by_label("URL", exact=True).fill(vault_url)
    await page.get_by_role("button", name="Save sources").click()
    await expect(page.locator("#alert")).to_have_text(
        'The sources were not saved: Duplicate Knowledge Source id "sample" at positions 1 and 2; '
        "source ids must be unique. (duplicate_source_id)")
    assert json.loads(config_path.read_text(encoding="utf-8")).get("sources", []) == []
    await second.get_by_label("ID", exact=True).fill("vault")
    await expect(page.locator("#sources-problems")).to_have_text("")
    await expect(second.get_by_label("ID", exact=True)).not_to_have_attribute("aria-invalid", "true")
    await page.get_by_role("button", name="Save sources").click()
    await expect(page.locator("#status")).to_have_text("Saved 2 Knowledge Sources.")
    await expect(page.locator("#alert")).to_have_text("")
    await expect(page.locator("#metric-sources")).to_have_text("2 registered, 2 selected")
    await expect(page.locator("#overview-hero")).to_contain_text(
        "The runtime is not usable (Unreachable: request failed.)")

    # Testing a source probes it live through POST /sources/probe; the overview keeps the result.
    await first.get_by_role("button", name="Test source 1").click()
    await expect(first.locator("[data-probe]")).to_contain_text("Reachable: read source-bundle")
    await expect(page.locator("#metric-sources-status")).to_have_text(
        "Last test: 1 reachable, 0 not reachable, 1 not tested.")

    # Step 3: the whole path, evidence-only (no model needed): a cited answer.
    await page.get_by_label("Answer mode").select_option("evidence-only")
    await page.get_by_label("Question").fill("What is on the release checklist?")
    await page.get_by_role("button", name="Run setup check").click()
    await expect(page.locator("#verify-answer")).to_contain_text("Evidence-only result:")
    await expect(page.locator("#verify-summary")).to_contain_text("Completed (evidence-only)")
    citations = page.locator("#verify-citations > li")
    await expect(citations.first).to_contain_text("sample:")
    assert await citations.count() >= 1
    await expect(page.locator("#status")).to_contain_text("Setup check finished")

    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "settings.png"), full_page=True)

    # Reload: everything comes back from the bridge, except the API key, which is never sent back.
    await page.reload()
    await expect(page.locator("#unlocked")).to_be_visible()
    await expect(page.get_by_label("Runtime profile")).to_have_value("generic")
    await expect(page.get_by_label("Base URL")).to_have_value("http://127.0.0.1:9/v1")
    await expect(page.get_by_label("Model", exact=True)).to_have_value("tiny-model")
    await expect(page.get_by_label("API key", exact=True)).to_have_value("")
    await expect(page.locator("#runtime-api-key-help")).to_contain_text("An API key is saved")
    await expect(rows).to_have_count(2)
    await expect(first.get_by_label("ID", exact=True)).to_have_value("sample")
    await expect(second.get_by_label("ID", exact=True)).to_have_value("vault")
    await expect(second.get_by_label("URL", exact=True)).to_have_value(vault_url)
    assert API_KEY not in await page.content()
    assert await _storage(page) == [[0, 0, ""], []]
    stored = json.loads(config_path.read_text(encoding="utf-8"))
    assert stored["config"]["apiKey"] == API_KEY and stored["config"]["model"] == "tiny-model"
    assert [s["id"] for s in stored["sources"]] == ["sample", "vault"]


async def test_advanced_settings_show_restart_notice(page: Any, start_bridge: BridgeStarter,
                                                     config_path: Path) -> None:
    expect = _expect()
    bridge = await start_bridge()
    running_port = urlsplit(bridge).port
    await _open(page, bridge)
    await expect(page.get_by_label("Port")).to_have_value(str(running_port))
    await page.get_by_label("Port").fill(str(running_port + 1 if running_port < 65535 else 1))
    await page.get_by_label("Request timeout (ms)").fill("4000")
    await page.get_by_label("Fan-out concurrency").fill("2")
    await page.get_by_label("Source policy").select_option("allowlist")
    await page.get_by_label("Allowed source origins").fill("http://127.0.0.1:8765")
    await page.get_by_label("Allowed browser origins (CORS)").fill("https://app.example.org")
    await page.get_by_role("button", name="Save advanced settings").click()
    await expect(page.locator("#restart-notice")).to_have_text(
        "Restart required: the new port takes effect after the bridge restarts.")
    await expect(page.locator("#metric-policy")).to_have_text("allowlist; 1 allowed origin")
    stored = json.loads(config_path.read_text(encoding="utf-8"))["config"]
    assert stored["requestTimeoutMs"] == 4000 and stored["fanoutConcurrency"] == 2
    assert stored["allowedOrigins"] == ["https://app.example.org"]
    assert "host" not in stored  # unchanged fields are not sent

    # A bad value comes back as the bridge's message, in the alert region.
    await page.get_by_label("Fan-out concurrency").fill("99")
    await page.get_by_role("button", name="Save advanced settings").click()
    await expect(page.locator("#alert")).to_have_text(
        "The advanced settings were not saved: fanoutConcurrency must be between 1 and 64. "
        "(invalid_bridge_settings)")
    await expect(page.get_by_role("alert").first).to_be_visible()


async def test_logs_are_turned_on_from_the_page(page: Any, start_bridge: BridgeStarter,
                                                config_path: Path) -> None:
    expect = _expect()
    bridge = await start_bridge()
    await _open(page, bridge)
    await expect(page.get_by_label("I/O debug log")).to_have_value("off")
    help_text = page.locator("#advanced-io-log-path-help")
    await expect(help_text).to_contain_text("Default: .runtime-logs")
    await expect(help_text).to_contain_text("--io-log-path")  # the file is chosen where it starts
    await page.get_by_label("Write the request audit log").check()
    await page.get_by_label("I/O debug log").select_option("file")
    await page.get_by_role("button", name="Save advanced settings").click()
    await expect(page.locator("#status")).to_contain_text("Advanced settings saved")
    stored = json.loads(config_path.read_text(encoding="utf-8"))["config"]
    assert (stored["auditLog"], stored["ioLog"], stored["ioLogMode"]) == (True, True, "file")
    assert "ioLogPath" not in stored
    assert "host" not in stored and "sourcePolicy" not in stored  # only what changed was sent


async def test_bearer_token_is_asked_for_and_kept_in_memory(page: Any, start_bridge: BridgeStarter) -> None:
    expect = _expect()
    bridge = await start_bridge(bearer_token=TOKEN)
    await page.goto(f"{bridge}/settings")
    await expect(page.locator("#token-section")).to_be_visible()
    await expect(page.locator("#token-title")).to_have_text("Settings overview is locked")
    await expect(page.locator("#unlocked")).to_be_hidden()
    token_input = page.locator("#token-input")
    await expect(token_input).to_be_focused()

    await token_input.fill("not-the-token")
    await token_input.press("Enter")
    await expect(page.locator("#alert")).to_have_text(
        "That bearer token was not accepted. Check it and try again.")
    await expect(page.locator("#token-error")).to_have_text("That token was not accepted.")
    await expect(token_input).to_have_attribute("aria-invalid", "true")
    await expect(page.locator("#unlocked")).to_be_hidden()

    await token_input.fill(TOKEN)
    await token_input.press("Enter")
    await expect(page.locator("#unlocked")).to_be_visible()
    await expect(page.locator("#alert")).to_have_text("")
    await expect(page.locator("#metric-access")).to_contain_text("Bearer token required")
    await expect(token_input).to_have_value("")

    # Writes carry the token too; a new token takes over for the page's next requests.
    await page.get_by_label("Model", exact=True).fill("guarded-model")
    await page.get_by_role("button", name="Save runtime").click()
    await expect(page.locator("#status")).to_contain_text("Runtime saved")
    await page.locator("#advanced-bearer-token").fill(TOKEN + "-next")
    await page.get_by_role("button", name="Save advanced settings").click()
    await expect(page.locator("#status")).to_contain_text("Advanced settings saved")
    await page.get_by_role("button", name="Reload overview").click()
    await expect(page.locator("#status")).to_have_text("Overview reloaded.")
    assert await _storage(page) == [[0, 0, ""], []]

    # Nothing was stored: a reload asks again.
    await page.reload()
    await expect(page.locator("#token-section")).to_be_visible()
    await expect(page.locator("#unlocked")).to_be_hidden()


async def _tab_to(page: Any, element_id: str, limit: int = 40) -> list[str]:
    """Press Tab until `element_id` has focus; returns the ids (or tag names) focused on the way."""
    seen: list[str] = []
    for _ in range(limit):
        await page.keyboard.press("Tab")
        focused = await page.evaluate("() => document.activeElement.id || document.activeElement.tagName")
        seen.append(focused)
        if focused == element_id:
            return seen
    raise AssertionError(f"{element_id} never got focus; focus went through {seen}")


async def test_main_form_works_from_the_keyboard(page: Any, start_bridge: BridgeStarter,
                                                 serve_urls: tuple[str, str]) -> None:
    expect = _expect()
    bridge = await start_bridge()
    await _open(page, bridge)
    await page.get_by_role("button", name="Add source").click()  # a template-built row is labelled too
    unlabelled = await page.evaluate("""() => [...document.querySelectorAll('input, select, textarea')]
        .filter((element) => element.labels.length === 0 && !element.getAttribute('aria-label'))
        .map((element) => element.id || element.outerHTML)""")
    assert unlabelled == []
    assert await page.locator("[role=alert]#alert").count() == 1
    await page.reload()
    await expect(page.locator("#unlocked")).to_be_visible()

    # The skip link comes first and jumps to step 1.
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to the setup steps")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("#runtime-section")).to_be_focused()

    order = await _tab_to(page, "runtime-save")
    assert order == ["runtime-profile", "runtime-base-url", "runtime-model", "runtime-api-key",
                     "runtime-save"]
    outline = await page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"  # focus is visible

    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Shift+Tab")
    await expect(page.get_by_label("Base URL")).to_be_focused()
    await page.keyboard.press("Control+A")
    await page.keyboard.type("http://127.0.0.1:9/v1")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Control+A")
    await page.keyboard.type("keyboard-model")
    await page.keyboard.press("Enter")
    await expect(page.locator("#status")).to_contain_text("Runtime saved")

    # Fill the prepared first source, add a second one, save: all from the keyboard.
    first_row = page.locator("#source-rows > li").first
    first_id = await first_row.get_by_label("ID", exact=True).get_attribute("id")
    assert await _tab_to(page, first_id, limit=5) == ["runtime-api-key", "runtime-save", first_id]
    await page.keyboard.press("Control+A")
    await page.keyboard.type("sample")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Control+A")
    await page.keyboard.type(serve_urls[0])
    await _tab_to(page, "source-add", limit=10)
    await page.keyboard.press("Enter")
    second = page.locator("#source-rows > li").nth(1)
    await expect(second.get_by_label("ID", exact=True)).to_be_focused()
    await page.keyboard.type("vault")
    await page.keyboard.press("Tab")
    await page.keyboard.type("Vault")
    await page.keyboard.press("Tab")
    await page.keyboard.press("ArrowDown")  # the protocol select: llmwiki-http -> mcp
    await expect(second.get_by_label("Protocol")).to_have_value("mcp")
    await page.keyboard.press("ArrowUp")
    await expect(second.get_by_label("Protocol")).to_have_value("llmwiki-http")
    await page.keyboard.press("Tab")
    await page.keyboard.type(serve_urls[1])
    await page.keyboard.press("Enter")
    await expect(page.locator("#status")).to_have_text("Saved 2 Knowledge Sources.")

    # Removing a source by keyboard moves focus to a sensible place.
    await page.locator("#source-rows > li").nth(1).get_by_role("button", name="Remove source 2").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#source-rows > li")).to_have_count(1)
    await expect(page.locator("#source-rows > li").first.get_by_label("ID", exact=True)).to_be_focused()
    await expect(page.locator("#status")).to_contain_text("Removed source 2")
    await page.get_by_role("button", name="Discard changes").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#source-rows > li")).to_have_count(2)

    # Step 3 from the keyboard.
    await _tab_to(page, "verify-query", limit=30)
    await page.keyboard.press("Control+A")
    await page.keyboard.type("release checklist")
    await page.keyboard.press("Enter")
    await expect(page.locator("#verify-answer")).to_contain_text("Evidence-only result:")


@pytest.mark.parametrize("name", ["settings.html", "settings.css", "settings.js"])
def test_static_files_exist(name: str) -> None:
    assert (STATIC / name).is_file()


async def test_without_a_settings_file_the_page_says_so(page: Any, start_bridge: BridgeStarter) -> None:
    expect = _expect()
    bridge = await start_bridge(config_path=None)
    await _open(page, bridge)
    await expect(page.locator("#persistence-note")).to_have_text(
        "This bridge runs without a settings file, so changes cannot be saved from this page.")
    await page.get_by_label("Model", exact=True).fill("other-model")
    await page.get_by_role("button", name="Save runtime").click()
    await expect(page.locator("#alert")).to_contain_text("(settings_persistence_disabled)")


# ---------------------------------------------------------------------------- a first-time user

INJECTED_ANSWER = (
    "## Release steps\n"
    "**Ship** after the checklist [1](#citation-1), never [99](#citation-99).\n"
    "<img src=x onerror=\"document.title='pwned'\"> and [a trap](javascript:document.title='pwned')\n"
    "\n"
    "- run the `release` script\n"
    "- tag it\n")


def _dead_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_first_run_tests_unsaved_rows_and_renders_the_answer_safely(
        page: Any, start_bridge: BridgeStarter, serve_urls: tuple[str, str]) -> None:
    expect = _expect()
    console: list[str] = []  # every console error, "Failed to load resource" (a 404) included
    dialogs: list[str] = []
    page.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    sample_url, _vault_url = serve_urls
    async with running_fake_openai() as fake:
        fake.answer(INJECTED_ANSWER)
        bridge = await start_bridge(base_url=fake.url, model="fake-model")
        await _open(page, bridge)
        await expect(page.locator("#metric-runtime-status")).to_have_text("Reachable (HTTP 200).")
        await expect(page.locator("#metric-sources-status")).to_have_text("")
        assert console == [], console  # a clean first load: no 404 favicon, no script error
        # Headless Chromium asks for no favicon anyway; a desktop browser would ask for
        # /favicon.ico (a 404) unless the page declares its own icon inline.
        icon = await page.evaluate("() => document.querySelector('link[rel=icon]')?.href")
        assert icon == "data:,"

        # Test works on the draft row before anything is saved, and says what failed.
        row = page.locator("#source-rows > li").first
        await row.get_by_label("URL", exact=True).fill(f"http://127.0.0.1:{_dead_port()}")
        await row.get_by_role("button", name="Test source 1").click()
        probe = row.locator("[data-probe]")
        await expect(probe).to_have_class(re.compile("probe-failed"))
        await expect(probe).to_contain_text("Not reachable: Local Wiki")
        await expect(probe).to_contain_text("could not be reached. Check that it is running")
        assert "127.0.0.1" not in (await probe.text_content() or "")  # redacted: no URL
        await row.get_by_label("URL", exact=True).fill(sample_url)
        await row.get_by_role("button", name="Test source 1").click()
        await expect(probe).to_contain_text("Reachable: read source-bundle")
        await expect(page.locator("#sources-summary")).to_contain_text("unsaved changes")
        await page.get_by_role("button", name="Save sources").click()
        await expect(page.locator("#status")).to_have_text("Saved 1 Knowledge Source.")
        await expect(page.locator("#metric-sources-status")).to_have_text(
            "Last test: 1 reachable, 0 not reachable.")
        await expect(page.locator("#overview-hero")).to_contain_text("Bridge is ready for local verification")

        # The runtime's Markdown answer is rendered, its citation anchors link to the list, and
        # nothing in it becomes HTML.
        await page.get_by_label("Answer mode").select_option("delegated-runtime")
        await page.get_by_role("button", name="Run setup check").click()
        answer = page.locator("#verify-answer")
        await expect(answer.locator("h6")).to_have_text("Release steps")
        await expect(answer.locator("strong")).to_have_text("Ship")
        await expect(answer.locator("ul > li")).to_have_count(2)
        await expect(answer.locator("code")).to_have_text("release")
        anchor = answer.locator("a.citation-anchor")
        await expect(anchor).to_have_count(1)  # [99] names no citation: it stays text
        await expect(anchor).to_have_attribute("href", "#citation-1")
        await expect(answer).to_contain_text("<img src=x onerror=")
        await expect(answer).to_contain_text("[a trap](javascript:")
        assert await answer.locator("img, script, [onerror]").count() == 0
        assert await page.locator("a[href^='javascript']").count() == 0
        await anchor.click()
        await expect(page.locator("#verify-citations > li#citation-1")).to_be_visible()
        assert page.url.endswith("#citation-1")
        assert await page.title() == "LLMWiki Agent Bridge Settings" and dialogs == []
    assert console == [], console


async def test_the_setup_check_shows_the_answer_while_it_streams(
        page: Any, start_bridge: BridgeStarter, serve_urls: tuple[str, str]) -> None:
    """The verify step reads the bridge's A2A stream: the runtime's first words are on the page
    while the rest is still being generated, then the rendered result replaces the draft."""
    expect = _expect()
    sample_url, _vault_url = serve_urls
    async with running_fake_openai() as fake:
        fake.gated_answer("Roll back by redeploying", " the previous build [1](#citation-1).")
        bridge = await start_bridge(base_url=fake.url, model="fake-model")
        await _open(page, bridge)
        row = page.locator("#source-rows > li").first
        await row.get_by_label("URL", exact=True).fill(sample_url)
        await page.get_by_role("button", name="Save sources").click()
        await expect(page.locator("#status")).to_have_text("Saved 1 Knowledge Source.")
        await page.get_by_label("Answer mode").select_option("delegated-runtime")
        await page.get_by_label("Question").fill("How do we roll back a release?")
        await page.get_by_role("button", name="Run setup check").click()
        # The model has sent its first chunk only: the page already shows it, and the run.
        await expect(page.locator("#verify-answer")).to_have_text("Roll back by redeploying")
        await expect(page.locator("#verify-summary")).to_contain_text("Running: 1 source answered")
        await expect(page.locator("#verify-summary")).to_contain_text("the answer is arriving")
        fake.open_gate()
        await expect(page.locator("#verify-answer")).to_contain_text(
            "Roll back by redeploying the previous build")
        await expect(page.locator("#verify-summary")).to_contain_text("Completed (delegated-runtime)")
        await expect(page.locator("#verify-answer a.citation-anchor")).to_have_count(1)
        assert [r.body.get("stream") for r in fake.chat_requests] == [True]
