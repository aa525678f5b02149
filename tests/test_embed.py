"""The embed without a browser: trusted origins, framing headers on every page, the message a
saved run posts, and learner text a course page passes in."""

from __future__ import annotations

import http.client
import math

import pytest
from store_helpers import sqlite_store
from workbench_server import start_server

from app import auth
from app.cli import main
from app.framing import CLOSED_HEADERS, EMBED_ORIGINS_ENV, framing_headers, parse_origin
from app.learner.embed import (
    DEFAULT_INSTANCE,
    EmbedPage,
    host_text,
    passed_in_html,
    recorded_event,
)
from app.learner.page import LearnerPage
from attention_core.records import TEXT_LIMITS


@pytest.mark.parametrize("text, origin", [
    ("https://course.example", "https://course.example"),
    ("HTTPS://Course.Example:443/", "https://course.example"),
    ("http://localhost:8000", "http://localhost:8000"), ("http://127.0.0.1:80", "http://127.0.0.1"),
    ("http://[::1]:8000", "http://[::1]:8000"), ("https://course.example:8443", "https://course.example:8443"),
])
def test_an_origin_is_written_as_a_browser_writes_it(text, origin):
    assert parse_origin(text) == origin


@pytest.mark.parametrize("text", [
    "*", "https://*.example", "course.example", "ftp://course.example", "https://", "https://a/b",
    "https://a?x=1", "https://a#x", "https://user@a", "https://a:99999", "null", "https://a b",
])
def test_anything_but_one_exact_origin_is_refused_naming_the_option(text):
    with pytest.raises(ValueError, match="--embed-origin .* is not an origin like https://course.example"):
        parse_origin(text)


@pytest.mark.parametrize("path", ["/", "/embed", "/embed/"])
def test_learner_pages_may_be_framed_by_themselves_and_the_trusted_origins_only(path):
    assert framing_headers(path, []) == {"Content-Security-Policy": "frame-ancestors 'self'"}
    assert framing_headers(path, ["https://a.example", "http://b:81"]) == {
        "Content-Security-Policy": "frame-ancestors 'self' https://a.example http://b:81"}


@pytest.mark.parametrize("path", ["/instructor", "/instructor/ws", "/login", "/logout", "/embedded",
                                  "/static/extensions/panel/panel.min.js", "/embed/autoload.js"])
def test_every_other_path_may_never_be_framed(path):
    assert framing_headers(path, ["https://a.example"]) == CLOSED_HEADERS


def test_cli_embed_origins_repeatable_or_from_the_environment_none_by_default(fake_server, monkeypatch, tmp_path):
    runs = ["--runs-dir", str(tmp_path)]
    assert main(["serve", *runs]) == 0
    assert main(["serve", *runs, "--embed-origin", "https://A.example/", "--embed-origin",
                 "http://localhost:8000", "--embed-origin", "https://a.example"]) == 0
    monkeypatch.setenv(EMBED_ORIGINS_ENV, "https://c.example, http://d:81")
    assert main(["serve", *runs]) == 0
    assert main(["serve", *runs, "--embed-origin", "https://e.example"]) == 0  # the option wins
    assert [c["embed_origins"] for c in fake_server] == [
        [], ["https://a.example", "http://localhost:8000"], ["https://c.example", "http://d:81"],
        ["https://e.example"]]


def test_cli_refuses_a_bad_embed_origin_before_serving(fake_server, capsys, tmp_path):
    assert main(["serve", "--runs-dir", str(tmp_path), "--embed-origin", "*"]) == 2
    assert "--embed-origin '*' is not an origin" in capsys.readouterr().err and fake_server == []


def _headers(url: str, path: str) -> tuple[int, http.client.HTTPMessage]:
    conn = http.client.HTTPConnection(url.split("//")[1].rstrip("/"), timeout=30)
    conn.request("GET", path)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status, response.headers


def test_served_pages_say_who_may_frame_them(tmp_path):
    running = start_server(tmp_path / "runs", tmp_path / "server.log", "--embed-origin",
                           "http://127.0.0.1:9", "--embed-origin", "https://course.example",
                           env={auth.PASSWORD_ENV: "pw"})
    try:
        for path in ("/", "/?runs=a", "/embed", "/embed?learner=x&instanceId=y"):
            status, headers = _headers(running.url, path)
            assert status == 200, path
            assert headers.get_all("Content-Security-Policy") == [
                "frame-ancestors 'self' http://127.0.0.1:9 https://course.example"], path
            assert headers.get("X-Frame-Options") is None, path
        for path in ("/instructor", "/login", "/instructor/autoload.js?bokeh-autoload-element=p", "/nowhere"):
            status, headers = _headers(running.url, path)
            assert status in (200, 302, 403, 404), path
            assert headers.get_all("Content-Security-Policy") == ["frame-ancestors 'none'"], path
            assert headers.get("X-Frame-Options") == "DENY", path
        assert "Course pages that may frame" in running.log.read_text()
    finally:
        running.stop()


@pytest.mark.parametrize("uri", ["/embed", "/embed?learner=Ada", "/embed/ws", "/embed/autoload.js?x=1"])
def test_the_embed_is_a_guest_page(uri):
    assert auth.is_guest_path(uri)


@pytest.fixture
def embed(tmp_path):
    page = LearnerPage(store=sqlite_store(tmp_path / "runs"), map_size=176)
    return EmbedPage(page=page, trusted_origins=["https://course.example"])


def test_every_saved_run_and_only_a_saved_run_becomes_one_message(embed):
    state = embed.page.state
    posted = []
    embed.bridge.param.watch(lambda e: posted.append(e.new), "message")
    state.prediction = "Token 2 cannot read token 3."
    first = state.save_run()
    assert state.save_run() is None  # the same run again: nothing saved, nothing posted
    state.failure_mode = "mask_after_softmax"
    second = state.save_run()
    state.attach_explanation([first.id], "rows sum to 1")  # not a new run
    state.restore_runs([first.id, second.id])  # neither
    assert [m["run"]["id"] for m in posted] == [first.id, second.id]
    assert posted[1] == {
        "type": "explorable-event", "instanceId": DEFAULT_INSTANCE, "event": "experiment-recorded",
        "run": {"id": second.id, "created_at": second.created_at, "failure_mode": "mask_after_softmax",
                "causal": True, "total_future_weight": 0.0, "min_row_sum": second.min_row_sum,
                "failed_checks": ["mask", "row_sums"]}}
    assert math.isclose(posted[1]["run"]["min_row_sum"], 0.000335, rel_tol=0.01)


def test_with_no_trusted_origin_nothing_is_posted(tmp_path):
    embed = EmbedPage(page=LearnerPage(store=sqlite_store(tmp_path / "runs"), map_size=176))
    embed.page.state.prediction = "p"
    assert embed.page.state.save_run() is not None
    assert embed.bridge.message == {} and embed.bridge.trusted_origins == []


def test_the_event_carries_the_instance_the_host_named(tmp_path):
    from store_helpers import make_record

    record = make_record("no_mask")
    event = recorded_event(record, "lesson-7-workbench")
    assert event["instanceId"] == "lesson-7-workbench" and event["run"]["failure_mode"] == "no_mask"
    assert event["run"]["failed_checks"] == list(record.failed_checks) and "url" not in event


def test_text_from_the_course_page_is_cut_to_its_limit_and_says_so(embed):
    long = "p" * (TEXT_LIMITS["prediction"] + 5)
    embed.take_host_text({"learner": "<b>x</b>", "prediction": long, "label": "ignored", "notes": 3})
    state = embed.page.state
    assert state.learner == "<b>x</b>" and state.prediction == "p" * TEXT_LIMITS["prediction"]
    assert state.label == ""
    assert embed.host_message == (f"The course page passed a prediction of {len(long)} characters; "
                                  f"the first {TEXT_LIMITS['prediction']} were kept (the limit).")
    assert embed.bridge.received == {}  # taken, so the same text sent again is taken again
    embed.take_host_text({"learner": "L" * 101})
    assert state.learner == "L" * 100 and "learner of 101 characters" in embed.host_message
    assert host_text("short", "learner") == ("short", "")
    # Bidirectional overrides would mirror the rest of the line ("Prediction" read "noitciderP").
    assert host_text("\u202eAda\u2066 L\x07\n", "learner") == ("Ada L\n", "")
    embed.take_host_text({"learner": "\u202eevil", "prediction": "\u202eseen"})
    assert (state.learner, state.prediction) == ("evil", "seen")


def test_what_the_host_passed_is_shown_as_text_never_html():
    shown = passed_in_html("<b>x</b>", "<img src=x onerror=alert(1)>")
    assert "<b>x</b>" not in shown and "&lt;b&gt;x&lt;/b&gt;" in shown
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    assert "Prediction and saved runs" in passed_in_html("", "  ")


def test_open_links_keep_the_query_parameters_they_are_given(embed):
    from app.learner.runs import runs_table_html

    state = embed.page.state
    state.prediction = "p"
    record = state.save_run()
    assert f"href='?run={record.id}&amp;runs={record.id}'" in runs_table_html(state.saved)
    kept = runs_table_html(state.saved, {"instanceId": "lesson <10>"})
    assert f"href='?instanceId=lesson+%3C10%3E&amp;run={record.id}&amp;runs={record.id}'" in kept


def test_grids_made_after_the_first_paint_are_in_the_embed_too(embed):
    """Matrix mode with a batch of two and W_O makes grids the page did not have at first
    (X item 2, W_Q, W_K, W_V, W_O): the embed lays them out where its first ones are (it once
    laid out a copy of the first paint's grids, so none of these could be edited)."""
    from bokeh.document import Document

    layout = embed.__panel__()
    layout.get_root(Document())
    embed.page.state.param.update(input_mode="matrices", batch_size=2, use_values=True, use_w_o=True)
    shown = [g for g in embed.page.inputs.grids if g.visible]
    assert any("item 2" in g.caption for g in shown), [g.caption for g in shown]
    assert any(group[0] == "W_O" for g in shown for group in g.groups), [g.groups for g in shown]
    in_embed = [o for o in _all_objects(layout) if o in shown or o is embed.page.inputs.grid_column]
    assert embed.page.inputs.grid_column in in_embed
    assert all(any(g is o for o in embed.page.inputs.grid_column.objects) for g in shown)


def _all_objects(layout):
    """Every Panel object inside ``layout``, depth first."""
    for o in getattr(layout, "objects", []):
        yield o
        yield from _all_objects(o)
