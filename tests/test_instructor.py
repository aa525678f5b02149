"""The instructor page without a browser: its state, filters, selection, table, exports."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from datetime import date, timedelta
from html import unescape
from pathlib import Path

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document
from bokeh.models import StringFormatter
from class_runs import write_runs
from panel.models.tabulator import DataTabulator
from store_helpers import OWNER, T0, delete_run, make_record, run_async, sqlite_store

from app.instructor import (
    ALL_MODES,
    COLUMNS,
    ClassChartView,
    ExportView,
    InstructorPage,
    InstructorState,
    RunsTableView,
    create_instructor,
    created_texts,
    mode_order,
    shorten,
)
from app.instructor.table import SHOWN
from app.learner.runs import runs_columns
from app.shared.compare import ComparisonView
from app.store import RunFilter, RunStore, RunSummary, StoreError, export_csv, export_json
from attention_core import scaled_dot_product_attention
from attention_core.modes import FAILURE_MODES, run_title
from attention_core.records import ExperimentRecord


@pytest.fixture
def store(tmp_path) -> RunStore:
    store = sqlite_store(tmp_path / "runs")
    for minutes, mode, learner, label in [(0, "correct", "Ada", "first"),
                                          (60 * 14, "mask_after_softmax", "Grace", "broken"),
                                          (60 * 24, "no_mask", "ada lovelace", "open")]:
        store.save(make_record(mode, minutes=minutes, learner=learner, label=label), key_hash=OWNER)
    return store


def test_filters_by_learner_label_mode_and_local_dates(store):
    s = InstructorState(store=store)
    assert [r.learner for r in s.filtered()] == ["Ada", "Grace", "ada lovelace"]
    assert s.param.mode.objects == [ALL_MODES, "Correct, causal", "Mask after softmax (broken)", "No mask"]
    s.learner = " ADA "
    assert [r.learner for r in s.filtered()] == ["Ada", "ada lovelace"]
    s.label = "pe"
    assert [r.label for r in s.filtered()] == ["open"]
    s.param.update(learner="", label="", mode="Mask after softmax (broken)")
    assert [r.learner for r in s.filtered()] == ["Grace"]
    s.mode = ALL_MODES
    # T0 is 09:15 UTC on 31 January; +14 h is 23:15 UTC, already 1 February in Berlin, so the
    # instructor's local date decides.
    s.param.update(start=date(2025, 1, 31), end=date(2025, 1, 31))
    assert [r.label for r in s.filtered()] == ["first", "broken"]
    s.timezone = "Europe/Berlin"
    assert [r.label for r in s.filtered()] == ["first"]
    s.param.update(start=date(2025, 2, 1), end=None)
    assert [r.label for r in s.filtered()] == ["broken", "open"]


def test_filters_are_one_store_query_not_python_over_every_run(store, monkeypatch):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    s = InstructorState(store=store)
    asked = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda filters=None, **kw: asked.append(filters) or query(filters, **kw))
    s.param.update(learner=" ADA ", mode="No mask", start=date(2025, 2, 1), end=date(2025, 2, 1),
                   timezone="Europe/Berlin")
    berlin = ZoneInfo("Europe/Berlin")
    assert asked[-1] == RunFilter(learner="ADA", mode="No mask", created_from=datetime(2025, 2, 1, tzinfo=berlin),
                                  created_before=datetime(2025, 2, 2, tzinfo=berlin))
    assert [r.label for r in s.filtered()] == ["open"]
    asked.clear()
    s.param.update(learner="", mode=ALL_MODES, start=None, end=None)
    assert asked == [None]  # no filter: one query for the table's page


def test_the_tables_page_is_one_sorted_limited_store_query(store, monkeypatch):
    for minutes in range(1, 43):  # 45 runs: three pages
        store.save(make_record("no_mask" if minutes % 2 else "correct", minutes=minutes, learner=f"L{minutes:02d}"))
    s = InstructorState(store=store)
    asked = []
    query = store.query
    monkeypatch.setattr(store, "query", lambda filters=None, **kw: asked.append(kw) or query(filters, **kw))
    assert (s.total, s.matching, s.pages, s.page) == (45, 45, 3, 1)
    assert [r.learner for r in s.page_runs][:2] == ["ada lovelace", "Grace"]  # newest first
    s.page = 3
    assert asked[-1] == {"sort": [("created_at", "desc")], "limit": 20, "offset": 40}
    assert [r.learner for r in s.page_runs] == ["L04", "L03", "L02", "L01", "Ada"]
    s.sort_by = "learner"  # a new sort starts on the first page
    assert s.page == 1 and asked[-1]["sort"] == [("learner", "desc"), ("created_at", "desc")]
    assert asked[-1]["offset"] == 0
    s.descending = False
    assert [r.learner for r in s.page_runs][:3] == ["Ada", "Grace", "L01"]  # the store's collation
    s.param.update(sort_by="total future-token weight", descending=True)
    weights = [r.total_future_weight for r in s.page_runs]
    assert weights == sorted(weights, reverse=True) and asked[-1]["sort"][0] == ("total_future_weight", "desc")
    s.page = 3
    s.learner = "L0"  # nine runs pass: one page, and the third page is gone
    assert (s.matching, s.pages, s.page) == (9, 1, 1) and len(s.page_runs) == 9
    with pytest.raises(ValueError):
        s.page = 0


def test_refresh_brings_new_runs_and_explanations_and_keeps_unchanged_listings(store, monkeypatch):
    s = InstructorState(store=store)
    before, revision = s.page_runs, s.revision
    queries = []
    monkeypatch.setattr(store, "query", lambda *a, **k: queries.append(1) or RunStore.query(store, *a, **k))
    s.refresh()
    assert s.page_runs is before and queries == [] and s.revision == revision  # one token read, no rebuild
    store.save(make_record(minutes=5, learner="New"))
    s.refresh()
    assert [r.learner for r in s.page_runs][2] == "New" and len(queries) == 1
    assert s.total == s.matching == 4 and s.revision == revision + 1
    store.update_explanation(s.page_runs[-1].id, "because", key_hash=OWNER)
    s.refresh()
    assert s.page_runs[-1].explanation == "because" and len(queries) == 2


def test_selection_keeps_the_last_two_and_survives_filters(store):
    s = InstructorState(store=store)
    ids = [r.id for r in s.filtered()]
    for run_id in ids:
        s.select(run_id)
    assert s.selected_ids == ids[1:]
    s.learner = "Grace"
    assert [r.id for r in s.compared] == ids[1:]


def test_table_rows_are_newest_first_plain_text_and_selection_maps_to_ids(store):
    s = InstructorState(store=store)
    view = RunsTableView(state=s)
    frame = view.table.value
    assert list(frame["label"]) == ["open", "broken", "first"]
    for column in ("learner", "label", "mode", "prediction", "explanation", "created (local)"):
        assert view.table.formatters[column] == {"type": "textarea"}  # escaped text, wrapped
    assert view.table.layout == "fit_columns" and view.table.widths == {}
    assert view.table.hidden_columns == ["id", *(c for c in COLUMNS[1:] if c not in SHOWN)]
    # A page at a time from the store, sorted by the pager: Tabulator neither pages nor sorts.
    assert view.table.pagination is None and view.table.sortable is False
    view.table.selection = [0, 2]
    assert s.selected_ids == [s.filtered()[2].id, s.filtered()[0].id]
    s.learner = "ada"  # Grace's row goes: the selected rows move up
    assert sorted(view.table.selection) == [0, 1]


def test_table_columns_keep_their_kind_from_an_empty_first_fill_to_a_live_refresh(tmp_path):
    # A page opened before any run was saved: Tabulator's column formatters are chosen from the
    # first fill's dtypes and kept when runs arrive (floats would show 3 tokens as 3.0).
    store = sqlite_store(tmp_path / "runs")
    s = InstructorState(store=store)
    view = RunsTableView(state=s)
    empty = view.table.value.dtypes.to_dict()
    root = view.table.get_root(Document())
    store.save(make_record("mask_after_softmax", learner="Grace", label="broken"))
    s.refresh()
    assert view.table.value.dtypes.to_dict() == empty
    assert view.table.value["tokens"].tolist() == ["3"]
    table = next(iter(root.select({"type": DataTabulator})))
    formatters = {c.field: c.formatter for c in table.columns}
    assert all(isinstance(formatters[c], StringFormatter) for c in
               ("tokens", "d_k", "d_model", "total future-token weight", "smallest row sum"))


def test_table_numbers_and_checks_read_as_the_learner_page_after_first_fill_and_live_refresh(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    broken = make_record("mask_after_softmax", learner="Grace", label="broken")
    store.save(broken)
    s = InstructorState(store=store)
    view = RunsTableView(state=s)
    learner = runs_columns([broken])  # the learner's Saved runs table

    def shown(frame, n):
        return {c: frame[c].iloc[n] for c in ("tokens", "d_k", "d_model", "total future-token weight",
                                              "smallest row sum", "failed checks")}

    first = shown(view.table.value, 0)
    assert first["total future-token weight"] == learner["future-token weight"][0] == "0"
    assert first["smallest row sum"] == learner["smallest row sum"][0]
    assert first["failed checks"] == learner["failed checks"][0]
    assert "Row sums equal 1" in first["failed checks"] and "row_sums" not in first["failed checks"]
    assert (first["tokens"], first["d_k"], first["d_model"]) == (str(broken.T), "1", "—")
    store.save(make_record("correct", minutes=5, learner="Ada", label="again"))
    s.refresh()  # what the page's live refresh calls when the store's runs changed
    frame = view.table.value
    assert list(frame["label"]) == ["again", "broken"]
    assert shown(frame, 1) == first
    assert shown(frame, 0)["smallest row sum"] == "1.000" and shown(frame, 0)["failed checks"] == "none"
    assert all(isinstance(v, str) for c in ("tokens", "d_k", "smallest row sum") for v in frame[c])


def test_the_chart_reads_per_learner_too(store):
    store.save(make_record("no_mask", minutes=5, learner="Ada", label="again"))
    store.save(make_record("correct", minutes=6))  # no learner name
    chart = ClassChartView(state=InstructorState(store=store))
    chart.group_by = "learner"
    assert chart.colors.factors == ["Ada", "ada lovelace", "Grace", "(no learner name)"]
    # Oldest first: Ada at 0 and 5 minutes, the unnamed run at 6, Grace at 14 h, ada lovelace at 24 h.
    assert list(chart.source.data["group"]) == ["Ada", "Ada", "(no learner name)", "Grace", "ada lovelace"]
    assert list(chart.source.data["mode"])[:2] == ["Correct, causal", "No mask"]
    assert "<b>1</b> Ada (2 runs)" in chart.key.object and "<b>4</b> (no learner name) (1 run)" in chart.key.object
    assert chart.figures[0].xaxis.axis_label == "learner (numbered in the key below)"
    chart.source.selected.indices = [1]  # Ada's second run, drawn chosen in her colour
    assert chart.chosen.data["group"] == ["Ada"]
    chart.group_by = "mode"
    assert chart.colors.factors[0] == "Correct, causal" and chart.chosen.data["group"] == ["No mask"]


def test_the_instructor_chooses_the_columns_and_the_shown_ones_share_the_width(store):
    view = RunsTableView(state=InstructorState(store=store))
    assert view.columns.value == SHOWN and list(view.columns.options) == COLUMNS[1:]
    root = view.table.get_root()
    configuration, columns = dict(root.configuration), list(root.columns)
    view.columns.value = ["d_model", *SHOWN[:-1]]  # ticked first: still shown in the table's order
    assert view.table.hidden_columns == ["id", "created (UTC)", "causal", "mask after softmax", "explanation"]
    assert set(view.table.hidden_columns) <= set(root.hidden_columns)
    # Only which columns are hidden changes: a change of columns or configuration rebuilds the
    # browser's table, and a second one arriving during that build threw ("firstChild" of null).
    assert root.configuration == configuration and list(root.columns) == columns


def test_chart_has_one_point_per_filtered_run_grouped_by_mode_and_tap_selects(store):
    s = InstructorState(store=store)
    chart = ClassChartView(state=s)
    data = chart.source.data
    assert len(data["id"]) == 3
    assert chart.ticker.ticks == [0, 1, 2]
    assert list(data["x"]) == [0, 1, 2]  # a group's first point sits on its number, not left of it
    assert chart.colors.factors == ["Correct, causal", "Mask after softmax (broken)", "No mask"]
    # The axis numbers the groups; the key says which title each number is, and how many runs.
    assert chart.figures[0].xaxis.major_label_overrides == {0: "1", 1: "2", 2: "3"}
    key = chart.key.object
    assert key.index("<b>1</b> Correct, causal (1 run)") < key.index("<b>2</b> Mask after softmax (broken) (1 run)")
    assert "<b>3</b> No mask (1 run)" in key and key.count("<li>") == 3
    assert chart.chosen.data["x"] == []
    before = chart.source.data
    chart.source.selected.indices = [1]  # what a tap does
    assert s.selected_ids == [data["id"][1]]
    assert chart.source.selected.indices == []
    # The chosen run is drawn again, larger, from its own source; the points are not resent.
    assert chart.chosen.data["x"] == [data["x"][1]]
    assert chart.chosen.data["group"] == [data["group"][1]] == [data["mode"][1]]
    assert chart.source.data is before
    s.mode = "No mask"
    assert list(chart.source.data["mode"]) == ["No mask"]
    assert chart.chosen.data["x"] == []  # the chosen run is filtered out: not drawn


def test_the_page_lists_summaries_and_reads_full_records_only_to_compare(store):
    s = InstructorState(store=store)
    assert all(isinstance(r, RunSummary) for r in s.page_runs)
    for r in s.page_runs:
        s.select(r.id)
    compared = s.compared
    assert [r.id for r in compared] == s.selected_ids
    assert all(isinstance(r, ExperimentRecord) for r in compared)
    delete_run(store, compared[0].id)  # gone before the next refresh
    assert [r.id for r in s.compared] == [compared[1].id]


def test_a_groups_points_start_on_its_number_and_spread_around_it(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    for minutes in range(12):
        store.save(make_record("no_mask" if minutes == 5 else "correct", minutes=minutes))
    chart = ClassChartView(state=InstructorState(store=store))
    x = np.array(chart.source.data["x"])
    correct, no_mask = x[np.array(chart.source.data["mode"]) == "Correct, causal"], x[5]
    assert correct[0] == 0 and no_mask == 1
    assert np.all(np.abs(correct) <= 0.3) and len(set(correct)) == len(correct)
    # Spread on both sides of the number, not all to one side.
    assert (correct < 0).sum() >= 4 and (correct > 0).sum() >= 4


def test_a_zone_change_relabels_without_refiltering_or_rebuilding_the_points(store):
    s = InstructorState(store=store)
    chart, table = ClassChartView(state=s), RunsTableView(state=s)
    page, revision, points = s.page_runs, s.revision, chart.source.data["x"]
    s.timezone = "Asia/Tokyo"  # +9 h: 09:15 UTC is 18:15 local
    assert s.page_runs is page and s.revision == revision
    assert chart.source.data["x"] is points
    assert chart.source.data["created"][0] == "2025-01-31 18:15"
    assert list(table.table.value["created (local)"])[-1] == "2025-01-31 18:15:02"
    assert list(table.table.value["created (UTC)"])[-1] == "2025-01-31 09:15:02"


@pytest.mark.parametrize("zone", ["UTC", "Etc/UTC", "Europe/Berlin", "America/St_Johns", "No/Zone"])
def test_created_texts_match_a_per_run_conversion(store, zone):
    from datetime import UTC
    from zoneinfo import ZoneInfo

    runs = store.query().runs
    try:
        tz = ZoneInfo(zone)
    except Exception:
        tz = UTC
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        assert created_texts(runs, zone, fmt) == [
            f"{r.created_datetime.astimezone(tz):{fmt}}" for r in runs]
    assert created_texts([], zone) == []


def test_exports_are_the_filtered_runs_with_text_untouched(store):
    store.save(make_record(minutes=9, learner="<img src=x onerror=alert(1)>", label="=1+1"))
    s = InstructorState(store=store)
    s.label = "=1"
    bundle = json.loads(s.export("json"))
    assert [r["learner"] for r in bundle["runs"]] == ["<img src=x onerror=alert(1)>"]
    kept = [r for r in store.iter_records() if r.label.startswith("=1")]
    assert bundle["runs"] == json.loads(export_json(kept))["runs"]
    assert s.export("csv") == export_csv(kept)  # summaries give the same CSV as full records


def test_two_exports_in_one_second_get_different_file_names(store):
    from datetime import UTC, datetime

    view = ExportView(state=InstructorState(store=store))
    names = []
    for fmt in ("json", "json", "csv", "json"):
        view._download(fmt)
        names.append((view.json if fmt == "json" else view.csv).filename)
    assert len(set(names)) == 4, names
    assert all(re.fullmatch(r"class-runs-\d{8}T\d{6}\.\d{3}Z(-\d+)?\.(json|csv)", n) for n in names), names
    # Within one millisecond: a counter.
    now = datetime(2025, 1, 31, 9, 15, 2, 123456, tzinfo=UTC)
    assert [view._name("json", now) for _ in range(3)] == [
        "class-runs-20250131T091502.123Z.json", "class-runs-20250131T091502.123Z-2.json",
        "class-runs-20250131T091502.123Z-3.json"]
    assert view._name("json", now.replace(microsecond=124000)) == "class-runs-20250131T091502.124Z.json"


def test_the_json_export_reads_the_store_as_it_is_now(store):
    s = InstructorState(store=store)
    ids = [r.id for r in s.filtered()]
    delete_run(store, ids[0])  # gone since the page was drawn: the export reads the store as it is now
    bundle = json.loads(s.export("json"))
    assert [r["id"] for r in bundle["runs"]] == ids[1:] and bundle["skipped"] == []


def test_shorten():
    assert shorten(None) == "" and shorten("abc") == "abc"
    assert shorten("x" * 100, 10) == "x" * 9 + "…"


def test_a_page_per_session_over_one_store(store):
    first, second = InstructorPage(store), InstructorPage(store)
    assert first.state is not second.state and first.state.store is second.state.store
    first.state.learner = "Grace"
    assert second.state.matching == 3
    # Without a browser session the rest of the page is built at once.
    assert isinstance(first.class_chart, ClassChartView) and len(first.chart.objects) == 1
    assert first.exports.state is first.state and first.comparison.state is first.state
    # the exports, the comparison, the learners view
    assert len(first.below.objects) == 3 and first.learners.rows[0]["learner"] == "Ada"
    for r in store.query().runs[:2]:  # one filtered out of this page: still comparable
        first.state.select(r.id)
    assert first.comparison.hint.object == ""
    assert "Comparison of row sums" in first.comparison.compare.summary.object
    assert "Select 2 more runs" in second.comparison.hint.object


def test_the_comparison_names_each_run_by_learner_label_and_local_time_escaped(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    runs = [make_record(minutes=0, learner="Ada <b>", label="try 1"),
            make_record("mask_after_softmax", minutes=1, learner="Ada <b>", label="try 1")]
    for r in runs:
        store.save(r)
    page = InstructorPage(store)
    page.state.timezone = "Europe/Berlin"
    for r in runs:
        page.state.select(r.id)
    summary = page.comparison.compare.summary.object
    # T0 is 09:15:02 UTC, 10:15:02 in Berlin; same learner and label, told apart by the time.
    assert "A: Ada &lt;b&gt; · “try 1” · 2025-01-31 10:15:02 CET (Correct, causal)" in summary
    assert "B: Ada &lt;b&gt; · “try 1” · 2025-01-31 10:16:02 CET (Mask after softmax (broken))" in summary
    assert "Ada <b>" not in summary
    page.state.timezone = "UTC"  # the instructor's browser reports another zone: renamed
    assert "A: Ada &lt;b&gt; · “try 1” · 2025-01-31 09:15:02 UTC" in page.comparison.compare.summary.object
    # Nothing tells two runs apart but their ids: the ids are added.
    twins = [make_record(record_id=f"twin-{n}", minutes=5) for n in (1, 2)]
    for r in twins:
        store.save(r)
    page.state.selected_ids = [r.id for r in twins]
    summary = page.comparison.compare.summary.object
    assert "A: no learner name · no label · 2025-01-31 09:20:02 UTC · twin-1" in summary
    assert "B: no learner name · no label · 2025-01-31 09:20:02 UTC · twin-2" in summary


def test_create_instructor_serves_the_page_in_its_template(store):
    template = create_instructor(store)
    assert isinstance(template, pn.template.BootstrapTemplate)
    assert template.title == "Self-attention workbench · Instructor"
    assert not hasattr(template, "state")  # tests read an InstructorPage's state instead
    assert len(template.main) == 1


def _run(mode: str, causal: bool, T: int = 3, minutes: int = 0, **text) -> ExperimentRecord:
    values = [10.0, 20.0, 100.0][:T]
    result = scaled_dot_product_attention([1.0] * T, [1.0, 2.0, 9.0][:T], values, causal=causal,
                                          failure_mode=mode)
    return ExperimentRecord.from_result(result, created_at=T0 + timedelta(minutes=minutes), **text)


def test_every_place_names_a_run_by_its_title(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    # Today's learner page saved "causal off + broken toggle" as mask_after_softmax; it masked
    # nothing, and every page and the CSV say so rather than calling it broken or correct.
    runs = [_run("correct", True, label="causal"), _run("mask_after_softmax", True, minutes=1, label="broken"),
            _run("mask_after_softmax", False, minutes=2, label="open toggle"),
            _run("correct", False, minutes=3, label="bidirectional"),
            _run("mask_after_softmax", True, T=1, minutes=4, label="one token")]
    for r in runs:
        store.save(r)
    titles = ["Correct, causal", "Mask after softmax (broken)",
              "Mask after softmax (broken), nothing to mask: bidirectional",
              "Correct, bidirectional (no causal mask)",
              "Mask after softmax (broken), nothing to mask: one token"]
    assert [r.title for r in runs] == titles
    s = InstructorState(store=store)
    assert s.param.mode.objects == [ALL_MODES, titles[0], titles[1], titles[4], titles[3], titles[2]]
    table = RunsTableView(state=s)
    assert list(table.table.value["mode"]) == titles[::-1]  # newest first
    assert list(table.table.value["mask after softmax"]) == [True, False, True, True, False]
    chart = ClassChartView(state=s)
    assert list(chart.source.data["mode"]) == titles
    assert chart.colors.factors == [titles[0], titles[1], titles[4], titles[3], titles[2]]
    s.mode = titles[2]
    assert [r.label for r in s.filtered()] == ["open toggle"]
    rows = list(csv.DictReader(io.StringIO(s.export("csv"), newline="")))
    assert [(row["mode"], row["failure_mode"], row["causal"]) for row in rows] == [
        (titles[2], "mask_after_softmax", "false")]
    s.mode = ALL_MODES
    for r in s.filtered()[:2]:
        s.select(r.id)
    compare = ComparisonView()
    compare.show(s.compared)
    assert "A: causal (Correct, causal)" in compare.summary.object
    assert "B: broken (Mask after softmax (broken))" in compare.summary.object


def test_the_class_pictures_figures_narrow_to_the_window_up_to_their_width(store):
    # Fixed 520 px figures stuck out of a window narrower than about 580 px (reflow, issue 24).
    chart = ClassChartView(state=InstructorState(store=store))
    for fig in chart.figures:
        assert fig.sizing_mode == "stretch_width" and fig.max_width == 520 and fig.min_width <= 300
    panes = chart.__panel__().objects[3].objects
    assert [(p.sizing_mode, p.max_width) for p in panes] == [("stretch_width", 520)] * 2


def test_the_class_pictures_key_counts_runs_with_thousands_separators():
    from app.instructor.chart import mode_key

    key = mode_key(["Correct, causal", "No mask"], {"Correct, causal": 12_345, "No mask": 1}, ["#111", "#222"])
    assert "Correct, causal (12,345 runs)" in key and "No mask (1 run)" in key


def test_mode_order_puts_the_lesson_contrast_first_then_bidirectional_runs():
    every = {run_title(m, c, T) for m in FAILURE_MODES for c in (True, False) for T in (1, 3)}
    order = mode_order(every | {"Something else"})
    assert order[:3] == ["Correct, causal", "Mask after softmax (broken)", "No mask"]
    assert order.index("Correct, bidirectional (no causal mask)") > order.index("Keys mixed instead of values")
    assert order[-1] == "Something else" and len(order) == len(every) + 1


def test_ten_thousand_runs_refresh_queries_nothing_while_the_store_is_unchanged(tmp_path, monkeypatch):
    # What makes every tick of every instructor session cheap: a refresh reads the change token
    # and leaves the listing as it was. Its speed is a bench figure (bench/store_scale.py).
    write_runs(tmp_path / "runs", 10_000, start=T0 - timedelta(days=7))
    store = sqlite_store(tmp_path / "runs")
    s = InstructorState(store=store)
    assert s.total == 10_000 and len(s.page_runs) == 20
    before = s.page_runs

    def no_query(*args, **kwargs):
        raise AssertionError("an unchanged store was queried again")

    monkeypatch.setattr(store, "query", no_query)
    s.refresh()
    assert s.page_runs is before
    view = RunsTableView(state=s)
    assert len(view.table.value) == 20  # the table holds one page
    # Counts as a reader writes them.
    assert "<b data-testid='runs-shown'>10,000</b> of <span data-testid='runs-total'>10,000</span>" \
        in view.count.object
    assert view.pager.where.object == "<span data-testid='runs-page'>of 500 (runs 1–20 of 10,000)</span>"
    monkeypatch.undo()  # the last page is read from the store
    view.pager.last.clicks += 1
    assert "(runs 9,981–10,000 of 10,000)" in view.pager.where.object
    pn.state.clear_caches()


def test_the_pager_moves_through_the_pages_and_names_each_sorts_directions(store, tmp_path):
    from app.instructor.table import PagerView, order_options

    for minutes in range(1, 43):  # 45 runs: three pages
        store.save(make_record(minutes=minutes, learner=f"L{minutes:02d}"))
    s = InstructorState(store=store)
    pager = PagerView(state=s)
    assert pager.where.object == "<span data-testid='runs-page'>of 3 (runs 1–20 of 45)</span>"
    assert pager.first.disabled and pager.previous.disabled and not pager.next.disabled
    pager.next.clicks += 1
    assert s.page == 2 and "runs 21–40 of 45" in pager.where.object
    pager.last.clicks += 1
    assert s.page == 3 and "runs 41–45 of 45" in pager.where.object and pager.next.disabled
    pager.next.clicks += 1  # past the last page: stays
    assert s.page == 3
    pager.previous.clicks += 1
    assert s.page == 2
    pager.page.value = 3  # typed
    assert s.page == 3
    pager.page.value = 99  # past the last page: the last
    assert s.page == 3 and pager.page.value == 3
    pager.page.value = 0
    assert s.page == 1 and pager.page.value == 1
    pager.page.value = 3
    pager.first.clicks += 1
    assert s.page == 1
    assert list(pager.order.options) == ["Newest first", "Oldest first"] and pager.order.value is True
    pager.sort_by.value = "learner"
    assert list(pager.order.options) == ["Z to A", "A to Z"] and pager.order.value is True
    pager.order.value = False
    assert s.descending is False and s.page_runs[0].learner == "Ada"
    s.sort_by = "smallest row sum"
    assert list(pager.order.options) == ["Largest first", "Smallest first"] and pager.order.value is False
    s.learner = "nobody"
    assert pager.where.object == "<span data-testid='runs-page'>of 1 (no run passes the filters)</span>"
    assert pager.next.disabled and pager.previous.disabled
    empty = PagerView(state=InstructorState(store=sqlite_store(tmp_path / "empty")))
    assert empty.where.object == "<span data-testid='runs-page'>of 1 (no runs yet)</span>"
    assert order_options("d_k") == {"Largest first": True, "Smallest first": False}


def test_ticked_runs_show_their_full_text_under_the_table_even_from_another_page(store):
    for minutes in range(1, 43):
        store.save(make_record(minutes=minutes, learner=f"L{minutes:02d}"))
    store.save(make_record(minutes=60 * 30, learner="<b>Eve</b>", prediction="Row 2 & more\nsecond line"),
               key_hash=OWNER)
    s = InstructorState(store=store)
    view = RunsTableView(state=s)
    assert view.details.object == ""
    view.table.selection = [0]  # Eve's run, the newest
    eve = s.selected_ids[0]
    assert "Full text of run " + eve in view.details.object
    assert "&lt;b&gt;Eve&lt;/b&gt;" in view.details.object and "Row 2 &amp; more\nsecond line" in view.details.object
    s.page = 3  # Eve's run is not on this page: still selected, its text still shown
    assert s.selected_ids == [eve] and view.table.selection == [] and eve in view.details.object
    store.update_explanation(eve, "because", key_hash=OWNER)
    s.refresh()
    assert "because" in view.details.object


def test_the_class_picture_draws_the_newest_runs_up_to_its_limit_and_says_so(store, monkeypatch):
    import app.instructor.chart as chart_module

    monkeypatch.setattr(chart_module, "CHART_RUNS", 2)
    s = InstructorState(store=store)
    chart = ClassChartView(state=s)
    assert list(chart.source.data["label"]) == ["broken", "open"]  # the newest two, oldest first
    assert "The newest 2 of the 3 runs the filters keep are drawn." in chart.note.object
    assert "(1 run)" in chart.key.object and "Correct, causal" not in chart.key.object
    s.learner = "ada"  # two runs pass: all drawn, no note
    assert list(chart.source.data["label"]) == ["first", "open"] and chart.note.object == ""


def test_an_empty_picture_says_why_and_its_axes_show_0_to_1_not_below_0(store, tmp_path):
    empty = ClassChartView(state=InstructorState(store=sqlite_store(tmp_path / "empty")))
    assert list(empty.source.data["label"]) == []
    assert "No runs yet." in empty.note.object
    future = empty.figures[0].y_range  # a weight is never negative: 0 to 1 until one is above 0
    assert (future.start, future.end) == (-0.05, 1.05)  # with room for a point's marker each side
    row_sums = empty.figures[1].y_range  # nor a row sum: 0 to 1
    assert (row_sums.start, row_sums.end) == (-0.05, 1.05)
    s = InstructorState(store=store)
    chart = ClassChartView(state=s)
    future = chart.figures[0].y_range
    assert future.start == -0.05 and np.isnan(future.end)  # the "no mask" run's weight: from the data
    s.learner = "nobody"
    assert list(chart.source.data["label"]) == [] and future.end == 1.05
    assert "No run passes the filters</b> (the store holds 3)" in chart.note.object
    s.learner = "grace"  # mask after softmax: its future weight is 0 too, its row sums below 1
    assert list(chart.source.data["label"]) == ["broken"] and future.end == 1.05
    assert (chart.figures[1].y_range.start, chart.figures[1].y_range.end) == (-0.05, 1.05)
    s.learner = ""
    assert len(chart.source.data["label"]) == 3 and chart.note.object == "" and np.isnan(future.end)


def test_the_whole_class_views_wait_for_the_store_to_change_not_for_the_filters(store, monkeypatch):
    page = InstructorPage(store)
    counted = []
    monkeypatch.setattr(page.learners, "refresh", lambda: counted.append(1))
    page.state.learner = "Grace"
    assert counted == []  # the learners view counts every run: a filter changes nothing there
    store.save(make_record(minutes=5, learner="New"))
    page.state.refresh()
    assert counted == [1]


def test_the_pages_json_export_stops_at_its_limit_and_says_how_to_export_more(store, monkeypatch):
    import app.instructor.page as page_module

    monkeypatch.setattr(page_module, "PAGE_JSON_RUNS", 2)
    s = InstructorState(store=store)
    view = ExportView(state=s)
    assert view.json.disabled and not view.csv.disabled
    assert "JSON from this page holds at most 2 runs</b> (the filters keep 3)" in view.note.object
    assert "attention-workbench export --format json" in view.note.object
    # The note wraps beside the buttons: at its own width it pushed the page 70 px sideways at 1280 px.
    assert view.note.sizing_mode == "stretch_width" and view.__panel__().sizing_mode == "stretch_width"
    s.learner = "ada"  # two runs: within the limit
    assert not view.json.disabled and "at most" not in view.note.object
    assert len(json.loads(view._download("json").getvalue())["runs"]) == 2


def test_the_class_picture_is_redrawn_in_the_next_tick_after_the_tables_page_once(store, monkeypatch):
    """In a served session the table's page and count go to the browser first: the picture's read
    of up to CHART_RUNS runs waits for the server's next tick, and moves in one tick redraw once."""
    s = InstructorState(store=store)
    chart = ClassChartView(state=s)
    ticks = []  # the server's next tick, as pn.state.execute schedules it in a session
    monkeypatch.setattr(pn.state, "execute", lambda callback, schedule="auto": ticks.append((callback, schedule)))
    s.learner = "ada"
    s.label = "open"
    assert (s.matching, [r.label for r in s.page_runs]) == (1, ["open"])  # the table: at once
    assert list(chart.source.data["label"]) == ["first", "broken", "open"]  # the picture: not yet
    assert [schedule for _, schedule in ticks] == [True]
    ticks.pop()[0]()
    assert list(chart.source.data["label"]) == ["open"]
    s.learner = ""  # the next move schedules a redraw again
    assert len(ticks) == 1


def test_a_tick_reads_in_a_store_thread_and_the_loop_goes_on_while_the_store_holds_it(tmp_path):
    """A store that stops answering holds the tick's thread, not the event loop every page of the
    process shares (an instructor page's tick read it there every second)."""
    import threading

    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada"), key_hash=OWNER)
    page = InstructorPage(store)
    store.save(make_record(minutes=1, learner="Bob"), key_hash=OWNER)
    entered, release, readers = threading.Event(), threading.Event(), []
    change_token = store.change_token

    def held_change_token():
        readers.append(threading.get_ident())
        entered.set()
        release.wait(10)
        return change_token()

    store.change_token = held_change_token

    async def tick_while_held() -> int:
        tick = asyncio.ensure_future(page._refresh_in_thread())
        turns = 0
        while not entered.is_set() or turns < 5:  # the loop goes on while the read waits
            await asyncio.sleep(0.01)
            turns += 1
        assert not tick.done() and page.state.matching == 1
        release.set()
        await tick
        return turns

    assert run_async(tick_while_held()) >= 5
    assert readers and readers[0] != threading.get_ident()
    assert page.state.matching == 2 and page.state.total == 2


def test_ticks_read_every_half_second_but_redraw_a_page_at_most_once_a_second(tmp_path, monkeypatch):
    """A run saved after a quiet spell is read within REFRESH_MS; while runs keep arriving, a
    tick that redrew the page keeps the next read REDRAW_EVERY_S away (a redraw holds the event
    loop every page of the process shares)."""
    from app.instructor import page as page_module

    assert page_module.REFRESH_MS == 500 and page_module.REDRAW_EVERY_S == 1.0
    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada"), key_hash=OWNER)
    page = InstructorPage(store)
    now = [100.0]
    monkeypatch.setattr(page_module, "monotonic", lambda: now[0])
    assert page._due()
    run_async(page._refresh_in_thread())  # nothing new: not a redraw
    assert page._due()
    store.save(make_record(minutes=1, learner="Bob"), key_hash=OWNER)
    run_async(page._refresh_in_thread())
    assert page.state.total == 2 and not page._due()
    now[0] += 0.5
    assert not page._due()
    now[0] += 0.5
    assert page._due()
    page._ticking = True  # one read at a time
    assert not page._due()


def test_a_tick_read_for_filters_since_changed_is_dropped_and_read_again(tmp_path):
    """The instructor filtered while a tick read the store: what it read is for a table no longer
    shown, so the table keeps the instructor's filter and the next tick reads again."""
    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada"), key_hash=OWNER)
    s = InstructorState(store=store)
    store.save(make_record(minutes=1, learner="Bob"), key_hash=OWNER)
    read = s.read_refresh()  # as a tick's thread, before the instructor's move
    s.learner = "ada"
    s.show_refresh(read)
    assert [r.learner for r in s.page_runs] == ["Ada"] and s.total == 1  # the move's own read
    again = s.read_refresh()
    assert again is not None  # not taken as read: the next tick reads it
    s.show_refresh(again)
    assert [r.learner for r in s.page_runs] == ["Ada"] and (s.matching, s.total) == (1, 2)
    assert s.read_refresh() is None


def test_a_page_drawn_while_the_store_cannot_be_read_says_so_and_counts_learners_once_it_answers(tmp_path):
    """The rest of the page (picture, exports, comparison, learners) is built once the browser drew
    the table; a store unreadable then left a traceback and no learners, exports or comparison."""
    from app.logins import STORE_UNREACHABLE

    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada", label="before"), key_hash=OWNER)
    page = InstructorPage(store)
    learner_runs = store.learner_runs
    store.learner_runs = lambda: (_ for _ in ()).throw(StoreError("Runs not read: the store is busy"))
    page._rest()
    assert page.state.store_problem == STORE_UNREACHABLE and page.learners.rows == []
    assert None not in (page.exports, page.comparison, page.learners) and len(page.below.objects) == 3
    store.learner_runs = learner_runs
    page._refresh()
    assert page.state.store_problem == "" and [r["learner"] for r in page.learners.rows] == ["Ada"]


def test_a_page_opened_while_the_store_cannot_be_read_says_so_and_fills_in_once_it_answers(tmp_path):
    """A newcomer reloaded the instructor page while PostgreSQL was stopped: Panel showed the
    StoreError's traceback (server paths included) or a blank page, which stayed after the store
    came back. Now the page opens empty, says why, and fills in by itself."""
    from app.logins import STORE_UNREACHABLE

    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada", label="before"), key_hash=OWNER)
    change_token = store.change_token
    store.change_token = lambda: (_ for _ in ()).throw(StoreError("Runs not read: the store cannot be reached"))
    page = InstructorPage(store)
    table = RunsTableView(state=page.state)
    page._rest()
    assert page.state.store_problem == STORE_UNREACHABLE and STORE_UNREACHABLE in unescape(table.count.object)
    assert page.state.total == 0 and len(page.below.objects) == 3
    store.change_token = change_token
    page._refresh()
    assert page.state.store_problem == "" and [r.label for r in page.state.page_runs] == ["before"]
    assert page.state.total == 1 and [r["learner"] for r in page.learners.rows] == ["Ada"]
    assert list(page.class_chart.source.data["label"]) == ["before"]


def test_a_store_held_by_another_session_is_said_busy_not_gone(tmp_path):
    """A read that waited out the store's busy timeout (``errno.EBUSY``: an operator's lock, a
    long import) is said as busy; one that could not reach the store as unreachable; both clear
    once the store answers."""
    import errno

    from app.logins import STORE_BUSY, STORE_UNREACHABLE

    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada", label="before"), key_hash=OWNER)
    page = InstructorPage(store)
    table = RunsTableView(state=page.state)
    busy = StoreError("Runs not read: the store is busy (another session held it longer than 8 s); try again.")
    busy.errno = errno.EBUSY
    token = store.change_token
    store.change_token = lambda: (_ for _ in ()).throw(busy)
    page._refresh()
    assert page.state.store_problem == STORE_BUSY and STORE_BUSY in unescape(table.count.object)
    page.state.store_problem = ""
    query, store.query = store.query, lambda *a, **k: (_ for _ in ()).throw(busy)
    page.state.learner = "Bob"  # a move read while still held: said the same way
    assert page.state.store_problem == STORE_BUSY
    store.change_token = lambda: (_ for _ in ()).throw(StoreError("Runs not read: the store cannot be reached."))
    page._refresh()
    assert page.state.store_problem == STORE_UNREACHABLE
    store.change_token, store.query = token, query
    page._refresh()
    assert page.state.store_problem == "" and STORE_BUSY not in unescape(table.count.object)


def test_while_the_store_cannot_be_read_the_page_says_so_keeps_its_table_and_refuses_exports(tmp_path):
    """A newcomer's outage: the open page kept "8 of 8 runs shown" and Export did nothing, without
    a word. Now the count line says the store cannot be reached and the table keeps what it last
    read; an export is refused with a note (one line in the log); all clears once it answers."""
    from app.instructor.page import ExportRefused
    from app.logins import STORE_UNREACHABLE

    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada", label="before"), key_hash=OWNER)
    page = InstructorPage(store)
    table = RunsTableView(state=page.state)
    page._rest()  # the picture, the comparison and the learners, as once the browser drew the page
    path, away = Path(store.url.database), tmp_path / "away"
    away.mkdir()
    files = [n for n in (path.name, f"{path.name}-wal", f"{path.name}-shm") if (path.parent / n).exists()]
    for name in files:
        (path.parent / name).rename(away / name)
    store.engine.dispose()  # no pooled connection still reading the moved file
    page._refresh()
    assert page.state.store_problem == STORE_UNREACHABLE
    assert STORE_UNREACHABLE in unescape(table.count.object)
    assert page.state.matching == 1 and len(page.state.page_runs) == 1  # what it last read
    # The instructor goes on filtering, sorting and ticking meanwhile: nothing raises (a traceback
    # in the log per move, before), the views keep what they showed and the page says why.
    shown = dict(page.class_chart.source.data)
    page.state.learner = "Bob"
    page.state.sort_by = "learner"
    page.state.select(page.state.page_runs[0].id)
    page.class_chart._update()
    assert page.state.store_problem == STORE_UNREACHABLE and page.state.page_runs[0].label == "before"
    assert dict(page.class_chart.source.data) == shown
    page.state.learner = ""
    with pytest.raises(ExportRefused):
        page.exports._download("json")
    assert "Not exported:" in page.exports.note.object
    for name in files:
        (away / name).rename(path.parent / name)
    store.engine.dispose()  # as a PostgreSQL back up is reconnected (pool_pre_ping)
    page._refresh()
    assert page.state.store_problem == "" and "role='alert'" not in table.count.object
    assert page.state.sort_by == "learner" and page.comparison.hint.object != ""  # read again, as they are now
    assert "Not exported:" not in page.exports.note.object
    assert json.loads(page.exports._download("json").read())["runs"][0]["label"] == "before"


def test_a_login_check_that_waits_out_a_held_store_is_said_busy_too(tmp_path, monkeypatch):
    """A newcomer held workbench_meta (where logins are kept) past the lock timeout: the page
    behind a password asked the login first, could not, and said "cannot be reached"; the log
    said busy. The login check's own error now decides what the page says, for its tick and for
    the instructor's moves."""
    import errno

    from app import logins as logins_module
    from app.logins import STORE_BUSY, Logins, SessionLogin

    store = sqlite_store(tmp_path / "runs")
    store.save(make_record(learner="Ada", label="before"), key_hash=OWNER)
    logins = Logins(store, "a password", "a cookie secret of some length", 86400.0)
    login = SessionLogin(logins, logins.login_id(logins.new_cookie()))
    page = InstructorPage(store, login=login)
    table = RunsTableView(state=page.state)
    busy = StoreError("Runs not read: the store is busy (another session held it longer than 8 s); try again.")
    busy.errno = errno.EBUSY

    def held(_store, _login_id):
        raise busy

    checked = logins_module.login_ended
    monkeypatch.setattr(logins_module, "login_ended", held)
    page._refresh()
    assert login.unknown and not login.ended
    assert page.state.store_problem == STORE_BUSY and STORE_BUSY in unescape(table.count.object)
    page.state.store_problem = ""
    page.state.learner = "Bob"  # a move: the guarded store asks the login first
    assert page.state.store_problem == STORE_BUSY
    monkeypatch.setattr(logins_module, "login_ended", checked)
    page._refresh()
    assert page.state.store_problem == "" and not login.unknown and login.error is None


def test_a_login_the_store_cannot_check_reads_as_unreachable_not_as_logged_out(store):
    from app.logins import STORE_UNREACHABLE, GuardedStore, LoginEnded, SessionLogin
    from app.store import StoreError

    class Undecided:  # app.logins.Logins whose store cannot say
        answer = None

        def ended(self, login_id, fresh=False):
            return self.answer

        def error(self, login_id):
            return None  # no reason given: said as unreachable

    logins = Undecided()
    login = SessionLogin(logins, "a login id")
    guarded = GuardedStore(store, login.holds_now)
    with pytest.raises(StoreError, match=re.escape(STORE_UNREACHABLE)):
        guarded.count()
    assert login.unknown and not login.ended
    logins.answer = False
    assert guarded.count() == 3 and not login.unknown
    logins.answer = True
    with pytest.raises(LoginEnded):
        guarded.count()
