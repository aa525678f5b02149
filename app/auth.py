"""Who may open the instructor page: Panel's basic-auth login for ``/instructor``, open ``/``.

The instructor page shows every learner's runs, so on a class server it sits behind a password.
This module only *configures* Panel's own :class:`panel.auth.BasicAuthProvider` (a login form
at ``/login`` that sets a signed cookie): every Tornado handler of a protected app (the page, its
WebSocket, which carries the downloads too) refuses a request without that cookie before any
of our code runs. The learner page is a guest endpoint, so learners never log in: a request is
a guest's by its *path* (``/``, ``/ws``, ``/autoload.js``), whatever query string it carries
(Panel itself compares the whole URI, so ``/?runs=…``, the learner page's own address after a
save, was sent to the login).

Each login also carries a login id that *Log out* ends on every server process sharing the
store, and the password's fingerprint, so a password change ends earlier logins
(:mod:`app.logins`); failed logins are limited per client address (:mod:`app.login_limit`).

It also decides when serving without a password is too dangerous: an instructor page open to
the network, unless the operator says so explicitly.

Left out: user accounts (there is one user, ``instructor``), HTTPS (put a TLS-terminating proxy
in front of a server reachable beyond the classroom).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import stat
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

from app.oplog import client_address, event, logger

PASSWORD_ENV = "ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD"
PASSWORD_FILE_ENV = "ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD_FILE"
# The login cookie's signing secret, shared by every server process behind one balancer.
COOKIE_SECRET_FILE_ENV = "ATTENTION_WORKBENCH_COOKIE_SECRET_FILE"
INSTRUCTOR_USER = "instructor"
INSTRUCTOR_PATH = "/instructor"
LOGOUT_PATH = "/logout"
# Package data (pyproject.toml), so an installed wheel has them; files("app"), not "app.instructor",
# whose import loads the instructor page's code.
LOGIN_TEMPLATE = files("app") / "instructor" / "login.html"
LOGOUT_TEMPLATE = files("app") / "instructor" / "logout.html"
# Endpoints anyone may open without logging in: the learner pages (the workbench and its
# embed), their WebSockets and autoload scripts, with or without a query string.
GUEST_ENDPOINTS = ["/", "/embed"]
GUEST_PATHS = frozenset({"/", "/ws", "/autoload.js", "/embed", "/embed/ws", "/embed/autoload.js"})


# Bokeh's advice for its own signing key (bokeh/settings.py): at least 32 bytes of entropy.
COOKIE_SECRET_MIN_LENGTH = 32


def read_cookie_secret_file(path: str | os.PathLike) -> str:
    """The login cookie secret kept in the file ``path`` (:func:`read_password_file`'s checks),
    at least :data:`COOKIE_SECRET_MIN_LENGTH` characters: anyone who guesses it can sign an
    instructor login.

    Raises
    ------
    ValueError
        As :func:`read_password_file`, the file named a cookie secret file; or the secret is
        shorter than :data:`COOKIE_SECRET_MIN_LENGTH`.
    """
    secret = read_password_file(path, what="cookie secret", noun="secret")
    if len(secret) < COOKIE_SECRET_MIN_LENGTH:
        raise ValueError(
            f"cookie secret file {os.fspath(path)} holds {len(secret)} characters: a secret needs at least "
            f"{COOKIE_SECRET_MIN_LENGTH}, e.g. (umask 077; head -c 32 /dev/urandom | base64 > {os.fspath(path)})")
    return secret


def read_password_file(path: str | os.PathLike, what: str = "instructor password",
                       noun: str = "password") -> str:
    """The instructor password (or another secret: ``what``, one ``noun``) kept in the file
    ``path``: its text without the final line end.

    Raises
    ------
    ValueError
        The file is missing, not a regular file, unreadable, not UTF-8, empty, more than one line,
        or (on POSIX) readable or writable by its group or by others: the message names the file
        and says what to do.
    """
    where = f"{what} file {os.fspath(path)}"
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{where} is not a regular file")
        if os.name == "posix" and info.st_mode & 0o066:
            raise ValueError(
                f"{where} can be read or changed by other users (mode {stat.filemode(info.st_mode)}); "
                f"make it yours alone: chmod 600 {os.fspath(path)}")
        with open(path, "rb") as f:
            data = f.read(64 * 1024 + 1)
    except FileNotFoundError:
        raise ValueError(f"{where} does not exist") from None
    except OSError as error:
        raise ValueError(f"{where} cannot be read ({error.strerror or error})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where} is not UTF-8 text") from None
    password = text.removesuffix("\n").removesuffix("\r")  # the line end an editor adds
    if not password.strip():
        raise ValueError(f"{where} is empty: write the {noun} in it")
    if len(data) > 64 * 1024:
        raise ValueError(f"{where} is larger than 64 KiB: write only the {noun} in it")
    if "\n" in password or "\r" in password:
        raise ValueError(f"{where} holds more than one line: write only the {noun} in it")
    return password


def password_looks_like_a_file(password: str) -> bool:
    """True when ``password`` names an existing file: likely meant for ``--instructor-password-file``.

    Panel's own basic auth once took a mistyped credentials path as the literal password
    (holoviz/panel#4703); the command line warns instead of guessing.
    """
    try:
        return Path(password).expanduser().is_file()
    except (OSError, ValueError):
        return False


def is_guest_path(uri: str, prefix: str = "") -> bool:
    """True when a request for ``uri`` (path and query string) needs no login.

    Only the path counts, split off the query string as Tornado splits ``request.path``, so a
    query string never turns the learner page into a protected one, nor ``/instructor`` into an
    open one. Under a URL ``prefix`` (``/class``) the pages are ``/class/``, ``/class/embed``…;
    ``/class`` itself is the learner page (Panel sends it on to ``/class/``).
    """
    path = uri.partition("?")[0]
    if prefix:
        if path == prefix:
            return True
        if not path.startswith(prefix + "/"):
            return False
        path = path[len(prefix):]
    return path in GUEST_PATHS


def credentials_match(password: str, username: str, typed: str) -> bool:
    """True when the login form's ``username`` is ``instructor`` and ``typed`` is ``password``.

    Compared in constant time; a password that names a file is still just a password.
    """
    import hmac

    return username == INSTRUCTOR_USER and hmac.compare_digest(typed.encode("utf-8"), password.encode("utf-8"))


def _provider(password: str, prefix: str = "", logins=None, limit=None):
    """Panel's basic-auth provider for ``password``, guests told apart by path (see
    :func:`is_guest_path`), each login ended by ``logins`` (:class:`app.logins.Logins`) and failed
    logins limited by ``limit`` (:class:`app.login_limit.LoginLimit`); what it changes in Panel is
    listed in :mod:`app.upstream`.

    Built on first use: Panel is imported only when serving.
    """
    from functools import partial

    from jinja2 import Environment, PackageLoader

    from app.logins import LOGIN_COOKIE
    from app.upstream import instructor_auth_provider

    # Panel compiles a template file with a loader of its own folders, where the frame
    # that login.html and logout.html extend (auth_page.html) is not found: loaded here.
    pages = Environment(loader=PackageLoader("app", "instructor"), trim_blocks=True, lstrip_blocks=True)
    login_template = pages.get_template(LOGIN_TEMPLATE.name)

    def on_login(request, succeeded: bool) -> None:
        log_login(request, succeeded)
        if limit is not None:
            (limit.succeeded if succeeded else limit.failed)(client_address(request))

    return instructor_auth_provider(
        credentials_match=partial(credentials_match, password), is_guest=partial(is_guest_path, prefix=prefix),
        login_template=login_template,
        logout_template=pages.get_template(LOGOUT_TEMPLATE.name),
        logout_endpoint=LOGOUT_PATH, guest_endpoints=list(GUEST_ENDPOINTS),
        on_login=on_login, on_logout=log_logout, logins=logins, login_cookie=LOGIN_COOKIE,
        refuse_login=partial(refuse_limited_login, limit, login_template) if limit is not None else lambda h: False)


def refuse_limited_login(limit, login_template, handler) -> bool:
    """Answer a login form from an address that must wait (``limit``,
    :class:`app.login_limit.LoginLimit`): 429, ``Retry-After`` and the login page saying when to
    try again; logged once per wait as ``login limited``. Returns whether it answered."""
    import math

    from app.login_limit import wait_sentence

    client = client_address(handler.request)
    wait_s = limit.wait_s(client)
    if not wait_s:
        return False
    if limit.first_refusal(client):
        event(logger("auth"), "login limited", logging.WARNING, client=client, retry_after_s=math.ceil(wait_s))
    handler.set_status(429)
    handler.set_header("Retry-After", str(math.ceil(wait_s)))
    handler.finish(login_template.render(login_endpoint=handler._login_endpoint, errormessage=wait_sentence(wait_s),
                                         PANEL_CDN=""))
    return True


def instructor_logins(store, password: str, cookie_secret: str):
    """The server process's :class:`app.logins.Logins` over ``store`` for ``password``: login
    cookies accepted as long as Panel's own (``oauth_expiry`` days), ended ones kept as long."""
    import panel as pn

    from app.logins import Logins

    return Logins(store, password, cookie_secret, keep_s=pn.config.oauth_expiry * 86400.0)


def log_login(request, succeeded: bool) -> None:
    """Log a login form sent from the client of Tornado ``request``: ``login`` at INFO, or
    ``login failed`` at WARNING; never the user name or password typed."""
    event(logger("auth"), "login" if succeeded else "login failed", logging.INFO if succeeded else logging.WARNING,
          user=INSTRUCTOR_USER if succeeded else None, client=client_address(request))


def log_logout(request) -> None:
    """Log a logout by the client of Tornado ``request``."""
    event(logger("auth"), "logout", client=client_address(request))


def is_loopback(address: str) -> bool:
    """True when ``address`` only accepts connections from this machine.

    ``localhost`` and loopback IPs (``127.0.0.0/8``, ``::1``) are; ``0.0.0.0``, ``::``, an empty
    address (all interfaces), other IPs and any other host name are not.
    """
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def url_host(address: str) -> str:
    """``address`` as the host part of a URL: an IPv6 literal in brackets (``[::1]``)."""
    bare = address.strip("[]")
    try:
        return f"[{bare}]" if ipaddress.ip_address(bare).version == 6 else bare
    except ValueError:
        return address


def websocket_origins(address: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    """The ``host:port`` values a page's WebSocket may come from (its ``Origin`` header).

    Every name the server answers to on this machine, then the ``extra`` ones (a proxy's public
    name, ``--allow-websocket-origin``); ``*`` when it listens on every interface (learners use
    names the server cannot know). An IPv6 address is bracketed, as a browser sends it
    (``[::1]:5006``).
    """
    if address in ("0.0.0.0", "::"):
        return ["*"]
    return list(dict.fromkeys([f"{url_host(address)}:{port}", f"localhost:{port}",
                               f"127.0.0.1:{port}", *extra]))


def exposure_problem(address: str, password: str | None, no_instructor_auth: bool) -> str | None:
    """Why serving like this would expose the class's runs, or None when it is fine.

    Parameters
    ----------
    address : str
        The interface ``serve`` binds.
    password : str or None
        The instructor password (empty counts as none).
    no_instructor_auth : bool
        The operator's explicit ``--no-instructor-auth``.
    """
    if password or no_instructor_auth or is_loopback(address):
        return None
    return (
        f"refusing to serve on {address} without an instructor password: anyone who can reach "
        f"this address could open {INSTRUCTOR_PATH} and read and download every learner's runs. "
        f"Set --instructor-password-file (or --instructor-password, or the environment variable "
        f"{PASSWORD_FILE_ENV} or {PASSWORD_ENV}), or pass "
        "--no-instructor-auth to serve the instructor page without a password anyway."
    )


def serve_options(password: str | None, cookie_secret: str | None = None, prefix: str = "",
                  logins=None) -> dict:
    """Keyword arguments for :func:`panel.serve` that put ``/instructor`` behind ``password``.

    Empty when there is no password (every page open). Otherwise Panel's basic auth with the one
    user ``instructor`` (given as a dict, so a password that happens to be a file path is not
    read as a credentials file), the login cookie signed with ``cookie_secret`` (shared by every
    server process behind one balancer) or else a fresh random secret per server start (forked
    ``--num-procs`` workers inherit it, so a login holds on every worker; restarting the server
    logs the instructor out), and the learner page as a guest endpoint, under the URL ``prefix``
    (``/class``, or empty). The provider is Panel's
    own, passed ready-made (``auth_provider``, which :func:`panel.serve` hands to Bokeh) because
    ``basic_auth`` would make Panel build one that matches guests by their whole URI; its login
    form checks the one user and the password itself (never a credentials file). ``/logout``
    clears the login cookie and shows our own page (Panel's loads its logo from a CDN).

    With ``logins`` (:func:`instructor_logins`, made with the same secret) each login carries a
    login id and the password's fingerprint, and ``/logout`` ends it on every process sharing
    the store. Failed logins are limited per client address (:mod:`app.login_limit`).
    """
    if not password:
        return {}
    import secrets  # here: only a server with a password needs it

    from app.login_limit import LoginLimit

    return {
        "auth_provider": _provider(password, prefix, logins, LoginLimit()),
        "cookie_secret": cookie_secret or secrets.token_urlsafe(32),
        "oauth_guest_endpoints": list(GUEST_ENDPOINTS),
    }


__all__ = ["COOKIE_SECRET_FILE_ENV", "INSTRUCTOR_PATH", "INSTRUCTOR_USER", "LOGOUT_PATH", "PASSWORD_ENV",
           "PASSWORD_FILE_ENV", "credentials_match", "exposure_problem", "instructor_logins", "is_guest_path",
           "is_loopback", "log_login", "log_logout", "refuse_limited_login",
           "password_looks_like_a_file",
           "read_cookie_secret_file", "read_password_file", "serve_options", "url_host", "websocket_origins"]
