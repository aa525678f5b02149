"""The embed in a real course page: a host page on another origin frames /embed at 610 px.

The workbench is served on ``localhost:PORT`` and trusts one course page, served by this module
on ``127.0.0.1:HOST_PORT`` (another origin: another host and port). A second host page on
``127.0.0.1:OTHER_PORT`` is not trusted. The host page keeps every message it hears in
``window.heard``, which the tests read.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from workbench_server import ROOT, free_port, screenshot, start_server

from attention_core.modes import FAILURE_MODES, run_title
from attention_core.records import TEXT_LIMITS

FRAME_HEIGHT, COLUMN = 610, 640

# A course page: a 640 px column with the explorable's iframe, and everything it hears kept.
HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lesson 10 · Self-attention</title>
<style>
body {{ margin: 0; background: #eef1f4; font-family: Georgia, serif; color: #222; }}
main {{ width: {column}px; margin: 0 auto; padding: 16px 24px; background: white; min-height: 100vh; }}
h1 {{ font-size: 24px; margin: 0 0 6px; }} p {{ margin: 0 0 10px; font-size: 15px; }}
iframe {{ display: block; width: 100%; height: {height}px; border: 1px solid #ccd; border-radius: 4px; }}
</style></head>
<body><main>
<h1>Self-attention</h1>
<p>Save a run with the causal mask on, then one in Mask after softmax (broken), and compare.</p>
<iframe id="explorable" title="Self-attention score and weight matrices" src="{src}"></iframe>
</main>
<script>
window.heard = []
window.addEventListener('message', (event) => window.heard.push({{origin: event.origin, data: event.data}}))
</script>
</body></html>"""


def readme_host_page(app: str) -> str:
    """The README's minimal host page, framing this test's workbench at ``app``, in a page that
    keeps what it hears in ``window.heard`` too."""
    snippet = re.search(r"```html\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    listen = ("<script>window.heard = []; addEventListener('message', (event) => "
              "window.heard.push({origin: event.origin, data: event.data}))</script>")
    return f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Host</title></head>" \
           f"<body>{listen}{snippet.replace('http://localhost:5006', app)}</body></html>"


class _HostHandler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        query = parse_qs(urlsplit(self.path).query)
        if "readme" in query:
            body = readme_host_page(query["readme"][0]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body)
            return
        if "src" not in query:  # the browser's favicon request: nothing, and no 404 in the console
            self.send_response(204)
            self.end_headers()
            return
        body = HOST_PAGE.format(column=COLUMN, height=FRAME_HEIGHT, src=query["src"][0]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Host:
    """A host page server on 127.0.0.1 and a free port: ``page(src)`` is its address framing ``src``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _HostHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def page(self, src: str) -> str:
        from urllib.parse import quote

        return f"{self.origin}/?src={quote(src, safe='')}"

    def readme(self, app: str) -> str:
        from urllib.parse import quote

        return f"{self.origin}/?readme={quote(app, safe='')}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def hosts():
    trusted, other = Host(), Host()
    yield trusted, other
    trusted.stop()
    other.stop()


@pytest.fixture(scope="module")
def server(hosts, tmp_path_factory):
    """The workbench, trusting the first host page's origin only."""
    base = tmp_path_factory.mktemp("embed")
    running = start_server(base / "runs", base / "server.log", "--embed-origin", hosts[0].origin)
    yield running
    running.stop()


@pytest.fixture
def problems(page: Page, server, hosts):
    """Page errors, console errors and requests beyond the workbench and the host pages (the
    embed works offline) of the host page and its frames."""
    seen: list[str] = []
    local = re.compile("^(?:" + "|".join(re.escape(o) for o in (app_origin(server), *(h.origin for h in hosts)))
                       + r"|data:|blob:|about:)")
    page.on("pageerror", lambda exc: seen.append(f"page error: {exc}"))
    page.on("console", lambda msg: msg.type == "error" and seen.append(f"console: {msg.text}"))
    page.on("request", lambda request: local.match(request.url) or seen.append(f"request: {request.url}"))
    return seen


def app_origin(server) -> str:
    return server.url.rstrip("/")


def open_host(page: Page, url: str):
    """Open a host page at 1280×720 and wait until its framed workbench shows its heat maps."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(url)
    frame = page.frame_locator("#explorable")
    expect(frame.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    inner = page.frame(url=re.compile(r"/embed"))
    inner.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                            "Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")
    return frame, inner


def tab(frame, title: str):
    """A tab's header in the framed workbench."""
    return frame.locator(".bk-tab", has_text=title)


def heard(page: Page, event: str | None = None) -> list[dict]:
    """What the host page heard, oldest first: every message, or the events named ``event``."""
    every = page.evaluate("() => window.heard")
    return every if event is None else [m for m in every if m["data"].get("event") == event]


def wait_to_hear(page: Page, event: str, count: int) -> None:
    page.wait_for_function("([event, count]) => window.heard.filter("
                           "(m) => m.data && m.data.event === event).length >= count", arg=[event, count])


def box_in_frame(page: Page, locator) -> None:
    """Assert ``locator`` shows whole inside the iframe's 610 px without scrolling it."""
    frame_box = page.locator("#explorable").bounding_box()
    box = locator.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0, locator
    for start, size in (("x", "width"), ("y", "height")):
        assert frame_box[start] <= box[start], (box, frame_box)
        assert box[start] + box[size] <= frame_box[start] + frame_box[size], (box, frame_box)


def test_a_trusted_course_page_frames_the_embed_and_hears_each_saved_run_once(server, hosts, page, problems):
    trusted = hosts[0]
    # With the lesson's prediction passed in, as the course page does: without one the embed
    # keeps the checks and the weights back (issue 24, test_predict_first_browser.py).
    frame, inner = open_host(page, trusted.page(f"{app_origin(server)}/embed?prediction=It%20cannot."))
    # The first tab fits the 610 px frame in a 640 px column: no scrolling, inputs to checks in view.
    sizes = inner.evaluate("() => { const d = document.documentElement; "
                           "return [d.scrollHeight, d.clientHeight, d.scrollWidth, d.clientWidth] }")
    assert sizes[0] <= sizes[1] == FRAME_HEIGHT and sizes[2] <= sizes[3] == COLUMN, sizes
    brief = frame.get_by_test_id("invariants")
    for locator in (frame.get_by_label("Tokens"), frame.get_by_label("Failure mode"),
                    frame.get_by_label("Query 3", exact=True), frame.get_by_label("Key 3", exact=True),
                    frame.get_by_label("Causal mask", exact=True),
                    frame.get_by_label("Mask after softmax (broken)", exact=True),
                    frame.locator(".bk-Figure").nth(0), frame.locator(".bk-Figure").nth(1),
                    brief.locator("[data-check='row_sums']"), brief.locator("[data-check='forbidden_zeros']"),
                    frame.get_by_role("button", name="Save run")):
        box_in_frame(page, locator)
    # The rest is one click away.
    for title in ("Row steps and readouts", "Saved runs", "Input mode and presets"):
        expect(tab(frame, title)).to_be_visible()

    tab(frame, "Saved runs").click()
    frame.get_by_label("Prediction").fill("Token 2 cannot attend to token 3.")
    frame.get_by_label("Prediction").press("Tab")
    tab(frame, "Workbench").click()
    frame.get_by_role("button", name="Save run").click()
    status = frame.get_by_role("status").filter(has_text="Saved run #1")
    expect(status).to_be_visible()
    run_id = re.search(r"\(([^)]+)\)\.$", status.inner_text()).group(1)
    wait_to_hear(page, "experiment-recorded", 1)
    screenshot(page, "embed-host-1280x720-correct.png", full_page=False)
    # A round trip after the save (another failure mode shown) and still one message.
    frame.get_by_label("Mask after softmax (broken)", exact=True).check()
    expect(frame.get_by_test_id("invariants").locator("[data-check='row_sums']")).to_contain_text("FAIL")
    [first] = heard(page, "experiment-recorded")
    [ready] = heard(page, "ready")
    assert ready["data"] == {"type": "explorable-event", "instanceId": "attention-workbench", "event": "ready"}
    assert first["origin"] == app_origin(server)
    message = first["data"]
    assert message["type"] == "explorable-event" and message["event"] == "experiment-recorded"
    assert message["instanceId"] == "attention-workbench"
    assert message["url"] == f"{app_origin(server)}/?run={run_id}"
    saved = {r["id"]: r for r in server.records()}[run_id]
    assert message["run"] == {
        "id": run_id, "created_at": saved["created_at"], "failure_mode": "correct", "causal": True,
        "total_future_weight": 0, "min_row_sum": 1, "failed_checks": []}

    frame.get_by_role("button", name="Save run").click()
    expect(frame.get_by_role("status").filter(has_text="Saved run #2")).to_be_visible()
    wait_to_hear(page, "experiment-recorded", 2)
    second = heard(page, "experiment-recorded")[1]["data"]["run"]
    assert second["failure_mode"] == "mask_after_softmax" and second["id"] != run_id
    assert second["failed_checks"] == ["mask", "row_sums"] and second["min_row_sum"] < 1
    screenshot(page, "embed-host-1280x720-broken.png", full_page=False)
    assert len(heard(page, "experiment-recorded")) == 2 and len(heard(page)) == 3
    assert problems == []


# Each tab's scrolling column in tab order, its content's height and its own.
_TABS = """() => { const out = []; const walk = (root) => {
  for (const el of root.querySelectorAll('.scrollable-vertical')) out.push([el.scrollHeight, el.clientHeight])
  for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot) }
  walk(document); return out }"""


@pytest.mark.parametrize("use_values", [False, True])
def test_the_first_tab_fits_the_frame_in_every_failure_mode(server, hosts, page, problems, use_values):
    frame, inner = open_host(page, hosts[0].page(f"{app_origin(server)}/embed?prediction=It%20cannot."))
    if use_values:
        frame.get_by_label("Use values (adds output and contributions)").check()
        expect(frame.get_by_test_id("invariants").locator("[data-check='output']")).to_contain_text("pass")
    for mode in FAILURE_MODES.values():
        frame.get_by_label("Failure mode").select_option(label=mode.title)
        expect(frame.get_by_test_id("brief-run-title")).to_have_text(run_title(mode.name, True, 3))
        content, height = inner.evaluate(_TABS)[0]
        assert content <= height, (mode.name, content, height)
        box_in_frame(page, frame.get_by_role("button", name="Save run"))
        box_in_frame(page, frame.locator(".bk-Figure").nth(1))
    assert problems == []
    # Nothing an operator cannot act on in the log: Bokeh's layout warnings (W-1005, three lines
    # a session for the embed's notes once) are not written for the page's models.
    assert not re.search(r"WARNING W-\d{4}", server.log.read_text())


def test_axe_finds_no_critical_or_serious_violation_in_the_embed(server, page, problems):
    page.set_viewport_size({"width": COLUMN, "height": FRAME_HEIGHT})
    page.goto(f"{app_origin(server)}/embed")
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('weights-source').data.row.length > 0")
    violations = Axe().run(page).response["violations"]
    assert [(v["id"], v["help"]) for v in violations if v["impact"] in ("critical", "serious")] == []
    assert problems == []


def test_learner_text_from_the_course_page_is_shown_literally_and_cut_to_its_limit(server, hosts, page, problems):
    from urllib.parse import urlencode

    long_prediction = "<b>x</b>" + "p" * TEXT_LIMITS["prediction"]
    query = urlencode({"learner": "<b>x</b>", "prediction": long_prediction, "instanceId": "lesson-10"})
    frame, _ = open_host(page, hosts[0].page(f"{app_origin(server)}/embed?{query}"))
    expect(frame.get_by_test_id("embed-learner")).to_have_text("<b>x</b>")
    expect(frame.get_by_test_id("embed-prediction")).to_contain_text("<b>x</b>ppp")
    assert frame.locator("b", has_text=re.compile(r"^x$")).count() == 0
    tab(frame, "Saved runs").click()
    expect(frame.get_by_label("Learner")).to_have_value("<b>x</b>")
    expect(frame.get_by_label("Prediction")).to_have_value(long_prediction[:TEXT_LIMITS["prediction"]])
    expect(frame.get_by_role("status").filter(has_text="the first 2000 were kept")).to_contain_text(
        f"a prediction of {len(long_prediction)} characters")

    # A message from the course page sets them too; one naming another instance is ignored.
    tab(frame, "Workbench").click()
    app = app_origin(server)
    post = """([app, message]) => document.getElementById('explorable').contentWindow.postMessage(message, app)"""
    page.evaluate(post, [app, {"type": "explorable-context", "instanceId": "lesson-10", "learner": "<i>Ada</i>",
                               "prediction": "Token 2 cannot read token 3."}])
    expect(frame.get_by_test_id("embed-learner")).to_have_text("<i>Ada</i>")
    expect(frame.get_by_test_id("embed-prediction")).to_have_text("Token 2 cannot read token 3.")
    page.evaluate(post, [app, {"type": "explorable-context", "instanceId": "another", "learner": "Mallory"}])
    page.evaluate(post, [app, {"type": "explorable-context", "prediction": "It cannot."}])  # no id: this one
    expect(frame.get_by_test_id("embed-prediction")).to_have_text("It cannot.")
    expect(frame.get_by_test_id("embed-learner")).to_have_text("<i>Ada</i>")
    assert frame.locator("i", has_text="Ada").count() == 0
    page.evaluate(post, [app, {"type": "explorable-context", "learner": "L" * 150}])
    expect(frame.get_by_test_id("embed-learner")).to_have_text("L" * TEXT_LIMITS["learner"])
    frame.get_by_role("button", name="Save run").click()
    expect(frame.get_by_role("status").filter(has_text="Saved run #1")).to_be_visible()
    wait_to_hear(page, "experiment-recorded", 1)
    [message] = heard(page, "experiment-recorded")
    assert message["data"]["instanceId"] == "lesson-10"
    assert message["data"]["url"] == f"{app_origin(server)}/?run={message['data']['run']['id']}"
    saved = {r["id"]: r for r in server.records()}[message["data"]["run"]["id"]]
    assert saved["learner"] == "L" * TEXT_LIMITS["learner"]
    assert saved["prediction"] == "It cannot."
    # Open reloads the embed with the run: the instance keeps its name.
    tab(frame, "Saved runs").click()
    expect(frame.get_by_role("link", name="Open run 1 in the workbench")).to_have_attribute(
        "href", re.compile(r"^\?instanceId=lesson-10&run="))
    assert problems == []


def test_the_readme_host_page_passes_the_prediction_in_and_hears_the_run(server, hosts, page, problems):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(hosts[0].readme(app_origin(server)))
    frame = page.frame_locator("#workbench")
    expect(frame.get_by_test_id("embed-prediction")).to_have_text("It cannot.", timeout=30_000)
    expect(frame.get_by_test_id("embed-learner")).to_have_text("Ada")
    with page.expect_console_message(lambda msg: msg.type == "log" and " correct http" in msg.text) as logged:
        frame.get_by_role("button", name="Save run").click()
    [recorded] = heard(page, "experiment-recorded")
    run = recorded["data"]
    assert logged.value.text == f"{run['run']['id']} correct {run['url']}"
    assert {r["id"]: r for r in server.records()}[run["run"]["id"]]["learner"] == "Ada"
    assert problems == []


def test_an_untrusted_course_page_cannot_frame_the_embed_and_hears_nothing(server, hosts, page):
    embed = f"{app_origin(server)}/embed"
    with page.expect_console_message(lambda msg: "frame-ancestors" in msg.text) as refusal, \
            page.expect_response(embed) as answer:
        page.goto(hosts[1].page(embed))
    assert answer.value.headers["content-security-policy"] == f"frame-ancestors 'self' {hosts[0].origin}"
    assert "The request has been blocked" in refusal.value.text, refusal.value.text
    expect(page.frame_locator("#explorable").get_by_label("Query 1", exact=True)).to_have_count(0)
    assert page.frame(url=re.compile(r"/embed")) is None  # the frame holds Chromium's error page
    assert heard(page) == []


def test_the_instructor_page_refuses_to_be_framed_even_by_a_trusted_page(server, hosts, page):
    instructor = f"{app_origin(server)}/instructor"
    with page.expect_console_message(lambda msg: "frame-ancestors" in msg.text) as refusal, \
            page.expect_response(instructor) as answer:
        page.goto(hosts[0].page(instructor))
    assert answer.value.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert answer.value.headers["x-frame-options"] == "DENY"
    assert "The request has been blocked" in refusal.value.text, refusal.value.text
    assert page.frame(url=re.compile(r"/instructor")) is None


def test_a_parent_the_server_does_not_trust_is_neither_heard_nor_told(server, page, problems):
    # The workbench's own origin may frame it ('self') but is not a trusted course page: a page
    # there that frames /embed gets no message on a save, and its messages change nothing.
    app = app_origin(server)
    page.goto(f"{app}/embed")
    expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.evaluate("""(src) => {
        window.heard = []
        window.addEventListener('message', (event) => window.heard.push({origin: event.origin, data: event.data}))
        const frame = document.createElement('iframe')
        frame.id = 'explorable'; frame.src = src; frame.style.height = '610px'; frame.style.width = '640px'
        document.body.prepend(frame)
    }""", f"{app}/embed")
    frame = page.frame_locator("#explorable")
    expect(frame.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
    page.evaluate("""([app]) => document.getElementById('explorable').contentWindow.postMessage(
        {type: 'explorable-context', learner: 'Mallory', prediction: 'from an untrusted page'}, app)""", [app])
    tab(frame, "Saved runs").click()
    frame.get_by_label("Prediction").fill("mine")
    frame.get_by_label("Prediction").press("Tab")
    tab(frame, "Workbench").click()
    frame.get_by_role("button", name="Save run").click()
    expect(frame.get_by_role("status").filter(has_text="Saved run #1")).to_be_visible()
    expect(frame.get_by_test_id("embed-prediction")).to_have_text("mine")
    expect(frame.get_by_test_id("embed-learner")).to_have_count(0)  # no learner: Mallory was ignored
    assert heard(page) == []
    assert problems == []


def test_the_embed_asked_for_with_a_trailing_slash_renders_and_works_as_embed(server, hosts, page, problems):
    # A course page that writes /embed/ got a blank frame: Panel's scripts were asked for from
    # /embed/static/extensions/…, which nothing serves.
    frame, inner = open_host(page, hosts[0].page(f"{app_origin(server)}/embed/?prediction=It%20cannot."))
    assert inner.url.startswith(f"{app_origin(server)}/embed/?")
    expect(frame.get_by_test_id("embed-prediction")).to_have_text("It cannot.")
    frame.get_by_label("Failure mode").select_option(label="Mask after softmax (broken)")
    expect(frame.get_by_test_id("invariants").locator("[data-check='row_sums']")).to_contain_text("FAIL")
    frame.get_by_role("button", name="Save run").click()
    expect(frame.get_by_role("status").filter(has_text="Saved run #1")).to_be_visible()
    wait_to_hear(page, "experiment-recorded", 1)
    [message] = heard(page, "experiment-recorded")
    assert message["data"]["url"] == f"{app_origin(server)}/?run={message['data']['run']['id']}"
    # The saved runs' table (drawn after the page) finds its scripts and styles too.
    tab(frame, "Saved runs").click()
    expect(frame.get_by_role("link", name="Open run 1 in the workbench")).to_be_visible()
    screenshot(page, "embed-trailing-slash-1280x720.png", full_page=False)
    assert problems == []
