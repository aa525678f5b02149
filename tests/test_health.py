"""The balancer's health endpoint: 200 while the store answers, 503 with one line once it does not."""

from __future__ import annotations

import http.client
import os
import time

import pytest
from postgres_server import start_postgres
from workbench_server import run_coroutine as run
from workbench_server import start_server

from app import auth, health
from app.health import HEALTH_PATH, health_patterns, store_problem
from app.store import RunStore, StoreError, sqlite_url


def ask(url: str, path: str, method: str = "GET") -> tuple[int, str, dict]:
    conn = http.client.HTTPConnection(url.split("//")[1].rstrip("/"), timeout=30)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read().decode(), dict(response.getheaders())
    finally:
        conn.close()


def remove_sqlite_store(path) -> None:
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        (path.parent / name).unlink(missing_ok=True)


def test_ping_answers_while_the_sqlite_file_is_there_and_fails_once_it_is_gone(tmp_path):
    path = tmp_path / "runs.db"
    with RunStore(sqlite_url(path)) as store:
        store.ping()
        assert run(store_problem(store)) is None
        remove_sqlite_store(path)
        # The pooled connection could still read the deleted file; the store is gone all the same.
        with pytest.raises(StoreError, match="Store not answering: .* is gone"):
            store.ping()
        assert run(store_problem(store)) == "store not answering"
        assert not path.exists(), "a health check must never make an empty database in the store's place"


def test_a_hung_store_fails_the_check_within_the_timeout():
    class Hung:
        where = "hung"

        def ping(self) -> None:
            time.sleep(1.0)

    started = time.monotonic()
    assert run(store_problem(Hung(), timeout=0.2)) == "store did not answer within 0.2 s"
    assert time.monotonic() - started < 0.9


def test_ping_fails_once_postgresql_stops():
    try:
        server = start_postgres(fsync=False)
    except (FileNotFoundError, RuntimeError) as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is needed under CI=true: {error}", pytrace=False)
        pytest.skip(f"no PostgreSQL to test against: {error}")
    try:
        store = RunStore(server.new_database())
        store.ping()
        server.stop()
        with pytest.raises(StoreError, match="Store not answering") as caught:
            store.ping()
        assert "cannot be reached" in str(caught.value)
        assert run(store_problem(store)) == "store not answering"
        store.close()
    finally:
        server.stop()


def test_a_real_server_answers_200_without_a_login_then_503_once_its_store_is_gone(tmp_path):
    # A password on the instructor page: the health check must still need no login.
    running = start_server(tmp_path / "runs", tmp_path / "server.log", env={auth.PASSWORD_ENV: "pw"})
    try:
        status, body, headers = ask(running.url, HEALTH_PATH)
        assert (status, body) == (200, "ok\n")
        assert headers["Content-Type"].startswith("text/plain") and headers["Cache-Control"] == "no-store"
        assert ask(running.url, HEALTH_PATH, "HEAD")[:2] == (200, "")
        assert ask(running.url, "/instructor")[0] == 302  # the login is on; the check passed it by

        remove_sqlite_store(running.runs_dir / "runs.db")
        for _ in range(3):  # as a balancer asks, every few seconds
            status, body, _ = ask(running.url, HEALTH_PATH)
            assert (status, body) == (503, "store not answering\n")
        assert str(running.runs_dir) not in body
        log = running.log.read_text()
        # Said once, with the store's address; not Tornado's ERROR line for each 503 answered.
        assert log.count("health check:") == 1 and "health check: Store not answering" in log, log
        assert str(running.runs_dir) in log and "Traceback" not in log and HEALTH_PATH not in log, log
    finally:
        running.stop()


def test_each_change_of_the_stores_health_is_logged_once(caplog):
    class Flaky:
        where = "flaky"
        answers = [False, False, True, True, False]

        def ping(self) -> None:
            if not self.answers.pop(0):
                raise StoreError("Store not answering: the store flaky is gone.")

    caplog.set_level("INFO", logger=health.log.name)
    flaky = Flaky()
    assert [run(store_problem(flaky)) for _ in range(5)] == [
        "store not answering", "store not answering", None, None, "store not answering"]
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == health.log.name] == [
        ("WARNING", "health check: Store not answering: the store flaky is gone."),
        ("INFO", "health check: the store flaky answers again"),
        ("WARNING", "health check: Store not answering: the store flaky is gone.")]


def test_a_store_raising_anything_else_fails_the_check_too():
    class Broken:
        where = "broken"

        def ping(self) -> None:
            raise RuntimeError("driver bug")

    assert run(store_problem(Broken())) == "store not answering"


def test_a_stopping_server_fails_its_check_before_it_closes_its_port(tmp_path, monkeypatch):
    from tornado.httpclient import AsyncHTTPClient
    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_sockets
    from tornado.web import Application

    monkeypatch.setattr(health, "_stopping", type(health._stopping)())

    async def check() -> list[tuple[int, str]]:
        with RunStore(sqlite_url(tmp_path / "runs.db")) as store:
            sockets = bind_sockets(0, "127.0.0.1")
            port = sockets[0].getsockname()[1]
            server = HTTPServer(Application(health_patterns(store)))
            server.add_sockets(sockets)
            client = AsyncHTTPClient()
            answers = []
            for stopping in (False, True):
                if stopping:
                    health.mark_stopping()
                response = await client.fetch(f"http://127.0.0.1:{port}{HEALTH_PATH}", raise_error=False)
                answers.append((response.code, response.body.decode()))
            server.stop()
            return answers

    assert run(check()) == [(200, "ok\n"), (503, "server stopping\n")]
