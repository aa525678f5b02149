"""Who may open the instructor page: Panel's basic-auth login for ``/instructor``, open ``/``.

The instructor page shows every learner's runs, so on a class server it sits behind a password.
This module only *configures* Panel's own :class:`panel.auth.BasicAuthProvider` (a login form
at ``/login`` that sets a signed cookie): every Tornado handler of a protected app (the page, its
WebSocket, which carries the downloads too) refuses a request without that cookie before any
of our code runs. The learner page is listed as a guest endpoint, so learners never log in.

It also decides when serving without a password is too dangerous: an instructor page open to
the network, unless the operator says so explicitly.

Left out: user accounts (there is one user, ``instructor``), HTTPS (put a TLS-terminating proxy
in front of a server reachable beyond the classroom).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

PASSWORD_ENV = "ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD"
INSTRUCTOR_USER = "instructor"
INSTRUCTOR_PATH = "/instructor"
LOGIN_TEMPLATE = Path(__file__).resolve().parent / "instructor_login.html"
# Endpoints anyone may open without logging in: the learner page and its WebSocket ("/ws").
GUEST_ENDPOINTS = ["/"]


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
        f"Set --instructor-password (or the environment variable {PASSWORD_ENV}), or pass "
        "--no-instructor-auth to serve the instructor page without a password anyway."
    )


def serve_options(password: str | None) -> dict:
    """Keyword arguments for :func:`panel.serve` that put ``/instructor`` behind ``password``.

    Empty when there is no password (every page open). Otherwise Panel's basic auth with the one
    user ``instructor`` (given as a dict, so a password that happens to be a file path is not
    read as a credentials file), a fresh random cookie secret per server start (forked
    ``--num-procs`` workers inherit it, so a login holds on every worker; restarting the server
    logs the instructor out), and the learner page as a guest endpoint.
    """
    if not password:
        return {}
    import secrets  # here: the command line imports this module before it re-runs itself

    return {
        "basic_auth": {INSTRUCTOR_USER: password},
        "cookie_secret": secrets.token_urlsafe(32),
        "oauth_guest_endpoints": list(GUEST_ENDPOINTS),
        "login_template": str(LOGIN_TEMPLATE),
    }


__all__ = ["INSTRUCTOR_PATH", "INSTRUCTOR_USER", "PASSWORD_ENV", "exposure_problem", "is_loopback",
           "serve_options"]
