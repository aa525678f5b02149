"""Who may show the workbench's pages in a frame, and which parent pages the embed talks to.

A course page embeds the learner workbench (``/embed``) in an iframe and learns from it when a
run was saved (see :mod:`app.learner.embed`). The server is told which course sites to trust
(``serve --embed-origin ORIGIN``, repeatable, or :data:`EMBED_ORIGINS_ENV`); none by default.
Every response says who may frame it (``Content-Security-Policy: frame-ancestors``):

- the learner pages (``/`` and ``/embed``): this server itself and the trusted origins;
- everything else (the instructor page, its login, static files): nobody, with
  ``X-Frame-Options: DENY`` too for browsers that predate ``frame-ancestors``, so a page
  elsewhere cannot lay the instructor's exports under a decoy and have them clicked.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

EMBED_ORIGINS_ENV = "ATTENTION_WORKBENCH_EMBED_ORIGINS"
EMBED_PATH = "/embed"
# Paths (query string aside, a trailing slash ignored) of the pages a trusted course page may frame.
LEARNER_PATHS = frozenset({"/", EMBED_PATH})
_DEFAULT_PORTS = {"http": 80, "https": 443}
CLOSED_HEADERS = {"Content-Security-Policy": "frame-ancestors 'none'", "X-Frame-Options": "DENY"}


def parse_origin(text: str) -> str:
    """``text`` as a web origin the way a browser writes one (``event.origin``).

    ``scheme://host[:port]``: scheme http or https, the host lower-cased, a default port (80,
    443) and one trailing slash dropped, e.g. ``HTTPS://Course.Example:443/`` →
    ``https://course.example``.

    Raises
    ------
    ValueError
        Not such an origin: another scheme, no host, a path, query, fragment, user name or
        wildcard (a message's target must be one exact origin, never ``*``); the message
        quotes the text.
    """
    shown = repr(text[:200])
    problem = f"--embed-origin {shown} is not an origin like https://course.example or http://localhost:8000"
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        raise ValueError(problem) from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if (scheme not in _DEFAULT_PORTS or not host or "*" in text or parts.username is not None
            or parts.path not in ("", "/") or parts.query or parts.fragment
            or not all(c.isalnum() or c in ".-:" for c in host)):
        raise ValueError(problem)
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"{scheme}://{host}" + ("" if port in (None, _DEFAULT_PORTS[scheme]) else f":{port}")


def parse_origins(texts: Iterable[str]) -> list[str]:
    """Each text as :func:`parse_origin` writes it, each origin once, in the order given.

    Raises ``ValueError`` for the first text that is not an origin.
    """
    return list(dict.fromkeys(parse_origin(t) for t in texts))


def origins_from_env(value: str | None) -> list[str]:
    """The origins listed in :data:`EMBED_ORIGINS_ENV` (space- or comma-separated), unchecked."""
    return [t for t in (value or "").replace(",", " ").split() if t]


def is_learner_path(path: str) -> bool:
    """True for the pages a trusted origin may frame: ``/`` and ``/embed`` (a trailing slash
    ignored); ``path`` has no query string (Tornado's ``request.path``)."""
    return (path.rstrip("/") or "/") in LEARNER_PATHS


def framing_headers(path: str, origins: Sequence[str]) -> dict[str, str]:
    """The headers saying who may frame the response for ``path``.

    A learner page: ``frame-ancestors 'self'`` and each trusted origin (no X-Frame-Options,
    which cannot name other origins; browsers that read ``frame-ancestors`` ignore it). Any
    other path: :data:`CLOSED_HEADERS`.
    """
    if is_learner_path(path):
        return {"Content-Security-Policy": " ".join(["frame-ancestors 'self'", *origins])}
    return dict(CLOSED_HEADERS)


def framing_transform(origins: Sequence[str], prefix: str = ""):
    """A Tornado output transform adding :func:`framing_headers` to every response, a path
    read below the URL ``prefix`` (``/class``, ``serve --prefix``) when it has one.

    A transform (passed to the Tornado application as ``transforms``, which Bokeh's server
    hands on) because it is Tornado's one hook over the responses of every handler: Bokeh's and
    Panel's page, login, redirect and static handlers set no framing headers and take none.
    """
    from tornado.web import OutputTransform

    origins = tuple(origins)

    class FramingHeaders(OutputTransform):
        def __init__(self, request) -> None:
            super().__init__(request)
            path = request.path
            if prefix and (path == prefix or path.startswith(prefix + "/")):
                path = path[len(prefix):] or "/"
            self._headers = framing_headers(path, origins)

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            for name, value in self._headers.items():
                headers[name] = value
            return status_code, headers, chunk

    return FramingHeaders


__all__ = ["CLOSED_HEADERS", "EMBED_ORIGINS_ENV", "EMBED_PATH", "framing_headers", "framing_transform",
           "is_learner_path", "origins_from_env", "parse_origin", "parse_origins"]
