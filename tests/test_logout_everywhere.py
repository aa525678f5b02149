"""Logout that logs out (issue 26), for real: two ``serve`` processes on one store sharing a
``--cookie-secret-file`` and a password, driven in Chromium and over HTTP.

A second instructor tab held open across *Log out* (on the same process, and on the other one)
gets nothing afterwards; a copy of the old cookies opens nothing; a server started with another
password refuses logins made with the old one; failed logins from one address are answered 429.
"""

from __future__ import annotations

import html
import http.client
import re
import urllib.parse

import pytest
from playwright.sync_api import expect
from store_helpers import make_record
from workbench_server import open_instructor, start_server, wait_until

from app.auth import PASSWORD_ENV, PASSWORD_FILE_ENV

PASSWORD = "lecture hall"
STAMP = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


@pytest.fixture(scope="module")
def class_servers(tmp_path_factory):
    """Two servers on one SQLite store, one cookie secret, one password; the store holds one run."""
    tmp = tmp_path_factory.mktemp("logout")
    secret = tmp / "cookie-secret"
    secret.write_text("one secret for every server of the class\n")
    secret.chmod(0o600)
    options = ("--cookie-secret-file", str(secret), "--use-xheaders")
    env = {PASSWORD_ENV: PASSWORD, PASSWORD_FILE_ENV: None}
    one = start_server(tmp / "runs", tmp / "one.log", *options, env=env)
    two = start_server(tmp / "runs", tmp / "two.log", *options, env=env, store=one.store_url)
    with one.store() as store:
        store.save(make_record(learner="Ada", label="before logout"))
    yield one, two, secret
    one.stop()
    two.stop()


def port_of(server) -> int:
    return urllib.parse.urlsplit(server.url).port


def request(server, method: str, path: str, *, headers: dict | None = None, body: dict | None = None):
    """One HTTP request to ``server``; the response, its body read into ``response.text``."""
    conn = http.client.HTTPConnection("127.0.0.1", port_of(server), timeout=60)
    data = urllib.parse.urlencode(body) if body is not None else None
    headers = {**(headers or {}), **({"Content-Type": "application/x-www-form-urlencoded"} if body else {})}
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    response.text = response.read().decode("utf-8")
    conn.close()
    return response


def cookie_header(cookies: list[dict]) -> str:
    return "; ".join(f"{c['name']}={c['value']}" for c in cookies)


def log_in(page, server) -> None:
    page.goto(server.url + "instructor")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_test_id("runs-total")).to_be_visible(timeout=30_000)


def log_out(page) -> None:
    page.get_by_role("link", name="Log out").click()
    expect(page.get_by_role("heading", name="Logged out")).to_be_visible()


def test_tabs_held_open_across_log_out_on_this_server_and_the_other_get_nothing_more(class_servers, browser):
    one, two, _ = class_servers
    context = browser.new_context()
    try:
        tab, held, other = context.new_page(), context.new_page(), context.new_page()
        sockets, downloads, leaving = [], [], []
        held.on("websocket", lambda socket: sockets.append(socket))
        held.on("download", lambda download: downloads.append(download))
        held.on("dialog", lambda dialog: (leaving.append(dialog.type), dialog.dismiss()))
        log_in(tab, one)
        open_instructor(held, one)  # the same login, on this process
        open_instructor(other, two)  # and on the other one
        expect(held.get_by_test_id("runs-shown")).to_have_text("1")
        kept = context.cookies()  # a copy of the login, as a thief would keep it
        assert request(two, "GET", "/instructor", headers={"Cookie": cookie_header(kept)}).status == 200
        # The held tab will not follow the server to the login page (a browser that ignores it):
        # what it gets afterwards is only what the server still sends.
        held.evaluate("addEventListener('beforeunload', event => { event.preventDefault(); event.returnValue = '' })")
        held.get_by_test_id("runs-count").click()  # a user's gesture, without which Chromium never asks
        log_out(tab)
        expect(other).to_have_url(re.compile(r"/login"))  # the other server's tab, sent to log in
        expect(other.get_by_role("button", name="Log in")).to_be_visible()
        expect(held.get_by_test_id("logged-out")).to_be_visible()
        expect(held.get_by_role("alert")).to_contain_text("This instructor login has ended")
        wait_until(lambda: "beforeunload" in leaving, "the held tab was sent to the login page", page=held)
        (socket,) = [s for s in sockets if urllib.parse.urlsplit(s.url).path.endswith("/ws")]
        wait_until(socket.is_closed, "the server closed the held tab's websocket", page=held)
        # No filter, no export, no table is left to use; a run saved now never reaches it.
        with one.store() as store:
            store.save(make_record(minutes=1, learner="Bob", label="after logout"))
        for gone in (held.get_by_label("Learner contains"), held.get_by_role("button", name="Export CSV"),
                     held.locator(".tabulator-row"), held.get_by_text("after logout")):
            expect(gone).to_have_count(0)
        assert downloads == []
        for server in (one, two):  # the copied cookies open nothing on either server
            refused = request(server, "GET", "/instructor", headers={"Cookie": cookie_header(kept)})
            assert refused.status == 302 and "/login" in refused.getheader("Location")
    finally:
        context.close()


def test_a_server_started_with_a_new_password_refuses_logins_made_with_the_old(class_servers, tmp_path):
    one, _, secret = class_servers
    login = request(one, "POST", "/login", body={"username": "instructor", "password": PASSWORD})
    cookie = "; ".join(c.split(";", 1)[0] for c in login.headers.get_all("Set-Cookie"))
    assert request(one, "GET", "/instructor", headers={"Cookie": cookie}).status == 200
    changed = start_server(tmp_path / "runs", tmp_path / "changed.log", "--cookie-secret-file", str(secret),
                           env={PASSWORD_ENV: "a new password", PASSWORD_FILE_ENV: None}, store=one.store_url)
    try:
        refused = request(changed, "GET", "/instructor", headers={"Cookie": cookie})
        assert refused.status == 302 and "/login" in refused.getheader("Location")
        login = request(changed, "POST", "/login", body={"username": "instructor", "password": "a new password"})
        cookie = "; ".join(c.split(";", 1)[0] for c in login.headers.get_all("Set-Cookie"))
        assert request(changed, "GET", "/instructor", headers={"Cookie": cookie}).status == 200
        # ... and the old server, still on the old password, refuses the new login.
        assert request(one, "GET", "/instructor", headers={"Cookie": cookie}).status == 302
    finally:
        changed.stop()


def test_failed_logins_from_one_address_are_answered_429_and_logged(class_servers):
    _, two, _ = class_servers
    guesser, other = {"X-Forwarded-For": "203.0.113.5"}, {"X-Forwarded-For": "203.0.113.6"}
    for n in range(5):
        failed = request(two, "POST", "/login", headers=guesser, body={"username": "instructor", "password": f"g{n}"})
        assert failed.status == 302 and "error=" in failed.getheader("Location")
    for password in ("g5", PASSWORD):  # waiting: the right password too
        limited = request(two, "POST", "/login", headers=guesser, body={"username": "instructor", "password": password})
        assert limited.status == 429 and limited.getheader("Retry-After") == "60"
        assert "Too many failed logins from your address: try again in 1 minute." in limited.text
        assert "<title>Instructor login · Self-attention workbench</title>" in limited.text
    ok = request(two, "POST", "/login", headers=other, body={"username": "instructor", "password": PASSWORD})
    assert ok.status == 302 and "instructor_login=" in " ".join(ok.headers.get_all("Set-Cookie"))  # logged in
    pattern = re.compile(STAMP + r" WARNING login limited client=203\.0\.113\.5 retry_after_s=60$", re.MULTILINE)
    wait_until(lambda: pattern.search(two.log.read_text()), "the log line of the limited login")
    assert len(pattern.findall(two.log.read_text())) == 1  # once per wait, not per refusal
    assert PASSWORD not in two.log.read_text()


def test_while_the_store_cannot_be_reached_a_login_is_answered_503_saying_so(tmp_path):
    """Not sent back to the login page, where the instructor would log in and land again with no
    word why (a newcomer's outage); the page opens again once the store answers."""
    from app.logins import RETRY_CHECK_S, STORE_CANNOT_CHECK_LOGIN

    server = start_server(tmp_path / "runs", tmp_path / "server.log", env={PASSWORD_ENV: PASSWORD,
                                                                         PASSWORD_FILE_ENV: None})
    try:
        store = tmp_path / "runs" / "runs.db"
        moved = tmp_path / "away"
        moved.mkdir()
        login = request(server, "POST", "/login", body={"username": "instructor", "password": PASSWORD})
        cookie = "; ".join(c.split(";", 1)[0] for c in login.headers.get_all("Set-Cookie"))
        for name in (store.name, f"{store.name}-wal", f"{store.name}-shm"):  # the store gone
            if (store.parent / name).exists():
                (store.parent / name).rename(moved / name)
        refused = request(server, "GET", "/instructor", headers={"Cookie": cookie})
        assert refused.status == 503, (refused.status, refused.getheader("Location"))
        assert STORE_CANNOT_CHECK_LOGIN in html.unescape(refused.text)
        # A page that asks again by itself, and tells a client when to.
        assert refused.getheader("Retry-After") == str(RETRY_CHECK_S)
        assert refused.getheader("Content-Type") == "text/html; charset=utf-8"
        assert f'<meta http-equiv="refresh" content="{RETRY_CHECK_S}">' in refused.text
        for name in [p.name for p in moved.iterdir()]:  # and back
            (moved / name).rename(store.parent / name)
        assert request(server, "GET", "/instructor", headers={"Cookie": cookie}).status == 200
    finally:
        server.stop()
