"""The instructor page in a real Chromium (issue 4), next to learners saving runs.

Servers are the real ``attention-workbench serve`` in a subprocess. Learners are separate browser
contexts (separate sessions) typing into the workbench; the instructor page is never reloaded, so
runs appearing in it prove the periodic re-listing. Every test asserts that no page error was
logged, no request left the local server and (for hostile text) no dialog opened.
"""

from __future__ import annotations

import csv
import http.client
import io
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from class_runs import write_runs
from playwright.sync_api import Page, expect
from store_helpers import sqlite_store
from workbench_server import (
    NO_PASSWORD,
    ROOT,
    blocking_violations,
    expect_save_answer,
    open_instructor,
    screenshot,
    source,
    start_server,
    table_rows,
    type_number,
    watched,
)

from app.auth import PASSWORD_ENV
from app.instructor.table import PAGE_SIZE
from app.learner.runs import runs_columns
from app.store.importing import import_paths
from attention_core import FAILURE_MODES, self_attention
from attention_core.records import ExperimentRecord

# Where a run's point is on screen: Bokeh's own scales, so the click hits what a user would click.
# Panel's Tabulator views on the page (the runs table's is the only one), found as the page's
# resync script (TABLE_RESYNC_JS) finds them.
TABLE_VIEWS = ("const views = [], walk = v => { if (v == null) return; if (v.tabulator !== undefined && "
               "typeof v.setData === 'function') views.push(v); for (const c of (v.child_views || [])) walk(c) }; "
               "for (const root of Object.values(Bokeh.index)) walk(root);")
# Every change of the table's data in the browser, as [ms since the page opened, rows], in
# window.__tableData: which update the browser got last, when a test finds the table wrong.
RECORD_TABLE_DATA_JS = (f"() => {{ {TABLE_VIEWS} const source = views[0].model.source; window.__tableData = []; "
                        "source.properties.data.change.connect(() => window.__tableData.push("
                        "[Math.round(performance.now()), source.get_length()])) }")
# Make the table look as it does while Panel's view builds it (or built again).
TABLE_BUILDING_JS = f"building => {{ {TABLE_VIEWS} for (const v of views) v._building = building }}"
# Once, 500 ms after the table's data next changes (after the resync script's first look), have
# Tabulator draw the first row only, as a late redraw of older data would; window.__stale is
# then how many rows it held.
STALE_REDRAW_JS = f"""() => {{ {TABLE_VIEWS} const view = views[0], change = view.model.source.properties.data.change
  const once = () => {{
    change.disconnect(once)
    setTimeout(() => view.tabulator.setData(view.tabulator.getData().slice(0, 1))
      .then(() => {{ window.__stale = view.tabulator.getDataCount() }}), 500)
  }}
  change.connect(once)
}}"""
# Click Clear filters (its Bokeh event, as the browser's click sends it), wait for the Learner
# field to empty, and say whether any patch from the server was applied meanwhile.
# Presses Clear filters and waits for the fields to empty; returns their values and the fields any
# message from the server wrote meanwhile (Bokeh runs a CustomJS callback asynchronously, so a
# message about something else, such as the periodic re-listing, may arrive first).
CLEAR_AND_READ_JS = """async () => {
  const doc = Bokeh.documents[0], models = [...doc.all_models], apply = doc.apply_json_patch
  const find = title => models.find(m => m.title === title)
  const fields = new Map(['Learner contains', 'Label contains', 'Mode'].map(t => [find(t).id, t]))
  const written = []
  doc.apply_json_patch = function (patch, ...rest) {
    for (const event of patch.events ?? [])
      if (fields.has(event.model?.id)) written.push(fields.get(event.model.id))
    return apply.call(this, patch, ...rest)
  }
  try {
    models.find(m => m.label === 'Clear filters').trigger_event(new (Bokeh.require('core/bokeh_events').ButtonClick)())
    for (let i = 0; i < 400 && find('Learner contains').value !== ''; i++) await new Promise(r => setTimeout(r, 5))
    return [find('Learner contains').value, find('Label contains').value, find('Mode').value, written]
  } finally {
    doc.apply_json_patch = apply
  }
}"""
POINT_JS = """([figureName, column, runId]) => {
  const doc = Bokeh.documents[0];
  const view = Bokeh.index.find_one(doc.get_model_by_name(figureName));
  const src = doc.get_model_by_name('class-source');
  const i = Array.from(src.data.id).indexOf(runId);
  view.el.scrollIntoView({block: 'center', behavior: 'instant'});
  const box = view.canvas_view.el.getBoundingClientRect();
  return [box.left + view.frame.x_scale.compute(src.data.x[i]),
          box.top + view.frame.y_scale.compute(src.data[column][i])];
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("instructor")
    running = start_server(base / "runs", base / "server.log", env=NO_PASSWORD)
    yield running
    running.stop()


DAY_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d$")


@pytest.fixture
def watch(server, page: Page):
    w = watched(page, server)
    yield w
    w.assert_clean()
    assert w.dialogs == []


def save_as_learner(context, server, learner: str, label: str, *, broken: bool = False,
                    causal: bool = True,
                    prediction: str = "Row sums stay 1 with the mask before softmax.") -> None:
    """One learner's session: the worked row, optionally bidirectional and the broken mode, then Save run."""
    page = context.new_page()
    page.goto(server.url)
    expect(page.get_by_label("Query 1")).to_be_visible(timeout=30_000)
    page.get_by_role("button", name="Worked row (seed 003)").click()
    if not causal:
        page.get_by_label("Causal mask", exact=True).uncheck()
    if broken:
        page.get_by_label("Mask after softmax (broken)", exact=True).check()
        if causal:
            expect(page.get_by_text("BROKEN MODE: mask after softmax.")).to_be_visible()
    page.get_by_label("Prediction").fill(prediction)
    page.get_by_label("Learner").fill(learner)
    page.get_by_label("Label").fill(label)
    page.get_by_label("Label").press("Tab")
    page.get_by_role("button", name="Save run").click()
    # Without a "Saved run" answer the failure says what the browser holds of Save run's answer.
    expect_save_answer(page, page.get_by_text(re.compile("Saved run “")))
    page.close()


def filter_learner(page: Page, text: str) -> None:
    box = page.get_by_label("Learner contains")
    box.fill(text)
    box.press("Enter")


def show_columns(page: Page, *names: str) -> None:
    """Tick ``names`` under "Columns shown" (opened if it is closed)."""
    if not page.get_by_label(names[0], exact=True).is_visible():
        page.get_by_role("button", name="Columns shown").click()
    for name in names:
        page.get_by_label(name, exact=True).check()


def cli_export(store_url: str, fmt: str) -> str:
    done = subprocess.run([sys.executable, "-m", "app.cli", "export", "--store", store_url,
                           "--format", fmt], cwd=ROOT, capture_output=True, timeout=60, check=True)
    return done.stdout.decode("utf-8")


def test_two_learners_runs_appear_without_reload_filter_chart_and_compare(server, browser, page, watch):
    tag = uuid.uuid4().hex[:6]
    page.set_viewport_size({"width": 1400, "height": 1000})
    open_instructor(page, server)
    page.evaluate(RECORD_TABLE_DATA_JS)
    before = int(page.get_by_test_id("runs-total").text_content().replace(",", ""))
    learners = [browser.new_context(), browser.new_context()]
    save_as_learner(learners[0], server, f"Ada {tag}", "correct")
    save_as_learner(learners[1], server, f"Grace {tag}", "broken", broken=True)
    save_as_learner(learners[1], server, f"Grace {tag}", "correct again")
    for context in learners:
        context.close()
    # No reload: the page's periodic re-listing brings the three runs in.
    expect(page.get_by_test_id("runs-total")).to_have_text(str(before + 3), timeout=15_000)
    expect(page.locator(".tabulator").get_by_text(f"Ada {tag}")).to_be_visible()

    for field in ("Learner contains", "Label contains"):  # a filter applies on Enter: the field says so
        expect(page.get_by_label(field)).to_have_attribute("placeholder", "type, then Enter")
    filter_learner(page, f"grace {tag}")  # any case
    expect(page.get_by_test_id("runs-shown")).to_have_text("2")
    expect(table_rows(page)).to_have_count(2)
    type_number(page, "Label contains", "again")
    expect(table_rows(page)).to_have_count(1)
    expect(table_rows(page)).to_contain_text("correct again")
    # Clear filters empties the fields in the browser, before any answer from the server, so a
    # filter typed straight after it is never wiped by that answer.
    assert page.evaluate(CLEAR_AND_READ_JS) == ["", "", "All modes", []]
    filter_learner(page, tag)
    page.get_by_label("Mode", exact=True).select_option("Mask after softmax (broken)")
    expect(table_rows(page)).to_have_count(1)
    expect(page.get_by_test_id("runs-shown")).to_have_text("1")
    expect(page.get_by_label("Mode", exact=True)).to_have_value("Mask after softmax (broken)")
    expect(page.get_by_label("Learner contains")).to_have_value(tag)
    try:
        # One retrying check of the whole table, not a count then a text: Clear filters' own
        # answers (every mode, 3 rows) can land after the filters typed straight after it, the
        # table's earlier 1 row ("again") passing the count, and a strict to_contain_text then
        # failing at once on 3 rows (reproduced 1 run in 8 under load).
        expect(table_rows(page)).to_have_text([re.compile(rf"Grace {tag}.*Mask after softmax \(broken\)", re.S)])
    except AssertionError as failed:
        # Seen now and then in a whole run, never alone: the table back to every mode of the
        # learner's runs. Say what the page and the server's log held, for the next look.
        shown = page.get_by_test_id("runs-shown").text_content(), page.get_by_label("Mode", exact=True).input_value()
        log = [line for line in server.log.read_text().splitlines() if "ERROR" in line or "WARNING" in line][-5:]
        changes = page.evaluate("() => window.__tableData")
        raise AssertionError(f"{failed}\nruns shown, Mode: {shown}; the server's last warnings: {log}; "
                             f"the table's data in the browser, [ms, rows]: {changes}") from None
    # Brought in by the live refresh, the broken run's numbers and checks read as the learner's
    # Saved runs table writes them (3, not 3.0; check titles, not names).
    grace_broken = next(r for r in (ExperimentRecord.from_json(t) for t in server.texts())
                        if r.learner == f"Grace {tag}" and r.mask_after_softmax)
    learner_page = runs_columns([grace_broken])
    for field, text in (("tokens", "3"), ("d_k", "1"), ("total future-token weight", "0"),
                        ("smallest row sum", learner_page["smallest row sum"][0]),
                        ("failed checks", "Mask applied before softmax; Row sums equal 1")):
        row = table_rows(page).filter(has_text=f"Grace {tag}").filter(has_text="Mask after softmax (broken)")
        expect(row.locator(f"[tabulator-field='{field}']")).to_have_text(text)
    page.get_by_label("Mode", exact=True).select_option("All modes")
    expect(page.get_by_test_id("runs-shown")).to_have_text("3")

    # The class picture: one point per run shown, grouped by mode.
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('class-source').data.id.length === 3")
    chart = source(page, "class-source")
    assert sorted(chart["learner"]) == sorted([f"Ada {tag}", f"Grace {tag}", f"Grace {tag}"])
    assert sorted(chart["mode"]) == ["Correct, causal", "Correct, causal", "Mask after softmax (broken)"]
    broken = chart["mode"].index("Mask after softmax (broken)")
    assert chart["future_weight"][broken] == 0 and chart["min_row_sum"][broken] < 0.002
    # … and per learner.
    page.get_by_role("button", name="Learner", exact=True).click()
    page.wait_for_function("tag => Bokeh.documents[0].get_model_by_name('class-source').data.group"
                           ".includes('Grace ' + tag)", arg=tag)
    expect(page.get_by_label("Groups of the class picture")).to_contain_text(f"Grace {tag} (2 runs)")
    page.get_by_role("button", name="Mode", exact=True).click()
    expect(page.get_by_label("Groups of the class picture")).to_contain_text("Correct, causal")

    # The learners view: Grace did both runs of the contrast, Ada only the correct one.
    learners = page.get_by_role("table", name="Learners and their checkpoints")
    grace = learners.get_by_role("row").filter(has_text=f"Grace {tag}")
    # Cells after the name: runs, predict, experiment, other failure modes tried, explain.
    expect(grace.get_by_role("cell")).to_have_text(["2", DAY_TIME, DAY_TIME, "", "missing"])
    expect(learners.get_by_role("row").filter(has_text=f"Ada {tag}").get_by_role("cell").nth(2)) \
        .to_have_text("missing a mask-after-softmax run")
    page.get_by_label("Show learners").select_option("Missing experiment")
    expect(grace).to_have_count(0)
    page.get_by_label("Show learners").select_option("Anyone")

    # Tick one run in the table, click another's point in the chart: both heat maps and the difference.
    ada = chart["id"][chart["learner"].index(f"Ada {tag}")]
    broken_id = chart["id"][broken]
    table_rows(page).filter(has_text=f"Ada {tag}").locator("input[type='checkbox']").check()
    # The server has the tick (its run's full text is shown) before the point is clicked.
    expect(page.get_by_label(re.compile("Full text of run"))).to_contain_text(f"Ada {tag}")
    x, y = page.evaluate(POINT_JS, ["class-row-sum-figure", "min_row_sum", broken_id])
    page.mouse.click(x, y)
    expect(page.get_by_role("table", name="Comparison of row sums and future-token weight")).to_be_visible()
    expect(table_rows(page).filter(has_text="Mask after softmax (broken)").locator("input[type='checkbox']")) \
        .to_be_checked()
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('compare-diff-source').data.row.length === 9")
    a, b, diff = (source(page, f"compare-{n}-source") for n in ("a", "b", "diff"))
    assert len(a["value"]) == len(b["value"]) == len(diff["value"]) == 9
    records = {r.id: r for r in (ExperimentRecord.from_json(t) for t in server.texts())}
    row2 = 3 + 1  # row 2, column 2 of a 3×3 matrix, row-major
    assert a["value"][row2] == records[ada].results["weights"][1][1]
    assert b["value"][row2] == records[broken_id].results["weights"][1][1]
    assert diff["value"][row2] == pytest.approx(a["value"][row2] - b["value"][row2])
    summary = page.get_by_role("table", name="Comparison of row sums and future-token weight")
    expect(summary).to_contain_text(re.compile(r"\(Mask after softmax \(broken\)\)"))
    # Each run named by learner, label and created time (as the table shows it).
    created = table_rows(page).filter(has_text=f"Ada {tag}").locator("[tabulator-field='created (local)']")
    expect(summary).to_contain_text(f"A: Ada {tag} · “correct” · {created.text_content()} ")
    expect(summary).to_contain_text(f"B: Grace {tag} · “broken” · ")
    page.set_viewport_size({"width": 1400, "height": 2700})
    screenshot(page, "instructor-compare.png", full_page=False)


def test_exports_hold_exactly_the_filtered_runs_and_match_the_cli(server, browser, page, watch):
    tag = uuid.uuid4().hex[:6]
    context = browser.new_context()
    save_as_learner(context, server, f"Lin {tag}", "=1+1", prediction="-2 and @x, a formula?")
    save_as_learner(context, server, f"Lin {tag}", "second", broken=True)
    save_as_learner(context, server, f"Other {tag}", "not mine", broken=True, causal=False)
    context.close()
    open_instructor(page, server)
    filter_learner(page, f"Lin {tag}")
    expect(page.get_by_test_id("runs-shown")).to_have_text("2")

    with page.expect_download() as got:
        page.get_by_role("button", name="Export JSON").click()
    download = got.value
    assert re.fullmatch(r"class-runs-\d{8}T\d{6}\.\d{3}Z(-\d+)?\.json", download.suggested_filename)
    bundle = json.loads(Path(download.path()).read_text(encoding="utf-8"))
    cli = json.loads(cli_export(server.store_url, "json"))
    expected = [r for r in cli["runs"] if r["learner"] == f"Lin {tag}"]
    assert len(expected) == 2
    assert bundle["runs"] == expected  # same records, same order, text untouched
    assert bundle["runs"][0]["label"] == "=1+1"

    with page.expect_download() as got:
        page.get_by_role("button", name="Export CSV").click()
    assert re.fullmatch(r"class-runs-\d{8}T\d{6}\.\d{3}Z(-\d+)?\.csv", got.value.suggested_filename)
    rows = list(csv.reader(io.StringIO(Path(got.value.path()).read_text(encoding="utf-8"), newline="")))
    cli_rows = list(csv.reader(io.StringIO(cli_export(server.store_url, "csv"), newline="")))
    assert rows[0] == cli_rows[0]
    assert rows[1:] == [r for r in cli_rows[1:] if r[2] == f"Lin {tag}"]
    assert rows[1][3] == "'=1+1"  # the CSV neutralises formulas, as the CLI does
    mode = rows[0].index("mode")
    assert [r[mode] for r in rows[1:]] == ["Correct, causal", "Mask after softmax (broken)"]
    other = [r for r in cli_rows[1:] if r[2] == f"Other {tag}"]
    assert [(r[mode], r[rows[0].index("mask_after_softmax")]) for r in other] == [
        ("Mask after softmax (broken), nothing to mask: bidirectional", "true")]
    # The page names that run as the CSV does, never plain "mask after softmax" nor "correct".
    # Its row arrives while the table is (made to look) still being built, when Panel's view
    # takes no new data: the rows are redrawn from the data once it is built.
    page.evaluate(TABLE_BUILDING_JS, True)
    filter_learner(page, f"Other {tag}")
    expect(page.get_by_test_id("runs-shown")).to_have_text("1")
    page.wait_for_function(f"() => {{ {TABLE_VIEWS} return views.length === 1 && "
                           "views[0].model.source.get_length() === 1 }")
    expect(table_rows(page)).to_have_count(2)  # the two rows of before, out of step with the data
    page.wait_for_timeout(1000)  # built only after the page's resync script first looked (300 ms)
    page.evaluate(TABLE_BUILDING_JS, False)
    expect(table_rows(page)).to_have_count(1)
    expect(table_rows(page).first.get_by_text(
        "Mask after softmax (broken), nothing to mask: bidirectional", exact=True)).to_be_visible()
    # A late redraw of older rows, after the script's first look, is caught by a later look.
    page.evaluate(STALE_REDRAW_JS)
    filter_learner(page, f"Lin {tag}")
    expect(page.get_by_test_id("runs-shown")).to_have_text("2")
    page.wait_for_function("() => window.__stale === 1")
    expect(table_rows(page)).to_have_count(2)

    # Fresh content on every click: a run saved now is in the next download.
    context = browser.new_context()
    save_as_learner(context, server, f"Lin {tag}", "third")
    context.close()
    with page.expect_download() as got:
        page.get_by_role("button", name="Export JSON").click()
    labels = [r["label"] for r in json.loads(Path(got.value.path()).read_text(encoding="utf-8"))["runs"]]
    assert labels == ["=1+1", "second", "third"]


def test_the_instructor_page_with_a_trailing_slash_opens_the_page(server, page, watch):
    page.goto(server.url + "instructor/?from=bookmark")
    expect(page).to_have_url(re.compile(r"/instructor\?from=bookmark$"))
    expect(page.get_by_test_id("runs-total")).to_be_visible(timeout=30_000)
    expect(page.locator(".tabulator").first).to_be_visible()  # Panel's files found: the page drew
    watch.assert_clean()


def test_table_rows_left_behind_by_a_data_change_are_redrawn_from_its_data(tmp_path, page):
    # Panel's Tabulator sometimes kept the first of two quick data changes' rows (an upload of
    # several files); the page redraws rows that disagree with the table's data after a change.
    write_runs(tmp_path / "runs", 5)
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, running)
        open_instructor(page, running)
        expect(table_rows(page)).to_have_count(5)
        page.evaluate("""() => {
          const find = (view) => view == null ? null : view.tabulator !== undefined ? view :
            (view.child_views || []).map(find).find(v => v) || null
          const view = Object.values(Bokeh.index).map(find).find(v => v)
          view.model.source.properties.data.change.emit()  // a data change, drawn by Panel …
          view.tabulator.setData([])  // … then overtaken, as in a lost race: none of its rows
        }""")
        expect(table_rows(page)).to_have_count(5)
        expect(table_rows(page).first).to_contain_text("run 4")
        watch.assert_clean()
    finally:
        running.stop()


def test_the_tables_rows_are_not_rebuilt_when_it_scrolls_back_into_view(tmp_path, page):
    # Tabulator's virtual renderer rebuilt every row when the table came back into view, so a
    # click on an Open run link or a tick box arriving then was lost (a browser test lost it).
    write_runs(tmp_path / "runs", 3)
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        page.set_viewport_size({"width": 1280, "height": 400})
        open_instructor(page, running)
        link = page.get_by_role("link", name=re.compile("^Open run ")).first
        link.scroll_into_view_if_needed()
        link.evaluate("a => { a.dataset.kept = 'yes' }")
        next_frames = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
        page.evaluate("() => document.getElementById('main').scrollTo(0, 1e6)")  # the template's scroller
        page.evaluate(next_frames)
        assert not link.evaluate("a => a.getBoundingClientRect().bottom > 0 && "
                                 "a.getBoundingClientRect().top < innerHeight"), "the table stayed in view"
        link.scroll_into_view_if_needed()
        page.evaluate(next_frames)
        expect(page.locator("a[data-kept='yes']")).to_have_count(1)
        with page.context.expect_page() as opened:
            page.locator("a[data-kept='yes']").click()
        expect(opened.value).to_have_url(re.compile(r"/\?run="))
    finally:
        running.stop()


HOSTILE = "<img src=x onerror=alert(1)>"


def test_hostile_learner_text_is_shown_literally_and_runs_nothing(server, browser, page, watch):
    tag = uuid.uuid4().hex[:6]
    context = browser.new_context()
    learner_page_watch = []
    context.on("page", lambda p: p.on("dialog", lambda d: (learner_page_watch.append(d.message), d.dismiss())))
    save_as_learner(context, server, f"{HOSTILE}{tag}", "<script>alert(2)</script>",
                    prediction="[click](javascript:alert(3)) **bold** <b>x</b>")
    context.close()
    assert learner_page_watch == []
    open_instructor(page, server)
    filter_learner(page, tag)
    expect(page.get_by_test_id("runs-shown")).to_have_text("1")
    row = table_rows(page).first
    expect(row.get_by_text(f"{HOSTILE}{tag}", exact=True)).to_be_visible()
    expect(row.get_by_text("<script>alert(2)</script>", exact=True)).to_be_visible()
    expect(page.locator(".tabulator img")).to_have_count(0)
    # Full text on demand: a ticked run's whole prediction shows under the table, literally.
    row.locator("input[type='checkbox']").check()
    details = page.get_by_label(re.compile("Full text of run"))
    expect(details).to_contain_text("[click](javascript:alert(3)) **bold** <b>x</b>")
    expect(details).to_contain_text(f"{HOSTILE}{tag}")
    expect(details.locator("b, a, img")).to_have_count(0)
    # Hover the run's point: the tooltip shows the name as text.
    x, y = page.evaluate(POINT_JS, ["class-future-figure", "future_weight", source(page, "class-source")["id"][0]])
    page.mouse.move(x, y)
    expect(page.get_by_text(f"{HOSTILE}{tag}").last).to_be_visible()
    assert page.locator("img[src='x']").count() == 0
    assert watch.dialogs == []


@pytest.fixture
def password_server(tmp_path):
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env={PASSWORD_ENV: "s3cret pass"})
    yield running
    running.stop()


def websocket_status(url: str, path: str, cookie: str | None = None) -> int:
    """The HTTP status of a WebSocket handshake (101 means accepted)."""
    host = url.split("//")[1].rstrip("/")
    conn = http.client.HTTPConnection(host, timeout=10)
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": url.rstrip("/")}
    if cookie:
        headers["Cookie"] = cookie
    conn.request("GET", path, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


def test_password_protects_instructor_page_and_downloads_but_not_learners(password_server, browser):
    server = password_server
    for path in ("/instructor", "/instructor/"):
        conn = http.client.HTTPConnection(server.url.split("//")[1].rstrip("/"), timeout=10)
        conn.request("GET", path)
        response = conn.getresponse()
        assert response.status == 302 and "/login" in response.getheader("Location")
        conn.close()
    # The page's WebSocket carries its data and its downloads: refused without a login.
    assert websocket_status(server.url, "/instructor/ws") == 403

    # Learners keep open access to "/".
    learner = browser.new_context()
    save_as_learner(learner, server, "Ada", "open access")
    learner.close()

    context = browser.new_context()
    page = context.new_page()
    watch = watched(page, server)
    page.goto(server.url + "instructor")
    expect(page).to_have_url(re.compile(r"/login"))
    expect(page.get_by_role("heading", name="Instructor login")).to_be_visible()
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("Invalid username or password")
    expect(page.get_by_test_id("runs-total")).to_have_count(0)
    page.get_by_label("Password").fill("s3cret pass")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/instructor$"))
    expect(page.get_by_test_id("runs-total")).to_have_text("1", timeout=30_000)
    with page.expect_download() as got:
        page.get_by_role("button", name="Export JSON").click()
    assert [r["label"] for r in json.loads(Path(got.value.path()).read_text())["runs"]] == ["open access"]
    cookies = "; ".join(f"{c['name']}={c['value']}" for c in context.cookies())
    assert websocket_status(server.url, "/instructor/ws", cookies) == 101
    watch.assert_clean()
    context.close()


def test_ten_thousand_runs_open_without_errors(tmp_path, page):
    write_runs(tmp_path / "runs", 10_000)
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, running)
        open_instructor(page, running)
        expect(page.get_by_test_id("runs-total")).to_have_text("10,000")
        expect(table_rows(page)).to_have_count(20)  # one page, fetched from the server
        expect(table_rows(page).first).to_contain_text("run 9999")  # newest first
        # The class picture draws the newest 5,000 runs, and says so.
        page.wait_for_function(
            "() => Bokeh.documents[0].get_model_by_name('class-source').data.id.length === 5000")
        expect(page.get_by_test_id("class-note")).to_contain_text("The newest 5,000 of the 10,000 runs")
        # The class picture, built after the first paint, is styled like the rest of the page.
        size = "el => getComputedStyle(el).fontSize"
        assert page.get_by_role("heading", name="Class picture").evaluate(size) == \
            page.get_by_role("heading", name="Runs", exact=True).evaluate(size)
        where = page.get_by_test_id("runs-page")
        expect(where).to_have_text("of 500 (runs 1–20 of 10,000)")
        page.get_by_role("button", name="Last »").click()
        expect(where).to_have_text("of 500 (runs 9,981–10,000 of 10,000)")
        expect(table_rows(page).last).to_contain_text("run 0")
        expect(page.get_by_role("button", name="Next ›")).to_be_disabled()
        # Sorted in the store over every run, not within the page; a new sort starts on page 1.
        page.get_by_label("Sort by").select_option("learner")
        expect(where).to_have_text("of 500 (runs 1–20 of 10,000)")
        expect(table_rows(page).first).to_contain_text("run 9989")  # learner 29 (Z to A), newest first
        page.get_by_role("button", name="A to Z").click()
        expect(table_rows(page).first).to_contain_text("run 0")  # learner 00, oldest first
        page.get_by_role("button", name="Next ›").click()
        expect(where).to_have_text("of 500 (runs 21–40 of 10,000)")
        expect(table_rows(page).first).to_contain_text("run 600")  # learner 00's 21st run
        box = page.get_by_label("Page", exact=True)
        box.fill("3")
        box.press("Enter")
        expect(table_rows(page).first).to_contain_text("run 1200")
        page.get_by_role("button", name="« First").click()
        expect(where).to_have_text("of 500 (runs 1–20 of 10,000)")
        expect(page.get_by_role("button", name="‹ Previous")).to_be_disabled()
        filter_learner(page, "learner 07")
        expect(page.get_by_test_id("runs-shown")).to_have_text("334")  # n % 30 == 7 for n < 10,000
        watch.assert_clean()
    finally:
        running.stop()


def test_version_1_and_2_runs_side_by_side_with_d_k_and_d_model(tmp_path, page):
    # The v1 files learners already hold (imported), beside a v2 run in matrix mode (the four-token trace).
    runs = tmp_path / "runs"
    trace = self_attention([[1, 0], [0, 1], [1, 1], [-1, 1]], np.eye(2), np.eye(2), [[1, 1], [1, -1]])
    with sqlite_store(runs) as store:
        import_paths(store, [ROOT / "tests" / "records_v1"])
        store.save(ExperimentRecord.from_result(trace, learner="Grace", label="four-token trace"))
    running = start_server(runs, tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, running)
        page.set_viewport_size({"width": 1280, "height": 1000})
        open_instructor(page, running)
        expect(page.get_by_test_id("runs-total")).to_have_text("5")
        headers = page.locator(".tabulator-col-title")
        expect(headers.filter(has_text=re.compile(r"^d_k$"))).to_be_visible()
        expect(headers.filter(has_text=re.compile(r"^d_model$"))).to_be_hidden()  # until chosen
        show_columns(page, "d_model")
        expect(headers.filter(has_text=re.compile(r"^d_model$"))).to_be_visible()
        # Cells of the columns tokens, d_k, d_model.
        trace_row = table_rows(page).filter(has_text="four-token trace")
        v1_vector = table_rows(page).filter(has_text="d_k = 2, padded")
        for row, values in ((trace_row, ["4", "2", "2"]), (v1_vector, ["4", "2", "—"])):
            for field, value in zip(["tokens", "d_k", "d_model"], values, strict=True):
                expect(row.locator(f"[tabulator-field='{field}']")).to_have_text(value)
        # A version-1 run compared with the version-2 run: same T, so a difference map too.
        trace_row.locator("input[type='checkbox']").check()
        v1_vector.locator("input[type='checkbox']").check()
        expect(page.get_by_role("table", name="Comparison of row sums and future-token weight")).to_be_visible()
        page.wait_for_function(
            "() => Bokeh.documents[0].get_model_by_name('compare-diff-source').data.row.length === 16")
        screenshot(page, "instructor-v1-v2.png")
        with page.expect_download() as got:
            page.get_by_role("button", name="Export JSON").click()
        bundle = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
        assert sorted(r["schema_version"] for r in bundle["runs"]) == [1, 1, 1, 1, 3]
        originals = {p.stem: json.loads(p.read_text(encoding="utf-8"))
                     for p in (ROOT / "tests" / "records_v1").glob("*.json")}
        assert {r["id"]: r for r in bundle["runs"] if r["schema_version"] == 1} == originals
        with page.expect_download() as got:
            page.get_by_role("button", name="Export CSV").click()
        rows = list(csv.DictReader(io.StringIO(Path(got.value.path()).read_text(encoding="utf-8"), newline="")))
        assert sorted((r["d_k"], r["d_model"]) for r in rows) == [
            ("1", ""), ("1", ""), ("1", ""), ("2", ""), ("2", "2")]
        watch.assert_clean()
    finally:
        running.stop()


def test_a_server_restart_is_announced_and_the_table_marked_stale(tmp_path, page):
    write_runs(tmp_path / "runs", 3)
    own = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        open_instructor(page, own)
        expect(page.get_by_test_id("runs-total")).to_have_text("3")
        own.process.kill()
        own.process.wait(timeout=30)
        # The notice itself (Panel's notyf also copies it into a screen-reader announcer).
        notice = page.locator(".notyf__message").filter(has_text="Connection to the workbench server lost")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("exports")
        # The count above the table says so too, and keeps its numbers.
        count = page.get_by_test_id("runs-count")
        expect(count).to_contain_text("this table no longer updates")
        expect(count).to_have_class(re.compile(r"\bstale\b"))
        expect(page.get_by_test_id("runs-total")).to_have_text("3")
    finally:
        own.stop()


# Every cell of the runs table shown, and every header: cut (its content wider than its box), or
# the table wider than its holder (a sideways scroll bar).
TABLE_FIT_JS = """holder => {
  const cut = [...holder.parentElement.querySelectorAll('.tabulator-row .tabulator-cell, .tabulator-col-title')]
    .filter(c => c.offsetParent !== null && c.textContent.trim() && c.scrollWidth > c.clientWidth)
    .map(c => `${c.closest('[tabulator-field]')?.getAttribute('tabulator-field')}: ${c.textContent}`);
  return {overflow: holder.scrollWidth - holder.clientWidth, cut: [...new Set(cut)]};
}"""


def table_fit(page: Page) -> dict:
    return page.locator(".tabulator-tableholder").first.evaluate(TABLE_FIT_JS)


def wide_runs(runs: Path) -> None:
    """A class whose newest page holds the widest cells: every mode's title, causal and
    bidirectional (the longest titles), every check that fails, long names and text."""
    from attention_core import scaled_dot_product_attention

    with sqlite_store(runs) as store:
        for n, (mode, causal) in enumerate((m, c) for m in FAILURE_MODES for c in (True, False)):
            result = scaled_dot_product_attention([1.0, 2.0, 0.5], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0],
                                                  causal=causal, failure_mode=mode)
            store.save(ExperimentRecord.from_result(
                result, learner=f"Maximilian Longname-{n}", label="after the break, second try",
                prediction="Row sums stay 1 with the mask before softmax, every row.",
                explanation="The future cells get weight zero so each row sums to one."))


def test_the_runs_table_fits_1280_and_1500_px_and_the_instructor_chooses_its_columns(tmp_path, page):
    wide_runs(tmp_path / "runs")
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, running)
        page.set_viewport_size({"width": 1280, "height": 720})
        open_instructor(page, running)
        expect(table_rows(page)).to_have_count(2 * len(FAILURE_MODES))  # every mode, causal and not
        for width in (1280, 1500):
            page.set_viewport_size({"width": width, "height": 720})
            page.wait_for_function(f"() => document.documentElement.clientWidth === {width}")
            expect(page.locator(".tabulator-col-title").filter(has_text="explanation")).to_be_visible()
            # Mode, the numbers and the failed checks need no sideways scrolling, and no cell is cut.
            assert table_fit(page) == {"overflow": 0, "cut": []}, width
            table = page.locator(".tabulator").first.bounding_box()
            assert table["x"] >= 0 and table["x"] + table["width"] <= width
        failed = table_rows(page).filter(has_text="Mask after softmax (broken), nothing to mask")
        expect(failed.locator("[tabulator-field='mode']")).to_be_visible()
        # The instructor adds the columns left out at first, and drops one.
        headers = page.locator(".tabulator-col-title")
        expect(headers.filter(has_text=re.compile(r"^created \(UTC\)$"))).to_be_hidden()
        show_columns(page, "created (UTC)", "causal")
        expect(headers.filter(has_text=re.compile(r"^created \(UTC\)$"))).to_be_visible()
        expect(headers.filter(has_text=re.compile(r"^causal$"))).to_be_visible()
        page.get_by_label("prediction", exact=True).uncheck()
        expect(headers.filter(has_text=re.compile(r"^prediction$"))).to_be_hidden()
        # More columns share the width: still no sideways scrolling.
        page.locator(".tabulator-tableholder").first.evaluate(
            "h => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert table_fit(page)["overflow"] == 0
        screenshot(page, "instructor-columns-1500.png", full_page=False)
        watch.assert_clean()
    finally:
        running.stop()


def test_axe_finds_no_critical_or_serious_violation_on_the_instructor_page(tmp_path, page):
    wide_runs(tmp_path / "runs")
    write_runs(tmp_path / "runs", 10)  # on 31 January 2025, for the date filter
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, running)
        page.set_viewport_size({"width": 1280, "height": 720})
        open_instructor(page, running)
        expect(table_rows(page)).to_have_count(PAGE_SIZE)
        # Tabulator's grid owns only rows and row groups once the page has fixed its roles.
        expect(page.locator(".tabulator-tableholder")).to_have_attribute("role", "rowgroup")
        assert blocking_violations(page) == []
        # Every control used: a date range chosen in its labelled field's calendar, columns chosen, two
        # runs ticked (a link on a ticked row) and their full text, the comparison, a sort, page 2.
        page.get_by_label("Created between (local dates)").click()
        today = page.locator(".flatpickr-day.today")
        today.click()
        today.click()  # from today to today: the wide runs, saved just now
        wide = 2 * len(FAILURE_MODES)
        expect(page.get_by_test_id("runs-shown")).to_have_text(str(wide))
        page.get_by_role("button", name="Clear filters").click()
        expect(page.get_by_test_id("runs-shown")).to_have_text(str(wide + 10))
        show_columns(page, "created (UTC)", "d_model")
        for n in (0, 1):
            table_rows(page).nth(n).locator("input[type='checkbox']").check()
        expect(page.get_by_label(re.compile("Full text of run"))).to_have_count(2)
        expect(page.get_by_role("table", name="Comparison of row sums and future-token weight")).to_be_visible()
        assert blocking_violations(page) == []
        page.get_by_label("Sort by").select_option("smallest row sum")
        page.get_by_role("button", name="Next ›").click()
        expect(table_rows(page)).to_have_count(wide + 10 - PAGE_SIZE)
        assert blocking_violations(page) == []
        watch.assert_clean()
    finally:
        running.stop()
