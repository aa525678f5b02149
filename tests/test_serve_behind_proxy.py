"""Two real ``serve`` processes as a proxy would put them: under one ``--prefix``, signing logins
with one ``--cookie-secret-file``, so the instructor logs in on one and is let in by the other."""

from __future__ import annotations

import http.client
import re
from urllib.parse import urlencode, urljoin, urlsplit

from workbench_server import start_server

from app.auth import PASSWORD_ENV
from app.logins import LOGIN_COOKIE


def request(url: str, method: str = "GET", body: str | None = None, headers: dict | None = None):
    """One request, redirects not followed: ``(status, headers, body text)``."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body,
                           headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_a_login_on_one_server_holds_on_the_other_under_a_prefix(tmp_path):
    secret = tmp_path / "cookie-secret"
    secret.write_text("one secret for every server of the class\n")
    secret.chmod(0o600)
    password = tmp_path / "password"
    password.write_text("lecture hall\n")
    password.chmod(0o600)
    options = ("--prefix", "/class", "--cookie-secret-file", str(secret),
               "--instructor-password-file", str(password), "--use-xheaders",
               "--allow-websocket-origin", "class.example.org")
    servers = []
    try:
        for n in (1, 2):
            servers.append(start_server(tmp_path / f"runs{n}", tmp_path / f"server{n}.log", *options,
                                        env={PASSWORD_ENV: None}))
        one, two = (server.url.rstrip("/") for server in servers)

        # The learner page is below the prefix, open, and every local script and stylesheet it
        # names is found there (not at the server's root, which a proxy does not forward).
        status, _, page = request(f"{two}/class/")
        assert status == 200 and "<title>Self-attention workbench</title>" in page
        assets = {urljoin(f"{two}/class/", src) for src in re.findall(r'(?:src|href)="([^"]+\.(?:js|css))', page)
                  if not src.startswith(("http:", "https:", "//"))}
        assert any("static/extensions/panel" in a for a in assets), assets
        for asset in assets:
            assert urlsplit(asset).path.startswith("/class/"), asset
            assert request(asset)[0] == 200, asset

        # The embed may be framed by the course site under the prefix too; the instructor page not.
        status, headers, _ = request(f"{two}/class/embed")
        assert status == 200 and headers["Content-Security-Policy"].startswith("frame-ancestors 'self'")
        assert "X-Frame-Options" not in headers
        assert request(f"{two}/class/login")[1]["X-Frame-Options"] == "DENY"

        # Not logged in: the instructor page sends to the login below the prefix.
        status, headers, _ = request(f"{two}/class/instructor")
        assert status == 302
        assert urlsplit(urljoin(f"{two}/class/instructor", headers["Location"])).path == "/class/login"
        status, _, login = request(f"{two}/class/login")
        (action,) = re.findall(r'<form action="([^"]+)"', login)
        assert status == 200 and urlsplit(urljoin(f"{two}/class/login", action)).path == "/class/login"

        # Logged in on server 1, let in by server 2 with the same cookie.
        status, headers, _ = request(
            f"{one}/class/login", "POST", urlencode({"username": "instructor", "password": "lecture hall"}),
            {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 302, headers
        cookies = "; ".join(c.split(";", 1)[0] for c in headers.get_all("Set-Cookie")
                            if c.startswith(("user=", "id_token=", f"{LOGIN_COOKIE}=")))
        assert "user=" in cookies and f"{LOGIN_COOKIE}=" in cookies  # the login and its id (app.logins)
        status, headers, page = request(f"{two}/class/instructor", headers={"Cookie": cookies})
        assert status == 200, (status, headers.get("Location"))
        assert "Instructor" in page
        status, headers, _ = request(f"{two}/class/instructor/?x=1", headers={"Cookie": cookies})
        assert (status, headers["Location"]) == (302, "/class/instructor?x=1")
        # The instructor page's links, relative to it, stay below the prefix.
        from store_helpers import make_record

        from app.instructor.table import open_link

        record = make_record()
        (href,) = re.findall(r'href="([^"]+)"', open_link(record))
        assert urljoin(f"{two}/class/instructor", href) == f"{two}/class/?run={record.id}"
    finally:
        for server in servers:
            server.stop()


def test_the_pages_under_a_prefix_load_everything_from_below_it(tmp_path, page):
    """In a browser: the learner page, the embed and the instructor page at /class/… load no
    script or stylesheet from outside the prefix (Panel's Location, once synced, sent the
    instructor page's stylesheets to /static/…, a 404 behind a proxy)."""
    from playwright.sync_api import expect
    from workbench_server import NO_PASSWORD, PageWatch, open_learner_page

    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--prefix", "/class", env=NO_PASSWORD)
    try:
        watch = PageWatch(origin=server.url.rstrip("/"))
        watch.attach(page)
        failed = []
        page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
        open_learner_page(page, server.url + "class/")
        page.goto(server.url + "class/embed")
        expect(page.get_by_label("Tokens", exact=True)).to_be_visible(timeout=30_000)
        page.goto(server.url + "class/instructor")
        expect(page.get_by_test_id("runs-total")).to_be_visible(timeout=30_000)
        page.wait_for_load_state("networkidle")
        assert failed == []
        watch.assert_clean()  # the tab's icon too: Bokeh answers /favicon.ico only at the top
        assert page.request.get(server.url + "class/favicon.ico").ok
    finally:
        server.stop()
