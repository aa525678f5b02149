"""Instructor logins that end when asked: on every server process, at once.

Panel's login cookie (``user``, signed with the cookie secret) only says *who*; a copy of it stayed
good until it expired, and an open instructor page never asked again. Each login therefore gets a
cookie of its own, :data:`LOGIN_COOKIE`, signed with the same secret, holding

- a random **login id** (128 bits), which *Log out* records as ended in the store that every
  process of the class shares (:mod:`app.store.logins`), and
- a **password fingerprint**, an HMAC of the instructor password under the cookie secret, so a
  cookie from before a password change no longer matches (a new cookie secret breaks the
  signature itself).

:class:`Logins` is one process's check of that cookie, asked by every request for the instructor
page or its websocket (:mod:`app.auth`) and, about once a second and before every action, by
every open instructor page (:class:`SessionLogin`), which then closes itself. A login still
accepted is asked of the store again after :data:`RECHECK_S`; an ended one never again.

Left out: the login form and its limit (:mod:`app.auth`, :mod:`app.login_limit`).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable

from app.oplog import event, logger
from app.store import RunStore, StoreError
from app.store.logins import LOGIN_ID, end_login, login_ended

LOGIN_COOKIE = "instructor_login"
#: What an instructor page says while the store cannot be read (its log line has the reason).
STORE_UNREACHABLE = ("The class's store cannot be reached just now: what this page shows is what it last "
                     "read; it reads again by itself once the store answers.")
#: What it says while the store answers but another session has held what it reads past the
#: store's busy timeout (an operator's lock, a long import): busy, not gone.
STORE_BUSY = ("The class's store is busy just now (another session has held it for a while): what this page "
              "shows is what it last read; it reads again by itself once the store answers.")


def store_problem(error: StoreError) -> str:
    """What an instructor page says after a read failed with ``error``: :data:`STORE_BUSY` for a
    store that was busy (``errno.EBUSY``), else :data:`STORE_UNREACHABLE`."""
    return STORE_BUSY if error.errno == errno.EBUSY else STORE_UNREACHABLE


#: The reason of the 503 a protected page's request gets while the store cannot say whether its
#: login holds (sent to the login page, the instructor would log in and land there again).
STORE_CANNOT_CHECK_LOGIN = ("The class's store cannot be reached just now, so this login cannot be checked; "
                            "try again in a moment")
#: Seconds after which that answer's page asks again by itself (its Retry-After and refresh).
RETRY_CHECK_S = 5


def store_cannot_check_login_page() -> str:
    """The page a protected page's request gets with its 503 while the store cannot say whether
    its login holds: :data:`STORE_CANNOT_CHECK_LOGIN`, asked again by itself every
    :data:`RETRY_CHECK_S` seconds (the page opens once the store answers)."""
    from app.shared.html import html

    return str(html('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                    '<meta http-equiv="refresh" content="{retry}">'
                    '<meta name="viewport" content="width=device-width, initial-scale=1">'
                    "<title>Instructor page: store unreachable</title></head>"
                    '<body style="font-family: sans-serif; margin: 2em; max-width: 40em">'
                    "<h1>Instructor page</h1><p>{sentence}.</p>"
                    "<p>This page tries again by itself every {retry} seconds.</p></body></html>\n",
                    sentence=STORE_CANNOT_CHECK_LOGIN, retry=RETRY_CHECK_S))


# How long this process trusts the store's "not ended" for one login id (seconds): the most an
# HTTP request of another process's ended login may still be served, and the cost bound of the
# check (one primary-key read per login id and second, however many tabs and requests).
RECHECK_S = 1.0
# Login ids whose answer is kept: past this many the cache starts again (a bound, not a policy).
_CACHED = 1024


def password_fingerprint(password: str, cookie_secret: str) -> str:
    """32 hex digits that change with ``password``: HMAC-SHA256 of it under ``cookie_secret``
    (the cookie carrying it is signed, not encrypted, so it must not be the password's plain hash)."""
    digest = hmac.new(cookie_secret.encode("utf-8"), b"instructor password\0" + password.encode("utf-8"),
                      hashlib.sha256)
    return digest.hexdigest()[:32]


class Logins:
    """This process's instructor logins: new ones, ended ones, and whether one is still good.

    Parameters
    ----------
    store : RunStore
        The store every server process of the class shares; ended logins are recorded there.
    password : str
        The instructor password this server was started with.
    cookie_secret : str
        The secret the login cookies are signed with (the same on every process of the class).
    keep_s : float
        How long a login cookie is accepted at most (seconds): ended logins are kept that long.
    clock : callable () -> float
        Monotonic seconds (tests pass their own).
    """

    def __init__(self, store: RunStore, password: str, cookie_secret: str, keep_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.keep_s, self._clock = store, keep_s, clock
        self._secret = cookie_secret
        self.fingerprint = password_fingerprint(password, cookie_secret)
        self._checked: dict[str, float] = {}  # login id → when the store last said it holds
        self._ended: set[str] = set()
        self._errors: dict[str, StoreError] = {}  # login id → why the store last could not say

    def new_cookie(self) -> str:
        """The :data:`LOGIN_COOKIE` value of a new login: ``<login id>.<fingerprint>``."""
        return f"{secrets.token_hex(16)}.{self.fingerprint}"

    def login_id(self, cookie: bytes | str | None) -> str | None:
        """The login id of a (verified) :data:`LOGIN_COOKIE` value, or None when there is none or it
        carries another password's fingerprint."""
        if isinstance(cookie, bytes):
            cookie = cookie.decode("utf-8", "replace")
        login_id, _, fingerprint = (cookie or "").partition(".")
        if not LOGIN_ID.fullmatch(login_id) or not hmac.compare_digest(fingerprint, self.fingerprint):
            return None
        return login_id

    def session_login(self, cookies: dict[str, str]) -> SessionLogin:
        """The login of a page opened with the request ``cookies`` (its :data:`LOGIN_COOKIE`, its
        signature and age checked as Tornado's ``get_secure_cookie`` does); a page without one
        holds no login."""
        from tornado.web import decode_signed_value

        value = cookies.get(LOGIN_COOKIE)
        verified = decode_signed_value(self._secret, LOGIN_COOKIE, value, max_age_days=self.keep_s / 86400) \
            if value else None
        return SessionLogin(self, self.login_id(verified))

    def ended(self, login_id: str | None, fresh: bool = False) -> bool | None:
        """Whether ``login_id`` is not (or no longer) a login: True for none or an ended one, False
        for one that holds, None when the store cannot say (it logged why). Asked of the store at
        most once per :data:`RECHECK_S` per login id that holds, or every time when ``fresh`` (an
        instructor page's reading of the store: a logout on another process ends it at once); an
        ended one never again."""
        if login_id is None or login_id in self._ended:
            return True
        now = self._clock()
        checked = self._checked.get(login_id)
        if not fresh and checked is not None and now - checked < RECHECK_S:
            return False
        if len(self._checked) + len(self._ended) + len(self._errors) >= _CACHED:
            self._checked.clear()
            self._ended.clear()
            self._errors.clear()
        try:
            ended = login_ended(self.store, login_id)
        except StoreError as error:
            self._errors[login_id] = error  # bounded as the others, also while the store is down
            return None
        self._errors.pop(login_id, None)
        if ended:
            self._checked.pop(login_id, None)
            self._ended.add(login_id)
        else:
            self._checked[login_id] = now
        return ended

    def error(self, login_id: str | None) -> StoreError | None:
        """Why the store could not say, when :meth:`ended` last answered None for ``login_id``."""
        return self._errors.get(login_id) if login_id is not None else None

    def allows(self, cookie: bytes | str | None) -> bool | None:
        """Whether a verified :data:`LOGIN_COOKIE` value is a login of this password that holds;
        None when the store cannot say (no access then: a request gets
        :data:`STORE_CANNOT_CHECK_LOGIN`, rather than access nobody could end)."""
        ended = self.ended(self.login_id(cookie))
        return None if ended is None else not ended

    def end(self, cookie: bytes | str | None, client: str | None = None) -> None:
        """End the login of a verified :data:`LOGIN_COOKIE` value, for every process (nothing for
        none). A store that cannot be written is logged; this process refuses the login anyway."""
        login_id = self.login_id(cookie)
        if login_id is None:
            return
        self._ended.add(login_id)
        self._checked.pop(login_id, None)
        try:
            end_login(self.store, login_id, self.keep_s)
        except StoreError as error:
            event(logger("auth"), "logout not recorded", logging.ERROR, client=client, error=str(error))


class LoginEnded(PermissionError):
    """An action of an instructor page whose login has ended (logged out, or another password).

    ``refusal``: the operator's log notes it in one line, without a traceback (:mod:`app.oplog`).
    """

    refusal = True


class GuardedStore:
    """The server's store as one instructor page uses it: every method first asks ``holds()``
    (:meth:`SessionLogin.holds_now`: one primary-key read, never a cached answer) and raises
    :class:`LoginEnded` when it says no, and when it cannot say the :class:`StoreError` that
    ``unanswered()`` gives (:meth:`SessionLogin.unanswered`: busy or unreachable; without it,
    :data:`STORE_UNREACHABLE`); other attributes are the store's."""

    def __init__(self, store: RunStore, holds: Callable[[], bool | None],
                 unanswered: Callable[[], StoreError] | None = None) -> None:
        self._store, self._holds = store, holds
        self._unanswered = unanswered or (lambda: StoreError(STORE_UNREACHABLE))

    def __getattr__(self, name: str):
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def guarded(*args, **kwargs):
            held = self._holds()
            if held is None:
                raise self._unanswered()
            if not held:
                raise LoginEnded("this instructor login has ended (logged out): log in again")
            return value(*args, **kwargs)
        return guarded


class SessionLogin:
    """The login an open instructor page was opened with, as the page asks about it.

    ``holds()`` is asked before every action and once a second; the first time it says no, the
    ``on_end`` callbacks run once (the page closes itself).
    """

    def __init__(self, logins: Logins, login_id: str | None) -> None:
        self._logins, self.login_id = logins, login_id
        self._on_end: list[Callable[[], None]] = []
        self.ended = False
        self.unknown = False  # the last holds() could not ask the store
        self.error: StoreError | None = None  # why, when the store said

    def on_end(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once, when the login is first found ended."""
        self._on_end.append(callback)

    def holds(self, fresh: bool = False) -> bool:
        """Whether the page's login still holds (asked of the store within :data:`RECHECK_S`, or
        now when ``fresh``); when it is first found ended, run the ``on_end`` callbacks. A store
        that cannot say refuses this action without closing the page."""
        if self.ended:
            return False
        ended = self._logins.ended(self.login_id, fresh)
        self.unknown = ended is None
        self.error = self._logins.error(self.login_id) if self.unknown else None
        if ended:
            self.ended = True
            for callback in self._on_end:
                callback()
        return ended is False

    @property
    def problem(self) -> str:
        """What the page says while its login cannot be checked (:attr:`unknown`): the store is
        busy or cannot be reached (:func:`store_problem`)."""
        return STORE_UNREACHABLE if self.error is None else store_problem(self.error)

    def unanswered(self) -> StoreError:
        """The error an action of the page gets while its login cannot be checked: :attr:`problem`,
        with the store's ``errno`` (``EBUSY`` for a busy store)."""
        error = StoreError(self.problem)
        error.errno = None if self.error is None else self.error.errno
        return error

    def holds_now(self) -> bool | None:
        """:meth:`holds`, asked of the store now (before anything the page reads from it), or
        None when the store cannot say."""
        held = self.holds(fresh=True)
        return None if self.unknown else held


__all__ = ["LOGIN_COOKIE", "RECHECK_S", "STORE_BUSY", "STORE_CANNOT_CHECK_LOGIN", "STORE_UNREACHABLE", "GuardedStore",
           "LoginEnded", "Logins", "SessionLogin", "password_fingerprint", "store_cannot_check_login_page",
           "store_problem"]
