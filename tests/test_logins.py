"""Instructor logins that end (issue 26), without a browser: the login id and password
fingerprint each login carries, ended logins seen by every process sharing the store, an open
page that reads nothing once its login ended, and the limit on failed logins per address."""

from __future__ import annotations

import pytest
from store_helpers import make_record, sqlite_store
from tornado.web import create_signed_value

from app.instructor import InstructorPage
from app.login_limit import MAX_WAIT_S, WINDOW_S, LoginLimit, wait_sentence
from app.logins import LOGIN_COOKIE, RECHECK_S, LoginEnded, Logins, password_fingerprint
from app.store import RunStore

SECRET = "one secret for the class"
DAY_S = 86400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_logout_ends_the_login_on_every_process_sharing_the_store(store_url):
    first, second = RunStore(store_url), RunStore(store_url)  # each with its own connections
    clock = Clock()
    here, there = (Logins(store, "pw", SECRET, DAY_S, clock=clock) for store in (first, second))
    cookie, other = here.new_cookie(), here.new_cookie()
    assert cookie != other and here.allows(cookie) and there.allows(cookie) and there.allows(other)
    here.end(cookie)
    assert not here.allows(cookie)  # at once where it was ended
    clock.now += RECHECK_S  # elsewhere once the last "holds" is that old
    assert not there.allows(cookie) and there.allows(other)
    here.end(cookie)  # a second logout of the same login changes nothing
    assert not there.allows(cookie)
    # Ended logins are kept as long as a cookie is accepted, then dropped by the next logout.
    old = Logins(first, "pw", SECRET, keep_s=0)
    old.end(other)
    assert not Logins(second, "pw", SECRET, DAY_S).allows(other)
    Logins(first, "pw", SECRET, keep_s=-1).end(old.new_cookie())
    assert Logins(second, "pw", SECRET, DAY_S).allows(cookie) and Logins(second, "pw", SECRET, DAY_S).allows(other)
    assert first.change_token() == 0  # no run changed


def test_a_cookie_of_another_password_or_secret_or_none_is_refused(tmp_path):
    store = sqlite_store(tmp_path)
    cookie = Logins(store, "old password", SECRET, DAY_S).new_cookie()
    assert not Logins(store, "new password", SECRET, DAY_S).allows(cookie)
    assert Logins(store, "old password", SECRET, DAY_S).allows(cookie)
    assert password_fingerprint("pw", SECRET) != password_fingerprint("pw", "another secret")
    assert "pw" not in password_fingerprint("pw", SECRET)
    for bad in (None, b"", "not a login", "0123.", cookie.split(".")[0]):
        assert not Logins(store, "old password", SECRET, DAY_S).allows(bad)


def test_an_open_page_whose_login_ended_reads_and_exports_nothing_more(tmp_path):
    store = sqlite_store(tmp_path)
    store.save(make_record(learner="Ada"))
    logins = Logins(store, "pw", SECRET, DAY_S)
    cookie = logins.new_cookie()
    signed = create_signed_value(SECRET, LOGIN_COOKIE, cookie).decode()
    page = InstructorPage(store, logins.session_login({LOGIN_COOKIE: signed}))
    assert page.state.matching == 1 and page.exports._download("csv").getvalue().count("\n") == 2
    logins.end(cookie)
    with pytest.raises(LoginEnded):
        page.state.learner = "nobody"  # a filter asks the store: refused
    assert [r.learner for r in page.state.page_runs] == ["Ada"] and page.state.matching == 1
    assert [p.name for p in page._layout.objects] == ["logged-out", "to-login"]
    assert page._to_login.object  # the change that sends the browser to the login page
    with pytest.raises(LoginEnded):
        page.exports._download("csv")
    store.save(make_record(minutes=1, learner="Bob"))
    page._refresh()  # the periodic tick reads nothing either
    assert page.state.total == 1
    # A page opened without a valid login cookie holds no login at all.
    assert not logins.session_login({}).holds()
    assert not logins.session_login({LOGIN_COOKIE: cookie}).holds()  # unsigned


def test_a_page_on_another_process_reads_nothing_once_the_login_ended_there(tmp_path):
    store = sqlite_store(tmp_path)
    store.save(make_record(learner="Ada"))
    here, there = (Logins(store, "pw", SECRET, DAY_S) for _ in range(2))  # one a process
    cookie = here.new_cookie()
    signed = create_signed_value(SECRET, LOGIN_COOKIE, cookie).decode()
    page = InstructorPage(store, here.session_login({LOGIN_COOKIE: signed}))
    assert page.login.holds()  # this process now trusts the login for RECHECK_S
    there.end(cookie)  # Log out, on the other process
    # Within that second: the cached answer still says the login holds, but what the page
    # reads from the store is asked of the store now, so an export is refused at once.
    with pytest.raises(LoginEnded):
        page.exports._download("csv")
    assert [p.name for p in page._layout.objects] == ["logged-out", "to-login"]


def test_failed_logins_from_one_address_wait_ever_longer():
    clock = Clock()
    limit = LoginLimit(clock=clock)
    for _ in range(4):
        limit.failed("203.0.113.5")
    assert limit.wait_s("203.0.113.5") == 0
    limit.failed("203.0.113.5")  # the fifth within a minute
    assert limit.wait_s("203.0.113.5") == WINDOW_S and limit.wait_s("203.0.113.6") == 0
    assert limit.first_refusal("203.0.113.5") and not limit.first_refusal("203.0.113.5")
    clock.now += WINDOW_S
    assert limit.wait_s("203.0.113.5") == 0
    for _ in range(5):
        limit.failed("203.0.113.5")
    assert limit.wait_s("203.0.113.5") == 2 * WINDOW_S  # growing
    clock.now += 2 * WINDOW_S + MAX_WAIT_S + 1  # quiet for long enough: afresh
    limit.failed("203.0.113.5")
    assert limit.wait_s("203.0.113.5") == 0
    for _ in range(4):
        limit.failed("203.0.113.5")
    limit.succeeded("203.0.113.5")
    assert limit.wait_s("203.0.113.5") == 0
    for _ in range(4):  # five failures spread beyond a minute never wait
        limit.failed("198.51.100.1")
        clock.now += WINDOW_S / 3
    limit.failed("198.51.100.1")
    assert limit.wait_s("198.51.100.1") == 0


def test_the_wait_is_said_in_words():
    assert wait_sentence(60) == "Too many failed logins from your address: try again in 1 minute."
    assert wait_sentence(61) == "Too many failed logins from your address: try again in 2 minutes."
    assert wait_sentence(0.2) == "Too many failed logins from your address: try again in 1 second."
    assert wait_sentence(42.5) == "Too many failed logins from your address: try again in 43 seconds."


def test_what_the_store_could_not_say_is_kept_for_a_bounded_number_of_logins(tmp_path, monkeypatch):
    """While the store cannot check logins, each login keeps why (its page says it), and no more
    than ``_CACHED`` logins' answers are kept in all: the store need not answer to trim them."""
    from app import logins as logins_module
    from app.store import StoreError

    logins = Logins(sqlite_store(tmp_path), "pw", SECRET, DAY_S)
    down = StoreError("Runs not read: the store cannot be reached just now.")

    def unreachable(_store, _login_id):
        raise down

    monkeypatch.setattr(logins_module, "login_ended", unreachable)
    ids = [logins.login_id(logins.new_cookie()) for _ in range(logins_module._CACHED + 10)]
    for login_id in ids:
        assert logins.ended(login_id) is None and logins.error(login_id) is down
    assert len(logins._errors) <= logins_module._CACHED
