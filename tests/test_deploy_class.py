"""A class as deploy/ ships it, for real: PostgreSQL, two ``serve`` processes sharing one
``--cookie-secret-file`` (with ``--use-xheaders`` and ``--allow-websocket-origin`` for the
proxy's name, as the README says), and nginx running deploy/nginx-workbench.conf in front, all
on loopback ports. Learners and the instructor use it through nginx only; then one server is
killed and the other stopped with SIGTERM, as a crash and a restart would.

Which server gave a page: nginx's ``$upstream_addr``, added as a response header in the test's
copy of the site (the shipped one has none). Which server a browser reaches is chosen with the
site's own affinity cookie, a key the test first found to hash to that server.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
from nginx_server import nginx_or_skip, start_site
from playwright.sync_api import expect
from workbench_server import (
    ROOT,
    ExitWatch,
    HealthWatch,
    PageRequest,
    failed_before_closing,
    free_port,
    listening,
    open_learner_page,
    save_run,
    saved_runs,
    start_server,
    stop_process,
    wait_until,
)

from app.auth import PASSWORD_ENV
from app.shutdown import REFUSED_PAGE
from app.store import RunStore

SITE = ROOT / "deploy" / "nginx-workbench.conf"

PASSWORD = "lecture hall"
GRACE_S = 6.0
AFFINITY = "workbench_affinity"


def through(port: int, path: str, cookie: str | None = None) -> tuple[int, str]:
    """Ask nginx for ``path``: the status, and the server (``127.0.0.1:PORT``) that answered last."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        response = conn.getresponse()
        response.read()
        return response.status, (response.getheader("X-Upstream") or "").split(", ")[-1]
    finally:
        conn.close()


def answered_by(response) -> str:
    """The server that gave a browser's ``response`` (the last one nginx tried)."""
    return (response.header_value("x-upstream") or "").split(", ")[-1]


def affinity_keys(port: int, upstreams: list[str]) -> dict[str, str]:
    """An affinity cookie value that nginx's hash sends to each of ``upstreams``."""
    keys: dict[str, str] = {}
    for n in range(200):
        status, upstream = through(port, "/healthz", f"{AFFINITY}=browser{n}")
        assert status == 200, status
        keys.setdefault(upstream, f"browser{n}")
        if len(keys) == len(upstreams):
            return keys
    raise AssertionError(f"nginx sent 200 browsers to {sorted(keys)} only, of {upstreams}")


def on_server(context, base: str, key: str) -> None:
    """Send ``context``'s later requests (and websockets) to the server ``key`` hashes to."""
    context.add_cookies([{"name": AFFINITY, "value": key, "url": base}])


def labels_in(store_url: str) -> list[str]:
    """The labels of every run in the store, sorted: each save there once."""
    with RunStore(store_url) as store:
        return sorted(json.loads(text)["label"] for text in store.iter_texts())


def test_a_class_on_two_servers_behind_the_shipped_nginx_site_on_one_postgresql(tmp_path, browser,
                                                                                 postgres_server):
    nginx = nginx_or_skip()
    store_url = postgres_server.new_database()
    secret = tmp_path / "cookie-secret"
    secret.write_text("one secret for every server of the class\n")
    secret.chmod(0o600)
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    options = ("--cookie-secret-file", str(secret), "--use-xheaders", "--allow-websocket-origin",
               f"127.0.0.1:{port}", "--shutdown-grace", str(GRACE_S))

    def start(n: int):
        return start_server(tmp_path / f"server{n}", tmp_path / f"server{n}.log", *options, store=store_url,
                            env={PASSWORD_ENV: PASSWORD})

    with ThreadPoolExecutor(2) as pool:
        servers = list(pool.map(start, (1, 2)))
    ports = [int(s.url.rstrip("/").rsplit(":", 1)[1]) for s in servers]
    upstreams = [f"127.0.0.1:{p}" for p in ports]
    nginx_process = start_site(nginx, SITE, tmp_path, ports, port)
    contexts = []
    try:
        wait_until(lambda: listening(port), "nginx listening", timeout=30)
        keys = affinity_keys(port, upstreams)
        one, two = ({"server": s, "upstream": u, "key": keys[u]} for s, u in zip(servers, upstreams, strict=True))

        # A learner on each server, through nginx.
        learners = []
        for side in (one, two):
            context = browser.new_context()
            contexts.append(context)
            on_server(context, base, side["key"])
            page = context.new_page()
            response = open_learner_page(page, base)
            assert answered_by(response) == side["upstream"]
            learners.append(page)
        ada, bob = learners
        save_run(ada, "ada 1", "row 2 cannot read token 3")
        save_run(bob, "bob 1", "masking after softmax leaks")
        assert labels_in(store_url) == ["ada 1", "bob 1"]  # each save once

        # The instructor logs in once, on server one, and stays logged in on server two.
        instructor_context = browser.new_context()
        contexts.append(instructor_context)
        on_server(instructor_context, base, one["key"])
        instructor = instructor_context.new_page()
        instructor.goto(base + "instructor")
        expect(instructor).to_have_url(re.compile(r"/login"))
        instructor.get_by_label("Password").fill(PASSWORD)
        instructor.get_by_role("button", name="Log in").click()
        expect(instructor).to_have_url(re.compile(r"/instructor$"))
        expect(instructor.get_by_test_id("runs-total")).to_have_text("2", timeout=30_000)
        # nginx sets the affinity cookie on every answer: none may be on its way when it changes.
        instructor.goto("about:blank")
        on_server(instructor_context, base, two["key"])
        response = instructor.goto(base + "instructor")
        assert answered_by(response) == two["upstream"]
        expect(instructor).to_have_url(re.compile(r"/instructor$"))
        total = instructor.get_by_test_id("runs-total")
        expect(total).to_have_text("2", timeout=30_000)
        # A run saved on server one reaches the instructor page on server two within 2 s.
        save_run(ada, "ada 2", "row 2 cannot read token 3")
        expect(total).to_have_text("3", timeout=2_000)

        # Server one dies: its learner is told, the other learner is not and goes on saving.
        one["server"].process.kill()
        one["server"].process.wait(timeout=30)
        expect(ada.locator(".notyf__message").filter(has_text="Connection to the workbench server lost")) \
            .to_be_visible()
        save_run(bob, "bob 2", "masking after softmax leaks")
        expect(bob.locator(".notyf__message")).to_have_count(0)
        assert labels_in(store_url) == ["ada 1", "ada 2", "bob 1", "bob 2"]  # nothing committed was lost
        # Ada's reload lands on server two, with the runs her page had saved (?runs= in its URL).
        assert re.search(r"[?&]runs=", ada.url), ada.url
        response = open_learner_page(ada, ada.url)
        assert answered_by(response) == two["upstream"]
        expect(saved_runs(ada)).to_have_count(2)
        expect(saved_runs(ada).filter(has_text="ada 2")).to_have_count(1)

        # Server two is stopped (SIGTERM) while Bob's save waits on the store.
        health = HealthWatch("127.0.0.1", ports[1])
        wait_until(lambda: health.answers, "a first health answer")
        assert health.answers[0] == 200
        dsn = store_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn) as lock, psycopg.connect(dsn, autocommit=True) as look:
            lock.execute("LOCK TABLE workbench_runs IN EXCLUSIVE MODE")  # saves wait; reads go on
            bob.get_by_label("Label", exact=True).fill("bob 3")
            bob.get_by_label("Label", exact=True).press("Tab")
            bob.get_by_role("button", name="Save run").click()
            wait_until(lambda: look.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                            "AND datname = current_database()").fetchone()[0],
                       "server two's save waiting on the store")
            ended = ExitWatch(two["server"].process)
            two["server"].process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            newcomer = PageRequest(ports[1])
            assert newcomer.sent.wait(10)
            lock.rollback()
        expect(bob.get_by_role("status").filter(has_text="Saved run “bob 3”")).to_be_visible()
        for page in (bob, ada, instructor):
            expect(page.locator(".notyf__message").filter(has_text="The workbench server is restarting")) \
                .to_be_visible()
        assert ended.ended_after(signalled) < GRACE_S  # the normal way, not the grace's
        assert two["server"].process.returncode == 0
        assert newcomer.result() == (503, REFUSED_PAGE)
        answers = health.wait_closed()
        assert failed_before_closing(answers), answers
        assert labels_in(store_url) == ["ada 1", "ada 2", "bob 1", "bob 2", "bob 3"]
    finally:
        for context in contexts:
            context.close()
        stop_process(nginx_process)
        for server in servers:
            server.stop()

