"""An instructor page on a store that stops answering holds no other page of its process.

The page reads the store every second (its change token) and asks once a second whether its login
holds; those reads run in a store thread (``app.shared.store_calls``), so while PostgreSQL holds
them the process's event loop serves every other request. Real server, real PostgreSQL, Chromium.
Its two correct runs also check the class picture's row-sum axis around sums of 1 give or take
1e-16.
"""

from __future__ import annotations

import http.client
import time
import urllib.parse
from datetime import timedelta

import psycopg
from playwright.sync_api import expect
from store_helpers import T0, make_result
from workbench_server import open_instructor, start_server, wait_until

from app.auth import PASSWORD_ENV, PASSWORD_FILE_ENV
from app.logins import STORE_UNREACHABLE
from app.store import RunStore
from attention_core.records import ExperimentRecord

PASSWORD = "lecture hall"
# How long a request to a free event loop may take here, on a loaded test machine.
ANSWERED_S = 1.5


def correct_run(seed: int, learner: str) -> ExperimentRecord:
    """A correct causal run of 4 tokens, d_k = 3, from seeded inputs, saved ``seed`` minutes after T0."""
    return ExperimentRecord.from_result(make_result(seed=seed, T=4, d=3), learner=learner,
                                        created_at=T0 + timedelta(minutes=seed))


def answer_time(url: str, path: str) -> tuple[int, float]:
    """The status of ``GET path`` and the seconds it took."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", urllib.parse.urlsplit(url).port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def test_a_page_whose_reads_wait_on_a_held_store_holds_no_other_request(postgres_server, browser, tmp_path):
    url = postgres_server.new_database()
    server = start_server(tmp_path / "runs", tmp_path / "server.log", store=url,
                          env={PASSWORD_ENV: PASSWORD, PASSWORD_FILE_ENV: None})
    context = browser.new_context()
    try:
        with RunStore(url) as store:
            store.save(correct_run(0, "Ada"))
        page = context.new_page()
        page.goto(server.url + "instructor")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_test_id("runs-total")).to_be_visible(timeout=30_000)
        open_instructor(page, server)  # and the rest of the page, drawn after the table
        total = page.get_by_test_id("runs-total")
        expect(total).to_have_text("1")
        dsn = url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn) as lock, psycopg.connect(dsn, autocommit=True) as look:
            # The table of the change token and the logins: the page's next tick and login check
            # wait on it (up to the store's lock timeout, 8 s), as on a store that stopped answering.
            lock.execute("LOCK TABLE workbench_meta IN ACCESS EXCLUSIVE MODE")
            wait_until(lambda: look.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                            "AND datname = current_database()").fetchone()[0],
                       "the instructor page's reads waiting on the store")
            held = time.monotonic()
            answers = [answer_time(server.url, "/static/js/bokeh.min.js") for _ in range(3)]
            held_for = time.monotonic() - held
            lock.rollback()
        assert [status for status, _ in answers] == [200] * 3
        assert max(took for _, took in answers) < ANSWERED_S, (answers, held_for)
        # Once the store answers, the page goes on: a run saved meanwhile appears, and nothing
        # said the store could not be reached (the wait was shorter than the lock timeout).
        with RunStore(url) as store:
            store.save(correct_run(1, "Bob"))
        expect(total).to_have_text("2", timeout=10_000)
        expect(page.get_by_test_id("store-problem")).to_have_count(0)
        assert STORE_UNREACHABLE not in page.content()
        assert "Traceback" not in server.log.read_text()
        # Two correct runs, smallest row sums 1 - 1.1e-16 and 1.0: the picture's axis still spans
        # a readable range around them, from 0 (from the data alone it read "1" alone, points on it).
        page.wait_for_function("() => { const r = Bokeh.documents[0].get_model_by_name('class-row-sum-figure').y_range;"
                               " return r.end - r.start > 0.09 && r.start < 0.96 && r.end > 1.04 }")
    finally:
        context.close()
        server.stop()
