"""Shared pytest setup: a Chromium for pytest-playwright, and a real PostgreSQL for the store tests.

Browser tests never skip for a missing browser: if none is found, every test that needs one fails
with a message saying how to get one (``make test`` installs one first, see tests/find_browser.py).
Store tests take ``store_url``, once per dialect: a SQLite file, and a database of its own on a
PostgreSQL server started for the session (tests/postgres_server.py, which ``make test`` installs
when missing). Without PostgreSQL those runs skip saying why, except under ``CI=true``, where a
missing PostgreSQL fails them.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections import Counter

import pytest
from find_browser import HOW_TO_FIX, find_chromium
from playwright.sync_api import Page, expect
from postgres_server import start_postgres
from workbench_server import NO_PASSWORD, PageWatch, back_to_the_default_input, open_learner_page, start_server

from app.oplog import LOGGER, SERVER_LOGGERS
from app.store import sqlite_url

# Our machines have no network. Without these flags Chromium keeps dialling Google services
# (refused connections, noisy logs, slow start). --no-sandbox because tests run as root in CI,
# where Chromium refuses to start sandboxed; the pages loaded are only our own local server's.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# pytest-playwright's ``context`` and ``page``, kept from test to test (see there).
pytest_plugins = ["kept_tab"]

BROWSER_FIXTURES = {"page", "context", "new_context", "browser", "launch_browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a Playwright browser fixture as ``browser``, and run the files
    with the most browser tests first.

    ``make test``'s workers (``--dist loadfile``) take whole files in collection order; in
    alphabetical order the long browser files came last, and one worker ran the last of them
    while the other had finished. Longest first keeps both busy to the end; a file's tests keep
    their order."""
    browser_tests: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for n, item in enumerate(items):
        path = item.nodeid.split("::")[0]
        first_seen.setdefault(path, n)
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
            browser_tests[path] += 1
    items.sort(key=lambda item: (-browser_tests[path := item.nodeid.split("::")[0]], first_seen[path]))


@pytest.fixture(autouse=True)
def _operator_log_undone():
    """``main(["serve"…])`` and ``main(["import"…])`` run in a test configure the operator's log
    for the whole process (app.oplog.configure): undone after each test, so a later test's
    stderr holds only its own lines."""
    yield
    for name in (LOGGER, *SERVER_LOGGERS):
        log = logging.getLogger(name)
        for handler in [h for h in log.handlers if not isinstance(h, logging.NullHandler)]:
            log.removeHandler(handler)
        log.propagate, log.level = True, logging.NOTSET


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's launch options plus our Chromium's path and the offline flags: the
    headless shell unless ``--headed`` asks for a window (tests/find_browser.py)."""
    headed = browser_type_launch_args.get("headless") is False
    path = os.environ.get("ATTENTION_WORKBENCH_CHROMIUM") or find_chromium(headless_shell=not headed)
    if path is None:
        pytest.fail(
            "No Chromium for the browser tests (looked for /usr/bin/chromium, chromium, "
            "chromium-browser, google-chrome on PATH, and Playwright's download). " + HOW_TO_FIX,
            pytrace=False,
        )
    args = [*browser_type_launch_args.get("args", []), *CHROMIUM_ARGS]
    return {**browser_type_launch_args, "executable_path": path, "args": args}


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One real ``attention-workbench serve`` for every browser test module that does not define
    its own ``server`` (one with other options, or that needs a store of its own). Each start
    costs seconds of imports and a cold first page, so it is started once (per pytest-xdist
    worker); every test opens a fresh session, and finds its runs in the shared store by id,
    label or learner. The instructor page is open without a password (whatever the environment
    says)."""
    base = tmp_path_factory.mktemp("shared_server")
    running = start_server(base / "runs", base / "server.log", env=NO_PASSWORD)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the whole test session, stopped (and its directory removed) after."""
    try:
        server = start_postgres(fsync=False)  # a throwaway server: see there
    except (FileNotFoundError, RuntimeError) as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is needed under CI=true: {error}", pytrace=False)
        pytest.skip(f"no PostgreSQL to test against: {error}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """The URL of a new, empty store: a SQLite file, or a PostgreSQL database of its own."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "runs.db")
    return request.getfixturevalue("postgres_server").new_database()


@pytest.fixture
def learner_page(tmp_path):
    """A learner page built in this process over a SQLite store of its own, no browser: the
    middle test layer of STYLE.md (not pytest-playwright's ``page``, so not marked ``browser``)."""
    from store_helpers import sqlite_store

    from app.learner.page import LearnerPage

    return LearnerPage(store=sqlite_store(tmp_path / "runs"))


@pytest.fixture
def fake_server(monkeypatch) -> list[dict]:
    """The command line's ``serve`` replaced by a recorder: each call's keyword arguments, with
    the environment variables that would change them cleared."""
    from app import auth
    from app.framing import EMBED_ORIGINS_ENV

    calls = []
    fake = types.ModuleType("app.server")
    fake.serve = lambda **kwargs: calls.append(kwargs)
    monkeypatch.setitem(sys.modules, "app.server", fake)
    for name in (auth.PASSWORD_ENV, auth.PASSWORD_FILE_ENV, auth.COOKIE_SECRET_FILE_ENV, EMBED_ORIGINS_ENV):
        monkeypatch.delenv(name, raising=False)
    return calls


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test item (``item.rep_call``): fixtures read whether it failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def _module_learner_page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    watch = PageWatch(origin=server.url.rstrip("/"))
    watch.attach(page)
    open_learner_page(page, server.url)
    yield page, watch
    context.close()


@pytest.fixture
def default_learner_page(request, _module_learner_page, server):
    """One learner page at 1280×720 shared by a module's tests, back on the default input at
    the start of each (``back_to_the_default_input``) and watched like ``watch``'s.

    For modules that walk one case per failure mode: opening a page costs seconds of a 2-core
    machine, most of such a test. A test that fails leaves the page reloaded for the next."""
    page, watch = _module_learner_page
    back_to_the_default_input(page)
    yield page
    errors = watch.errors, watch.outside_requests, watch.console_errors
    watch.errors, watch.outside_requests, watch.console_errors = [], [], []
    failed = getattr(request.node, "rep_call", None) is None or request.node.rep_call.failed
    if failed:
        open_learner_page(page, server.url)
    assert errors == ([], [], []), f"page errors, requests leaving the server, console errors: {errors}"


@pytest.fixture
def watch(server, page: Page):
    """Fail the test on any page error, console error or request leaving the local server."""
    w = PageWatch(origin=server.url.rstrip("/"))
    w.attach(page)
    yield w
    w.assert_clean()


# Assertions poll until they hold; on a loaded 2-core machine (CI, or benchmarks running beside
# the tests) a page can take longer than Playwright's 5 s default to show a server round trip.
expect.set_options(timeout=15_000)
