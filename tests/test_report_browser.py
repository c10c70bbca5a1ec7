"""The HTML report in real headless Chromium: no console errors, anchors land, payloads stay inert;
what a reviewer sees first — the verdict and one row per patch with a column per gate above everything
else (the environment last, folded), no sideways scroll at 390 px (the table becomes cards), changed
patches marked when a previous record exists, arrows of the series graph that never cross a node
they do not join, dark mode and print as the system asks."""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from patchkit.audit.model import AuditResult
from patchkit.interdiff.previous import since_last_revision
from patchkit.report.html import render_html
from patchkit.report.i18n import t
from patchkit.report.tallies import gate_names

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
    from patchkit.guide import series_lead
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


NAMES = (
    "0001-tool-parser-with-a-name-long-enough-to-need-two-lines-on-a-phone.patch",
    "0002-prefix-caching.patch",
    "0003-spec-decode.patch",
    "0004-serving.patch",
)
COUNTS = {"passed": 202, "could-not-run": 212, "regressed": 1, "still-failing": 11}


def four_patches(tmp_path: Path, previous: bool) -> AuditResult:
    """Four patches from the small record: 0004 needs 0001 (its arrow skips 0002 and 0003), 0003 needs
    0002; 0001 ran 426 tests. ``previous``: a record of the revision before, whose 0002 differed,
    replaced by this one beside the report (as ``patchkit audit`` does)."""
    data = json.loads((FIXTURES / "audit_small.json").read_text("utf-8"))
    a, b = data["patches"]
    patches = []
    for number, (source, name) in enumerate(zip((a, b, b, a), NAMES), 1):
        patch = copy.deepcopy(source)
        patch.update(patch=name, domain=f"domain-{number}", depends_on=[])
        patches.append(patch)
    patches[3]["depends_on"] = [NAMES[0]]
    patches[2]["depends_on"] = [NAMES[1]]
    tests = next(g for g in patches[0]["gates"] if g["gate"] == "tests")
    tests["details"]["counts"] = COUNTS
    data["patches"] = patches
    data["environment"]["upstream_missing"] = []
    data["environment"]["tests"] = {  # the shape of a real tests environment: long keys, two levels
        "interpreter": "/work/cache-main/testenv/venv-8533ef43f3a756fdd3d6a1c06c4b6e39/bin/python",
        "implementation": "cpython",
        "vllm_target_device_from": "VLLM_TARGET_DEVICE unset; the base's setup.py default",
        "torch_from": "torch==2.13.0 ([audit] torch)",
    }
    result = AuditResult.from_dict(copy.deepcopy(data))
    if previous:
        data["patches"][1]["diff"] += "+    one_more_line = True\n"
        record = tmp_path / "reports" / "audit.json"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(data), encoding="utf-8")
        result.since = since_last_revision(result, record, use_cache=False)
        assert result.since and (tmp_path / "reports" / "audit.previous.json").is_file()
    return result


def show(browser, tmp_path: Path, result: AuditResult, lang: str, width: int, scheme: str = "light") -> None:
    page = tmp_path / f"first.{lang}.{width}.html"
    page.write_text(render_html(result, lang), encoding="utf-8")
    height = 800 if width > 600 else 844
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    features = [{"name": "prefers-color-scheme", "value": scheme}]
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "", "features": features})
    browser.get(page.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def js(browser, script: str, *args):
    return browser.execute_script(script, *args)


TOP = "return Math.round(document.querySelector(arguments[0]).getBoundingClientRect().top + scrollY)"


@pytest.mark.parametrize(("lang", "width"), [("en", 1280), ("zh", 1280), ("en", 390), ("zh", 390)])
def test_the_first_screen_is_the_verdict_and_the_gate_table(browser, tmp_path, lang, width):
    result = four_patches(tmp_path, previous=True)
    show(browser, tmp_path, result, lang, width)
    # the device's width, not innerWidth: a phone's layout viewport grows to fit a page that is wider
    assert js(browser, "return document.documentElement.scrollWidth") <= width
    gates = gate_names(result)  # every gate any patch ran: a patch without one shows a dash
    heads = js(
        browser,
        "return Array.from(document.querySelectorAll('table.patches th.gate-col'), h => h.textContent)",
    )
    assert heads == gates
    for audit in result.patches:
        cells = js(
            browser,
            "return Array.from(document.querySelectorAll(`tr[data-patch='${arguments[0]}'] td.gate-cell`),"
            " td => [td.dataset.gate, td.dataset.status])",
            audit.patch,
        )
        status = {g.gate: g.status for g in audit.gates}
        assert cells == [[gate, status.get(gate, "")] for gate in gates]
    first_row = js(browser, TOP, "table.patches tbody tr")
    assert first_row < js(browser, "return innerHeight")  # on the first screen
    assert js(browser, TOP, "#summary .verdict.big") < first_row
    assert js(browser, TOP, "table.patches") < js(browser, TOP, "#environment")
    assert js(browser, TOP, "table.patches") < js(browser, TOP, "#series")
    assert js(browser, "return document.querySelector('details.environment').open") is False
    assert js(browser, "return document.querySelector('#environment dl.env').checkVisibility()") is False
    tests = js(
        browser,
        "return document.querySelector(`tr[data-patch='${arguments[0]}'] .tcounts`).textContent",
        NAMES[0],
    )
    assert all(str(n) in tests for n in COUNTS.values())
    cards = js(browser, "return getComputedStyle(document.querySelector('table.patches tbody tr')).display")
    assert (cards == "block") is (width < 700)
    reason = js(browser, "return document.querySelector('td.gate-cell[data-status=\"failed\"] details.why')")
    assert reason is not None and js(browser, "return arguments[0].open", reason) is False
    reason.click()  # the reason of a failed gate, one click away
    assert result.patches[0].gates[1].summary in reason.text
    shots = Path(tempfile.mkdtemp(prefix="patchkit-shots-"))
    browser.save_screenshot(str(shots / f"first.{lang}.{width}.png"))
    print(f"screenshot: {shots / f'first.{lang}.{width}.png'}")


@pytest.mark.parametrize("width", [1280, 390])
def test_changed_patches_are_marked_when_a_previous_record_exists(browser, tmp_path, width):
    show(browser, tmp_path, four_patches(tmp_path, previous=True), "en", width)
    marked = js(browser, "return Array.from(document.querySelectorAll('tr.changed'), r => r.dataset.patch)")
    assert marked == [NAMES[1]]
    marks = js(browser, "return Array.from(document.querySelectorAll('.since-mark'), m => m.textContent)")
    assert marks == ["unchanged", "changed", "unchanged", "unchanged"]
    assert t("ui.since", "en") in js(browser, "return document.querySelector('table.patches').textContent")
    assert js(browser, "return document.querySelector('#since').textContent").startswith(
        "Since the last audit"
    )
    show(browser, tmp_path, four_patches(tmp_path / "fresh", previous=False), "en", width)
    assert js(browser, "return document.querySelectorAll('.since-mark, tr.changed, #since').length") == 0
    assert t("ui.since", "en") not in js(
        browser, "return document.querySelector('table.patches').textContent"
    )


SAMPLES = """
const circles = Array.from(document.querySelectorAll('svg.series-graph g.node'), g => {
  const c = g.querySelector('circle');
  const at = name => +c.getAttribute(name);
  return {patch: g.dataset.patch, x: at('cx'), y: at('cy'), r: at('r')};
});
return Array.from(document.querySelectorAll('svg.series-graph path.edge'), path => {
  const length = path.getTotalLength(), points = [];
  for (let i = 0; i <= 200; i++) {
    const p = path.getPointAtLength(length * i / 200);
    points.push([p.x, p.y]);
  }
  return {points: points, circles: circles};
});
"""


def _nearest(circles: list[dict], x: float, y: float) -> dict:
    return min(circles, key=lambda c: (c["x"] - x) ** 2 + (c["y"] - y) ** 2)


def test_graph_arrows_never_cross_a_node_they_do_not_join(browser, tmp_path):
    show(browser, tmp_path, four_patches(tmp_path, previous=False), "en", 1280)
    edges = js(browser, SAMPLES)
    assert len(edges) == 2
    for edge in edges:
        points, circles = edge["points"], edge["circles"]
        ends = {_nearest(circles, *points[0])["patch"], _nearest(circles, *points[-1])["patch"]}
        for circle in circles:
            if circle["patch"] in ends:
                continue
            closest = min(((x - circle["x"]) ** 2 + (y - circle["y"]) ** 2) ** 0.5 for x, y in points)
            assert closest > circle["r"] + 2, (ends, circle)


def test_the_pictures_count_tests_and_gate_time(browser, tmp_path):
    result = four_patches(tmp_path, previous=False)
    show(browser, tmp_path, result, "en", 1280)
    rows = js(
        browser,
        "return Array.from(document.querySelectorAll('svg.test-bars g.bar-row'), g => [g.dataset.patch,"
        " Array.from(g.querySelectorAll('rect'), r => [r.getAttribute('class'), +r.getAttribute('width')])])",
    )
    assert [name for name, _ in rows] == [NAMES[0], NAMES[3]]  # the two with a tests record
    parts = dict(rows[0][1])
    assert set(parts) == {"b-passed", "b-failed", "b-still-failing", "b-could-not-run"}
    assert parts["b-passed"] / parts["b-could-not-run"] == pytest.approx(202 / 212, rel=0.01)
    assert sum(parts.values()) == pytest.approx(300, abs=0.5)
    gates = js(
        browser,
        "return Array.from(document.querySelectorAll('svg.gate-bars g.bar-row'), g => g.dataset.gate)",
    )
    assert gates == ["apply", "ruff", "dco", "tests"]


def test_dark_mode_and_print_follow_the_system(browser, tmp_path):
    result = four_patches(tmp_path, previous=True)
    background = "return getComputedStyle(document.body).backgroundColor"
    show(browser, tmp_path, result, "en", 1280, scheme="light")
    assert js(browser, background) == "rgb(255, 255, 255)"
    show(browser, tmp_path, result, "en", 1280, scheme="dark")
    red, green, blue = (int(v) for v in js(browser, background)[4:-1].split(","))
    assert red + green + blue < 120
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    assert js(browser, background) == "rgb(255, 255, 255)"  # paper is white in dark mode too
    assert js(browser, "return document.querySelector('#environment dl.env').checkVisibility()") is True
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
