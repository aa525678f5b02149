"""``serve`` stopping on SIGTERM or SIGINT (app/shutdown.py): the health check fails before the
port closes, new pages are refused with a sentence, the save in flight commits and its page says
so, every open page is told of the restart, and the process exits 0 in time; past the grace it
exits anyway.

A save is held "in flight" for real: the test takes SQLite's write lock from a connection of its
own (``BEGIN IMMEDIATE``), so the server's save waits on the store, as it would on a busy disk;
the page says "Saving…" and the server answers meanwhile.
"""

from __future__ import annotations

import http.client
import re
import signal
import sqlite3
import time

from playwright.sync_api import expect
from workbench_server import (
    NO_PASSWORD,
    ExitWatch,
    HealthWatch,
    PageRequest,
    failed_before_closing,
    open_learner_page,
    start_server,
    wait_until,
)

from app.instructor.page import DISCONNECTED as INSTRUCTOR_DISCONNECTED
from app.learner.page import DISCONNECTED as LEARNER_DISCONNECTED
from app.shared.connection import LOST_LEAD, restart_message
from app.shutdown import REFUSED_PAGE

GRACE_S = 6.0
# From the signal to the exit on the normal path: the notice period, the port closing, the
# interpreter ending; generous for a loaded 2-core machine, well under the grace.
NORMAL_EXIT_S = GRACE_S - 1


def port_of(server) -> int:
    return int(server.url.rstrip("/").rsplit(":", 1)[1])


def ask(port: int, path: str, headers: dict | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def hold_the_write_lock(server) -> sqlite3.Connection:
    """Take the server's SQLite store's write lock from another connection: its saves wait."""
    lock = sqlite3.connect(server.runs_dir / "runs.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    return lock


def click_save_and_wait_until_it_waits_on_the_store(page, server, health: HealthWatch) -> None:
    """Press Save run while the store is held, and wait until the save is in flight: the page
    says "Saving…" with Save run off, and the server goes on answering meanwhile (the save
    waits in a thread of its own, not on the event loop every page shares)."""
    answered = len(health.answers)
    page.get_by_role("button", name="Save run").click()
    expect(page.get_by_role("status").filter(has_text="Saving…")).to_be_visible()
    expect(page.get_by_role("button", name="Save run")).to_be_disabled()
    wait_until(lambda: len(health.answers) >= answered + 3, "three health answers while the save waits")
    assert set(health.answers[answered:]) == {200}, health.answers
    assert ask(port_of(server), "/static/extensions/panel/css/loading.css")[0] == 200
    assert server.records() == []  # still in flight: the store is held


def assert_stopping_lines_name_no_session(log: str) -> None:
    """The operator's "stopping: …" lines are about the process, never one page's session."""
    stopping = [line for line in log.splitlines() if " stopping: " in line or " stopped: " in line]
    assert stopping, log
    assert not [line for line in stopping if "session=" in line], stopping
    assert re.search(r" stopped: exit status \d+$", stopping[-1]), stopping  # its last line: it ended


def test_every_pages_lost_connection_message_can_name_a_restart():
    for message in (LEARNER_DISCONNECTED, INSTRUCTOR_DISCONNECTED):
        assert message.startswith(LOST_LEAD)
        restart = restart_message(message)
        assert restart.startswith("The workbench server is restarting: ") and "lost" not in restart.split(":")[0]
        assert restart.endswith(message[len(LOST_LEAD):])
        assert restart_message(restart) == restart  # told twice, said once


def test_sigint_fails_the_health_check_and_refuses_new_pages_before_the_port_closes_then_exits_0(tmp_path):
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--shutdown-grace", str(GRACE_S),
                          env=NO_PASSWORD)
    try:
        port = port_of(server)
        health = HealthWatch("127.0.0.1", port)
        wait_until(lambda: health.answers, "a first health answer")
        ended = ExitWatch(server.process)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGINT)
        wait_until(lambda: 503 in health.answers, "the health check failing", timeout=NORMAL_EXIT_S)
        for path in ("/", "/embed", "/instructor", "/?runs=abc"):
            assert ask(port, path) == (503, REFUSED_PAGE), path
        assert ended.ended_after(signalled) < NORMAL_EXIT_S
        assert server.process.returncode == 0
        answers = health.wait_closed()
        assert failed_before_closing(answers), answers
    finally:
        server.stop()


def test_sigterm_lets_the_save_in_flight_commit_tells_the_page_and_exits_0_in_time(tmp_path, page):
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--shutdown-grace", str(GRACE_S),
                          env=NO_PASSWORD)
    lock = None
    try:
        port = port_of(server)
        open_learner_page(page, server.url)
        page.get_by_label("Prediction").fill("row 2 cannot read token 3")
        page.get_by_label("Label", exact=True).fill("in flight")
        page.get_by_label("Label", exact=True).press("Tab")
        health = HealthWatch("127.0.0.1", port)
        wait_until(lambda: health.answers, "a first health answer")
        lock = hold_the_write_lock(server)
        click_save_and_wait_until_it_waits_on_the_store(page, server, health)

        ended = ExitWatch(server.process)
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        newcomer = PageRequest(port)
        assert newcomer.sent.wait(10)
        lock.execute("ROLLBACK")  # the store answers again: the save goes on

        saved = page.get_by_role("status").filter(has_text="Saved run “in flight”")
        expect(saved).to_be_visible()
        notice = page.locator(".notyf__message").filter(has_text="The workbench server is restarting")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("your saved runs are kept")
        assert ended.ended_after(signalled) < NORMAL_EXIT_S
        assert server.process.returncode == 0
        assert [record["label"] for record in server.records()] == ["in flight"]
        assert newcomer.result() == (503, REFUSED_PAGE)
        answers = health.wait_closed()
        assert failed_before_closing(answers), answers
        log = server.log.read_text()
        assert_stopping_lines_name_no_session(log)
        # Each session opened has its closing line, the open page's too (Bokeh tells no session's
        # end as its server stops: the process says it, before "stopped").
        opened = re.findall(r" INFO session opened page=learner session=(\w+) ", log)
        assert opened, log
        for session in opened:
            closed = re.search(rf" INFO session closed page=learner session={session} client=\S+ open_s=\d+"
                               rf'( reason="server stopping")?$', log, re.MULTILINE)
            assert closed, (session, log)
        assert re.search(r' INFO session closed .* reason="server stopping"\n.* INFO stopped: exit status 0$', log,
                         re.MULTILINE), log
        # The run's page kept what it saved, now marked as the last thing saved.
        expect(saved).to_contain_text("nothing you do now is saved. If you pressed Save run as it was lost, reload")
    finally:
        if lock is not None:
            lock.close()
        server.stop()


def test_past_the_grace_a_save_stuck_on_the_store_does_not_keep_the_process(tmp_path, page):
    grace = 2.0
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--shutdown-grace", str(grace),
                          env=NO_PASSWORD)
    lock = None
    try:
        open_learner_page(page, server.url)
        page.get_by_label("Prediction").fill("p")
        page.get_by_label("Prediction").press("Tab")
        health = HealthWatch("127.0.0.1", port_of(server))
        wait_until(lambda: health.answers, "a first health answer")
        lock = hold_the_write_lock(server)  # held past the grace: the save never gets the store
        click_save_and_wait_until_it_waits_on_the_store(page, server, health)
        ended = ExitWatch(server.process)
        server.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert grace - 0.5 < ended.ended_after(signalled) < grace + 3
        assert server.process.returncode == 1
        log = server.log.read_text()
        assert re.search(r"stopping: not done 2 s after the signal .*; exiting now", log), log
        assert_stopping_lines_name_no_session(log)
        lock.execute("ROLLBACK")
        assert server.records() == []  # not committed, and the page never said it was:
        expect(page.get_by_role("status").filter(has_text=re.compile(r"^Saved run"))).to_have_count(0)
        # its "Saving…" now says the connection went, and how to know whether the run was saved
        saving = page.get_by_role("status").filter(has_text=re.compile(r"^Saving…"))
        expect(saving).to_contain_text("the connection to the server was lost")
        expect(saving).to_contain_text("reload: Saved runs then lists that run if it was saved")
    finally:
        if lock is not None:
            lock.close()
        server.stop()


def test_a_second_sigterm_changes_nothing(tmp_path):
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--shutdown-grace", str(GRACE_S),
                          env=NO_PASSWORD)
    try:
        health = HealthWatch("127.0.0.1", port_of(server))
        wait_until(lambda: health.answers, "a first health answer")
        server.process.send_signal(signal.SIGTERM)
        wait_until(lambda: 503 in health.answers, "the health check failing", timeout=NORMAL_EXIT_S)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=GRACE_S + 10) == 0
        assert failed_before_closing(health.wait_closed())
    finally:
        server.stop()
