"""Serving: who may open the instructor page, when serve refuses to start, --num-procs."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time

import pytest
from workbench_server import ROOT, start_server

from app import auth
from app.cli import main
from app.store import sqlite_url


@pytest.mark.parametrize("address, loopback", [
    ("localhost", True), ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("", False), ("192.168.1.20", False), ("class.example", False),
])
def test_loopback_addresses(address, loopback):
    assert auth.is_loopback(address) is loopback


@pytest.mark.parametrize("address, port, host, origins", [
    ("::1", 5006, "[::1]", ["[::1]:5006", "localhost:5006", "127.0.0.1:5006"]),
    ("[::1]", 80, "[::1]", ["[::1]:80", "localhost:80", "127.0.0.1:80"]),
    ("127.0.0.1", 5006, "127.0.0.1", ["127.0.0.1:5006", "localhost:5006"]),
    ("localhost", 7, "localhost", ["localhost:7", "127.0.0.1:7"]),
    ("0.0.0.0", 5006, "0.0.0.0", ["*"]), ("::", 5006, "[::]", ["*"]),
])
def test_urls_and_websocket_origins_bracket_ipv6(address, port, host, origins):
    assert auth.url_host(address) == host
    assert auth.websocket_origins(address, port) == origins


def test_exposure_needs_a_network_address_and_no_password_and_no_explicit_opt_out():
    assert auth.exposure_problem("localhost", None, False) is None
    assert auth.exposure_problem("0.0.0.0", "pw", False) is None
    assert auth.exposure_problem("0.0.0.0", None, True) is None
    message = auth.exposure_problem("0.0.0.0", "", False)
    assert "0.0.0.0" in message and "--instructor-password" in message and auth.PASSWORD_ENV in message
    assert "--no-instructor-auth" in message and "every learner's runs" in message


def test_serve_options_use_panels_basic_auth_for_the_instructor_only():
    assert auth.serve_options(None) == {} and auth.serve_options("") == {}
    options = auth.serve_options("README.md")  # a file path is still just a password
    # The login form asks credentials_match (tests/test_upstream.py checks Panel's form calls it).
    assert auth.credentials_match("README.md", "instructor", "README.md")
    assert not auth.credentials_match("README.md", "instructor", "readme.md")
    assert not auth.credentials_match("README.md", "x", "README.md")
    assert "basic_auth" not in options  # Panel would build its own provider, matching whole URIs
    assert options["oauth_guest_endpoints"] == ["/", "/embed"]
    assert len(options["cookie_secret"]) >= 32
    assert options["cookie_secret"] != auth.serve_options("x")["cookie_secret"]
    assert auth.LOGIN_TEMPLATE.is_file()


def test_cli_refuses_a_network_address_without_a_password_and_says_why(fake_server, capsys):
    assert main(["serve", "--address", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve on 0.0.0.0 without an instructor password" in err
    assert fake_server == []


def test_cli_password_from_option_or_environment_and_num_procs(fake_server, monkeypatch, tmp_path):
    assert main(["serve", "--address", "0.0.0.0", "--instructor-password", "pw", "--num-procs", "2",
                 "--runs-dir", str(tmp_path)]) == 0
    monkeypatch.setenv(auth.PASSWORD_ENV, "from env")
    assert main(["serve", "--address", "0.0.0.0", "--runs-dir", str(tmp_path)]) == 0
    monkeypatch.delenv(auth.PASSWORD_ENV)
    assert main(["serve", "--address", "0.0.0.0", "--no-instructor-auth", "--runs-dir", str(tmp_path)]) == 0
    assert [(c["instructor_password"], c["num_procs"], c["no_instructor_auth"]) for c in fake_server] == [
        ("pw", 2, False), ("from env", 1, False), (None, 1, True)]


def test_cli_refuses_a_negative_num_procs(fake_server, capsys):
    assert main(["serve", "--num-procs", "-1"]) == 2
    assert "--num-procs" in capsys.readouterr().err and fake_server == []


def test_app_server_refuses_an_exposed_instructor_page_itself(tmp_path):
    from app.server import serve

    with pytest.raises(ValueError, match="without an instructor password"):
        serve(tmp_path, address="0.0.0.0")


@pytest.mark.parametrize("uri, guest", [
    ("/", True), ("/?runs=a,b", True), ("/?foo=1", True), ("/ws", True), ("/ws?x=1", True),
    ("/autoload.js?bokeh-autoload-element=p", True),
    ("/instructor", False), ("/instructor?runs=x", False), ("/instructor/ws", False),
    ("/instructor/autoload.js?x=/", False), ("/login", False), ("/x?/", False), ("//", False),
])
def test_guests_are_told_apart_by_path_not_by_query_string(uri, guest):
    assert auth.is_guest_path(uri) is guest


@pytest.mark.parametrize("uri, guest", [
    ("/class", True), ("/class/", True), ("/class/?run=x", True), ("/class/ws", True), ("/class/embed", True),
    ("/class/embed/autoload.js?x=1", True), ("/class/instructor", False), ("/class/login", False),
    ("/", False), ("/classes/", False), ("/embed", False), ("/class//", False),
])
def test_guests_under_a_prefix_are_the_same_pages_below_it(uri, guest):
    assert auth.is_guest_path(uri, prefix="/class") is guest


def test_websocket_origins_add_the_proxys_after_this_machines_own():
    assert auth.websocket_origins("localhost", 5006, ["class.example.org", "localhost:5006"]) == [
        "localhost:5006", "127.0.0.1:5006", "class.example.org"]
    assert auth.websocket_origins("0.0.0.0", 5006, ["class.example.org"]) == ["*"]


def get(url: str, path: str) -> tuple[int, str | None]:
    conn = http.client.HTTPConnection(url.split("//")[1].rstrip("/"), timeout=30)
    conn.request("GET", path)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status, response.getheader("Location")


def test_two_processes_serve_both_pages_and_the_login(tmp_path):
    running = start_server(tmp_path / "runs", tmp_path / "server.log", "--num-procs", "2",
                           env={auth.PASSWORD_ENV: "pw"})
    try:
        for _ in range(6):  # requests spread over both workers
            assert get(running.url, "/")[0] == 200
            status, location = get(running.url, "/instructor")
            assert status == 302 and "/login" in location
            assert get(running.url, "/login")[0] == 200
        log = running.log.read_text()
        assert log.count("Launching server") == 2, log
    finally:
        running.stop()


def test_learners_with_a_query_string_never_log_in_the_instructor_page_stays_closed(tmp_path):
    # The learner page's own address carries ?runs=<ids> after a save: a reload must not log in.
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env={auth.PASSWORD_ENV: "pw"})
    try:
        for path in ("/", "/?runs=abc", "/?foo=1&bar=2",
                     "/autoload.js?bokeh-autoload-element=p&bokeh-app-path=/"):
            assert get(running.url, path)[0] == 200, path
        for path in ("/instructor", "/instructor?runs=abc", "/instructor/?x=/"):
            status, location = get(running.url, path)
            assert status == 302 and "/login" in location, path
        # A script cannot log in: refused outright, with no traceback in the log.
        assert get(running.url, "/instructor/autoload.js?bokeh-autoload-element=p")[0] == 403
        log = running.log.read_text()
        assert "Traceback" not in log and "Uncaught exception" not in log, log
    finally:
        running.stop()


def _ipv6_loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback_works(), reason="this machine has no IPv6 loopback")
def test_serve_on_ipv6_loopback_prints_bracketed_urls_and_accepts_its_own_websocket(tmp_path):
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if k != auth.PASSWORD_ENV}
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--runs-dir", str(tmp_path / "runs"),
             "--port", str(port), "--address", "::1"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                socket.create_connection(("::1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"http://[::1]:{port}/"
        assert f"Attention workbench: {url}  instructor page: {url}instructor" in log.read_text()
        # Served on ::1. (Asked for with the Host "[::1]:port", Panel 1.9's Location cannot split
        # that header and the page fails with 500: a Panel limitation, not tested here.)
        conn = http.client.HTTPConnection("::1", port, timeout=30)
        conn.request("GET", "/", headers={"Host": f"localhost:{port}"})
        assert conn.getresponse().status == 200
        conn.close()

        def handshake(origin: str) -> int:
            conn = http.client.HTTPConnection("::1", port, timeout=10)
            conn.request("GET", "/ws", headers={
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": origin})
            status = conn.getresponse().status
            conn.close()
            return status

        assert handshake(url.rstrip("/")) == 101  # the page opened at the printed address
        assert handshake(f"http://localhost:{port}") == 101
        assert handshake(f"http://evil.example:{port}") == 403
        assert f"Refusing websocket connection from Origin '{url.rstrip('/')}'" not in log.read_text()
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_serve_opens_the_store_before_forking_workers(tmp_path, monkeypatch):
    import app.server as server

    events = []

    class Store(server.RunStore):
        def __init__(self, url):
            events.append("opened")
            super().__init__(url)

    monkeypatch.setattr(server, "RunStore", Store)
    monkeypatch.setattr(server.pn, "serve", lambda *a, **k: events.append(("serve", k["num_procs"])))
    # serve builds the server unstarted, then runs it until a stop signal: not here.
    monkeypatch.setattr(server, "_run_until_stopped", lambda *a: events.append("run"))
    server.serve(sqlite_url(tmp_path / "runs.db"), num_procs=2)
    assert events == ["opened", ("serve", 2), "run"]
    assert (tmp_path / "runs.db").is_file()


def test_the_learner_page_loads_no_mathjax_bundle(tmp_path):
    running = start_server(tmp_path / "runs", tmp_path / "server.log")
    try:
        conn = http.client.HTTPConnection(running.url.split("//")[1].rstrip("/"), timeout=30)
        conn.request("GET", "/")
        page = conn.getresponse().read().decode()
        conn.close()
        assert "bokeh.min.js" in page and "panel.min.js" in page
        assert "mathjax" not in page.lower()
    finally:
        running.stop()


def _in_a_child(code: str) -> str:
    """Run ``code`` in a fresh interpreter from the checkout; return what it printed."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_learner_page_and_its_saves_never_load_pandas(tmp_path):
    # pandas costs a server ~0.7 s to import and ~30 MiB; only the instructor page needs it. In a
    # child process, since this test process has pandas loaded already.
    code = (
        "import sys\n"
        "from app.learner.page import create_page\n"
        "from app.store import RunStore, sqlite_url\n"
        f"page = create_page(RunStore(sqlite_url({str(tmp_path / 'runs.db')!r})))\n"
        "page.state.prediction = 'p'\n"
        "page.state.save_run()\n"
        "page.state.mask_after_softmax = True\n"
        "page.state.save_run()\n"
        "assert len(page.state.saved) == 2\n"
        "print('pandas' in sys.modules)\n"
    )
    assert _in_a_child(code) == "False"


def test_serve_routes_every_pages_websocket_to_a_handler_without_nagle_delay(tmp_path, monkeypatch):
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import WSHandler

    import app.server as server

    monkeypatch.setattr(server.pn, "serve", lambda *a, **k: None)
    monkeypatch.setattr(server, "_run_until_stopped", lambda *a: None)  # nothing was started
    server.serve(sqlite_url(tmp_path / "runs.db"), port=0)
    server.serve(sqlite_url(tmp_path / "runs.db"), port=0)  # a second start changes nothing more
    handlers = [handler for route, handler in per_app_patterns if route == r"/ws"]
    assert len(handlers) == 1
    assert issubclass(handlers[0], WSHandler) and handlers[0].sends_at_once


def test_a_pages_websocket_sends_each_message_at_once():
    # A real Panel server and a real Bokeh client session, in a child process (the route table
    # is process-wide): the server's end of the page's websocket has TCP_NODELAY set.
    code = (
        "import gc, socket, time\n"
        "import panel as pn\n"
        "from bokeh.client import pull_session\n"
        "from panel.io.server import WSHandler\n"
        "from app.upstream import answer_without_nagle_delay\n"
        "answer_without_nagle_delay()\n"
        "with socket.socket() as s:\n"
        "    s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]\n"
        "server = pn.serve({'/': lambda: pn.pane.Markdown('x')}, port=port, address='127.0.0.1',\n"
        "                  show=False, threaded=True, websocket_origin=[f'127.0.0.1:{port}'])\n"
        "deadline = time.monotonic() + 60\n"
        "while True:\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=1).close(); break\n"
        "    except OSError:\n"
        "        assert time.monotonic() < deadline, 'the server never listened'\n"
        "        time.sleep(0.05)\n"
        "session = pull_session(url=f'http://127.0.0.1:{port}/')\n"
        "open_ = [o for o in gc.get_objects() if isinstance(o, WSHandler) and o.ws_connection]\n"
        "print([h.ws_connection.stream.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)\n"
        "       for h in open_])\n"
        "session.close()\n"
        "server.stop()\n"
    )
    assert _in_a_child(code).splitlines()[-1] == "[1]"


def test_the_instructor_page_asked_for_with_a_trailing_slash_is_sent_to_its_own_address():
    from types import SimpleNamespace

    from tornado.httputil import HTTPHeaders

    from app.server import InstructorSlashRedirect

    def answer(path, query="", status=200):
        transform = InstructorSlashRedirect(SimpleNamespace(path=path, query=query))
        headers = HTTPHeaders({"Content-Type": "text/html", "Content-Length": "5"})
        code, headers, body = transform.transform_first_chunk(status, headers, b"<html", True)
        return code, headers.get("Location"), body

    assert answer("/instructor/", "x=1") == (302, "/instructor?x=1", b"")
    assert answer("/instructor/") == (302, "/instructor", b"")
    # Everything else as it was: the page itself, the learner pages, an error, a login redirect.
    assert answer("/instructor") == (200, None, b"<html")
    assert answer("/embed/") == (200, None, b"<html")
    assert answer("/instructor/", status=302)[0] == 302 and answer("/instructor/", status=403)[2] == b"<html"
