"""The operator's log (issue 25): a real ``serve`` driven over HTTP and in Chromium, then its
stderr read back: one ``key=value`` line per session opened and closed, save, explanation,
import, export, login, logout, failed login and error, with the client's address (the
forwarded one only under ``--use-xheaders``), and never a learner's text nor a password."""

from __future__ import annotations

import http.client
import logging
import re
import urllib.parse
import uuid
from types import SimpleNamespace

import panel as pn
import pytest
from playwright.sync_api import expect
from store_helpers import make_record
from workbench_server import (
    NO_PASSWORD,
    open_instructor,
    open_learner_page,
    save_run,
    start_server,
    wait_until,
    watched,
)

from app import oplog
from app.auth import PASSWORD_ENV
from app.logins import LoginEnded

STAMP = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
SESSION = r"session=(?P<session>[0-9a-f]{12})"


def request(server, method: str, path: str, *, headers: dict | None = None, body: dict | None = None):
    """One HTTP request to ``server``; returns the response (its body read)."""
    port = urllib.parse.urlsplit(server.url).port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = urllib.parse.urlencode(body) if body is not None else None
    headers = {**(headers or {}), **({"Content-Type": "application/x-www-form-urlencoded"} if body else {})}
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def line(server, pattern: str, timeout: float = 20.0) -> re.Match:
    """The first log line matching ``pattern`` (after the time stamp), waited for."""
    compiled = re.compile(STAMP + " " + pattern + "$", re.MULTILINE)
    return wait_until(lambda: compiled.search(server.log.read_text()), f"a log line {pattern!r}", timeout=timeout)


def cookie_of(response) -> str:
    return "; ".join(c.split(";", 1)[0] for c in response.headers.get_all("Set-Cookie") or [])


def test_logins_sessions_and_their_closing_name_the_forwarded_client_under_use_xheaders(tmp_path):
    password, wrong, typed_user = f"pw-{uuid.uuid4().hex}", f"wrong-{uuid.uuid4().hex}", f"mallory{uuid.uuid4().hex}"
    # Sessions dropped 3 s after they were left, not a minute: the closing line comes soon.
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--use-xheaders",
                          "--unused-session-lifetime", "3", env={PASSWORD_ENV: password})
    try:
        # The proxy appends the address it saw last: that one is the client.
        assert request(server, "GET", "/", headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.9"}).status == 200
        opened = line(server, rf"INFO session opened page=learner {SESSION} client=203\.0\.113\.9")
        forwarded = {"X-Forwarded-For": "203.0.113.7"}
        failed = request(server, "POST", "/login", headers=forwarded, body={"username": typed_user, "password": wrong})
        assert failed.status == 302 and not cookie_of(failed).count("user=")
        line(server, r"WARNING login failed client=203\.0\.113\.7")
        ok = request(server, "POST", "/login", headers=forwarded, body={"username": "instructor", "password": password})
        assert ok.status == 302
        line(server, r"INFO login user=instructor client=203\.0\.113\.7")
        logged_in = {"Cookie": cookie_of(ok), "X-Forwarded-For": "203.0.113.8"}
        assert request(server, "GET", "/instructor", headers=logged_in).status == 200
        line(server, rf"INFO session opened page=instructor {SESSION} client=203\.0\.113\.8")
        assert request(server, "GET", "/embed", headers={"X-Forwarded-For": "203.0.113.10"}).status == 200
        line(server, rf"INFO session opened page=embed {SESSION} client=203\.0\.113\.10")
        # A refused request as key=value fields (Tornado's log_function), its query string left out.
        missing = request(server, "GET", "/no-such-page?learner=x", headers={"X-Forwarded-For": "203.0.113.11"})
        assert missing.status == 404
        line(server, r"WARNING request refused status=404 method=GET path=/no-such-page "
                     r"client=203\.0\.113\.11 ms=[\d.]+")
        # Bokeh's refusal of a websocket from an origin not allowed, in the same format too.
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                   "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": "http://evil.example"}
        assert request(server, "GET", "/ws", headers=upgrade).status == 403
        line(server, r"ERROR Refusing websocket connection from Origin 'http://evil\.example';\s+"
                     r"use --allow-websocket-origin=evil\.example .*")
        assert not re.search(r"^((WARNING|ERROR|INFO):(tornado|bokeh)|\d{3} (GET|POST) )|\d{3} (GET|POST) /",
                             server.log.read_text(), re.MULTILINE)
        assert request(server, "GET", "/logout", headers=logged_in).status == 200
        line(server, r"INFO logout client=203\.0\.113\.8")
        # A page never connected: Bokeh drops its session after the unused-session lifetime.
        closed = line(server, rf"INFO session closed page=learner session={opened['session']} "
                              r"client=203\.0\.113\.9 open_s=(?P<open>\d+)", timeout=60)
        assert 3 <= int(closed["open"]) <= 60
        log = server.log.read_text()
        for secret in (password, wrong, typed_user):
            assert secret not in log
        assert "Traceback" not in log, log
    finally:
        server.stop()


def test_without_use_xheaders_the_socket_peer_is_logged_never_the_header(tmp_path):
    server = start_server(tmp_path / "runs", tmp_path / "server.log", env={PASSWORD_ENV: "pw"})
    try:
        spoofed = {"X-Forwarded-For": "203.0.113.66", "X-Real-IP": "203.0.113.67"}
        assert request(server, "GET", "/", headers=spoofed).status == 200
        line(server, rf"INFO session opened page=learner {SESSION} client=127\.0\.0\.1")
        request(server, "POST", "/login", headers=spoofed, body={"username": "instructor", "password": "no"})
        line(server, r"WARNING login failed client=127\.0\.0\.1")
        assert "203.0.113" not in server.log.read_text()
    finally:
        server.stop()


def test_saves_explanations_imports_and_exports_are_logged_by_id_never_by_learner_text(tmp_path, page):
    tag = uuid.uuid4().hex
    name, label, prediction = f"Learner {tag}", f"label-{tag}", f"prediction {tag}"
    explanation = f"explanation {tag}"
    uploaded = make_record(learner=f"Uploaded {tag}", label=f"upload-{tag}")
    upload = tmp_path / f"runs of {tag}.json"
    upload.write_text(uploaded.to_json(), encoding="utf-8")
    server = start_server(tmp_path / "runs", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, server)
        open_learner_page(page, server.url)
        opened = line(server, rf"INFO session opened page=learner {SESSION} client=127\.0\.0\.1")
        page.get_by_role("button", name="Worked row (seed 003)").click()
        page.get_by_label("Learner").fill(name)
        save_run(page, label, prediction)
        [saved] = server.records()
        line(server, rf"INFO run saved run={saved['id']} mode=correct T=3 store=sqlite "
                     rf"session={opened['session']}")
        box = page.get_by_role("checkbox", name=re.compile(r"^Run 1\b"))
        box.click()
        page.get_by_label("Explanation", exact=True).fill(explanation)
        page.get_by_role("button", name="Save explanation").click()
        expect(page.get_by_role("status").filter(has_text="Explanation saved to run 1.")).to_be_visible()
        line(server, rf"INFO explanation attached run={saved['id']} store=sqlite session={opened['session']}")

        open_instructor(page, server)
        instructor = line(server, rf"INFO session opened page=instructor {SESSION} client=127\.0\.0\.1")
        page.locator("input[type=file]").set_input_files(str(upload))
        expect(page.get_by_test_id("import-summary")).to_contain_text("imported 1 run")
        line(server, r"INFO import source=upload files=1 imported=1 skipped=0 refused=0 invalid=0 unread=0 held_back=0"
                     rf" session={instructor['session']}")
        with page.expect_download():
            page.get_by_role("button", name="Export JSON").click()
        line(server, rf"INFO export format=json runs=2 source=instructor session={instructor['session']}")
        watch.assert_clean()
        log = server.log.read_text()
        assert tag not in log, log  # in the name, label, prediction, explanation, upload and its file name
        assert "Traceback" not in log, log
    finally:
        server.stop()


def test_an_unreachable_store_is_logged_as_an_error(tmp_path, postgres_server):
    import psycopg

    url = postgres_server.new_database()
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--store", url, env=NO_PASSWORD)
    try:
        assert request(server, "GET", "/").status == 200  # the pool holds a connection now
        database = url.rsplit("/", 1)[-1]
        with psycopg.connect(f"host=127.0.0.1 port={postgres_server.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')  # a name made by the fixture
        assert request(server, "GET", f"/?run={make_record().id}").status == 200  # the page says so
        line(server, r'ERROR store error store=postgresql error="Runs not read: the store \S+ cannot be reached '
                     rf'\(.*\)\." {SESSION}')
    finally:
        server.stop()


def test_an_exception_in_a_page_callback_is_logged_with_its_traceback(monkeypatch, capsys):
    oplog.configure()  # as serve does (undone after the test by conftest)
    # Panel's own path for a callback's exception (pn.state.execute outside a server runs it now).
    monkeypatch.setattr(pn.config, "exception_handler", None)
    monkeypatch.setattr(pn.state, "on_session_created", lambda callback: None)  # no hooks left behind
    monkeypatch.setattr(pn.state, "on_session_destroyed", lambda callback: None)
    oplog.log_sessions_and_errors()

    def broken() -> None:
        raise ZeroDivisionError("a bug in a callback")

    pn.state.execute(broken)
    err = capsys.readouterr().err
    assert re.search(STAMP + r" ERROR callback failed error=ZeroDivisionError\nTraceback", err, re.MULTILINE), err
    assert "in broken" in err and "ZeroDivisionError: a bug in a callback" in err

    def after_logout() -> None:
        raise LoginEnded("this instructor login has ended")

    pn.state.execute(after_logout)  # refused on purpose: one line, no traceback
    err = capsys.readouterr().err
    assert re.fullmatch(STAMP + r" WARNING callback refused error=LoginEnded\n", err), err

    # An export clicked after logout: Panel's handling of the browser's click logs a failed
    # callback with its traceback itself, before the handler above; a refusal is still one line.
    export = pn.widgets.FileDownload(callback=after_logout, filename="class-runs.csv")
    panel_lines = []  # Panel's own handler writes to the stderr it found at import, not capsys's
    heard = logging.Handler()
    heard.emit = panel_lines.append
    logging.getLogger("panel.reactive").addHandler(heard)
    try:
        with pytest.raises(LoginEnded):
            export._process_events({"_clicks": 1})  # what a click from the browser runs
    finally:
        logging.getLogger("panel.reactive").removeHandler(heard)
    assert panel_lines == [], [r.getMessage() for r in panel_lines]


def test_a_page_that_fails_to_build_leaves_every_later_line_logged(capsys):
    """Panel shows a page whose building raised as an error page made ``servable()``, and
    ``servable()`` in a session turns every stream handler of the ``bokeh`` logger down to
    WARNING (panel/viewable.py): a handler shared with the workbench's loggers went silent
    below WARNING for the rest of the process (no more sessions, saves or stopping lines)."""
    from bokeh.document import Document
    from panel.io.state import set_curdoc

    oplog.configure()  # as serve does (undone after the test by conftest)
    doc = Document()
    session = SimpleNamespace(id="a-session", request=SimpleNamespace(arguments={}, cookies={}, headers={}))
    doc._session_context = lambda: session  # a served session's document, as far as Panel asks
    with set_curdoc(doc):
        pn.pane.Markdown("the error page").servable()
    oplog.event(oplog.logger("sessions"), "session opened", page="learner")
    err = capsys.readouterr().err
    assert re.search(STAMP + r" INFO session opened page=learner$", err, re.MULTILINE), err


def test_a_failed_request_is_an_error_line_and_an_answered_one_no_line(caplog):
    request = SimpleNamespace(method="POST", path="/instructor/export.csv", remote_ip="203.0.113.5",
                              request_time=lambda: 0.0125)
    with caplog.at_level(logging.INFO, logger=oplog.LOGGER):
        for status in (200, 302, 500):
            oplog.request_refused_or_failed(SimpleNamespace(get_status=lambda status=status: status, request=request))
        # The health check's 503s, asked every few seconds, are not logged (app/health.py).
        oplog.request_refused_or_failed(SimpleNamespace(get_status=lambda: 503, request=request, answers_logged=False))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "request failed status=500 method=POST path=/instructor/export.csv client=203.0.113.5 ms=12.5")]


def test_fields_quote_what_would_split_a_line_and_leave_out_none():
    assert oplog.fields(run="abc", T=3, store=None, error='Run not saved: "x"\nnext') == \
        ' run=abc T=3 error="Run not saved: \\"x\\"\\nnext"'
    assert oplog.fields(label="") == ' label=""'


def test_serve_takes_a_log_level():
    from app.cli import build_parser

    assert build_parser().parse_args(["serve"]).log_level == "INFO"
    assert build_parser().parse_args(["serve", "--log-level", "warning"]).log_level == "WARNING"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--log-level", "chatty"])
