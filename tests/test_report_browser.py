"""The HTML report in real headless Chromium: no console errors, anchors land, payloads stay inert."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from patchkit.audit.model import AuditResult
from patchkit.report.html import render_html

pytestmark = pytest.mark.browser
FIXTURES = Path(__file__).parent / "fixtures" / "report"
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
webdriver = pytest.importorskip("selenium.webdriver")
if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
    pytest.skip("needs Debian chromium and chromium-driver", allow_module_level=True)


@pytest.fixture
def browser():
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="patchkit-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def open_report(browser, tmp_path: Path, fixture: str, lang: str, width: int = 1280) -> AuditResult:
    result = AuditResult.from_dict(json.loads((FIXTURES / fixture).read_text("utf-8")))
    page = tmp_path / f"{Path(fixture).stem}.{lang}.html"
    page.write_text(render_html(result, lang), encoding="utf-8")
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    browser.get(page.as_uri())
    return result


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_content_anchors_and_no_console_errors(browser, tmp_path, lang):
    result = open_report(browser, tmp_path, "audit_small.json", lang)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    for number, patch in enumerate(result.patches, 1):
        article = browser.find_element("id", f"p{number}")
        assert patch.patch in article.text
        assert browser.find_element("id", f"domain-{patch.domain}")
        title = patch.title[lang]
        assert title in browser.find_element("id", "labels").text
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll('.findings a.where')).map(a => a.getAttribute('href'))"
    )
    assert hrefs
    for href in hrefs:
        assert browser.execute_script("return document.getElementById(arguments[0]) !== null", href[1:]), href
    browser.find_element("css selector", f'a.where[href="{hrefs[0]}"]').click()
    assert browser.execute_script("return location.hash") == hrefs[0]
    assert browser.execute_script("return document.querySelector(':target').id") == hrefs[0][1:]


@pytest.mark.parametrize("width", [1280, 390])
def test_screenshots_and_no_page_scroll_at_phone_width(browser, tmp_path, width):
    open_report(browser, tmp_path, "audit_small.json", "zh", width)
    shots = Path(tempfile.mkdtemp(prefix="patchkit-shots-"))
    path = shots / f"report.zh.{width}.png"
    browser.save_screenshot(str(path))
    print(f"screenshot: {path}")
    assert path.stat().st_size > 1000
    # against the device's width: a phone's innerWidth grows to fit a page that is too wide
    width_now = browser.execute_script("return document.documentElement.scrollWidth")
    assert width_now <= width  # only the diff blocks scroll sideways, inside their box


def test_hostile_input_renders_inert(browser, tmp_path):
    open_report(browser, tmp_path, "audit_hostile.json", "en")
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.title != "pwned"
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return document.querySelectorAll('script').length") == 1  # ours
    assert browser.execute_script("return document.querySelectorAll('[onerror]').length") == 0
    assert "<script>document.title" in browser.find_element("id", "p1").text  # shown as text


def lead_report(tmp_path: Path, lang: str) -> tuple[Path, AuditResult]:
    """A record built by the real guide from two hand-written patches (the second needs the first)."""
    from patchkit.audit.guide import series_lead
    from patchkit.report.words import fill_words
    from tests.test_guide_lead import FORCED, audit

    base = AuditResult.from_dict(json.loads((FIXTURES / "audit_small.json").read_text("utf-8"))).base
    first = audit(
        {"vllm/mod.py": FORCED}, name="0001-core.patch", reviewers=["@alice"], labels=["v1", "core"]
    )
    bigger = ("x = 1\n", "x = 2\ny = 3\nz = 4\nw = 5\nv = 6\n")
    second = audit({"vllm/b.py": bigger}, name="0002-b.patch", depends_on=["0001-core.patch"])
    second.verdict = "needs-work"
    result = AuditResult("series", base, [first, second], "needs-work")
    result.guide = {"lead": series_lead([first, second])}
    fill_words(result)
    page = tmp_path / f"lead.{lang}.html"
    page.write_text(render_html(result, lang), encoding="utf-8")
    return page, result


@pytest.mark.parametrize(("lang", "width"), [("en", 1280), ("zh", 390)])
def test_lead_paragraphs_series_graph_and_label_grid(browser, tmp_path, lang, width):
    page, result = lead_report(tmp_path, lang)
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    browser.get(page.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    series = browser.find_element("id", "series").text
    assert result.guide["lead"][lang][:12] in series
    leads = browser.find_elements("css selector", "article.patch p.lead")
    assert len(leads) == 2 and ("@alice" in leads[0].text)
    nodes = browser.find_elements("css selector", "svg.series-graph g.node")
    assert len(nodes) == 2
    assert (
        browser.execute_script("return document.querySelectorAll('svg.series-graph path.edge').length") == 1
    )
    assert browser.execute_script("return document.querySelector('svg.series-graph g.v-needs-work') !== null")
    radii = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg.series-graph circle'), c => +c.getAttribute('r'))"
    )
    assert radii[0] != radii[1]  # size by changed lines
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg a')).map(a => a.getAttribute('href'))"
    )
    assert hrefs and all(
        browser.execute_script("return !!document.getElementById(arguments[0])", h[1:]) for h in hrefs
    )
    cells = browser.execute_script("return document.querySelectorAll('svg.label-grid rect.cell.on').length")
    assert cells == 3  # v1 and core on the first patch, its domain on the second
    box = browser.execute_script(
        "return document.querySelector('svg.series-graph').getBoundingClientRect().width"
    )
    assert 0 < box <= width
    assert browser.execute_script("return document.documentElement.scrollWidth") <= width
    external = 'return document.querySelectorAll(\'[src^="http"], [href^="http"], script[src]\').length'
    assert browser.execute_script(external) == 0
    shots = Path(tempfile.mkdtemp(prefix="patchkit-shots-"))
    browser.save_screenshot(str(shots / f"lead.{lang}.{width}.png"))
    print(f"screenshot: {shots / f'lead.{lang}.{width}.png'}")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    shown = "return getComputedStyle(document.querySelector('svg.series-graph')).display"
    assert browser.execute_script(shown) != "none"
