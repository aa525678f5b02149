"""The operator's log: one line per event a class server's operator asks about afterwards.

Sessions opened and closed, runs saved, explanations attached, imports and exports, instructor
logins, logouts, failed and limited logins, store errors, exceptions in a page's callbacks,
actions refused after a logout and requests refused or failed (4xx, 5xx), each as
one line of ``key=value`` fields on the server's stderr (systemd's journal keeps it)::

    2026-12-04T03:20:01Z INFO session opened page=learner session=3f9c0a1b2d4e client=203.0.113.9

Every logger is a child of :data:`LOGGER` (``attention_workbench.sessions``, ``.store``,
``.auth``…, see :func:`logger`), so one ``logging`` configuration covers them all; until
:func:`configure` is called (``attention-workbench serve`` and ``import`` do) they write nothing.

Never logged: what a learner typed (name, label, prediction, explanation, file names), a
password, a Bokeh session id (it lets whoever holds it join the session: only a short hash of
it). Run ids, counts, page kinds and client addresses are logged.

Left out: log files and rotation (the journal's job), requests answered without an error.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time

LOGGER = "attention_workbench"
# A library's loggers stay silent until the program configures them (the logging HOWTO's
# advice): without this, Python's last-resort handler would print warnings and errors.
logging.getLogger(LOGGER).addHandler(logging.NullHandler())

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def logger(area: str) -> logging.Logger:
    """The logger of one ``area`` of the workbench (``sessions``, ``store``, ``auth``…)."""
    return logging.getLogger(f"{LOGGER}.{area}")


def _value(value: object) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in "\"=\\" for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'
    return text


def fields(**values: object) -> str:
    """``values`` as `` key=value`` pairs in the order given, None left out; a value with
    spaces, quotes or ``=`` in double quotes (a line end written ``\\n``), so each event stays
    one line that ``grep`` and ``awk`` can split."""
    return "".join(f" {key}={_value(value)}" for key, value in values.items() if value is not None)


def event(log: logging.Logger, what: str, level: int = logging.INFO, exc_info=None, **values: object) -> None:
    """Log ``what`` (a few fixed words: ``run saved``) followed by the ``values``' fields."""
    if log.isEnabledFor(level):
        log.log(level, "%s%s", what, fields(**values), exc_info=exc_info)


def short_id(session_id: str) -> str:
    """A short stand-in for a Bokeh session id: the same session always gets the same one, and
    the id cannot be had back from it."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:12]


def client_address(request) -> str | None:
    """The client's address for a Tornado request (or Bokeh's proxy of one).

    Tornado sets ``remote_ip`` from ``X-Real-IP``/``X-Forwarded-For`` only when the server runs
    with ``xheaders`` (``serve --use-xheaders``), and from the socket's peer otherwise, so a
    header a client sends directly is never believed unless the operator said a proxy sets it.
    """
    return getattr(request, "remote_ip", None) if request is not None else None


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (as ``logging.lastResort``
    does), so a redirected or replaced stderr still gets the lines."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _SessionField(logging.Filter):
    """Adds ``session=<short id>`` to a line logged while a page's session is current (a save,
    an export), so it can be matched with that session's ``session opened`` line.

    Lines of :data:`LOGGER` itself are about the whole process (``stopping: …``,
    :mod:`app.shutdown`) and never get one, even when logged while some page's callback runs
    (a signal handler interrupts it; Bokeh's current document is process-wide)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == LOGGER:
            return True
        panel = sys.modules.get("panel")  # never imported for this: the CLI runs without Panel
        context = None
        if panel is not None:
            doc = panel.state.curdoc
            context = doc.session_context if doc is not None else None
        if context is not None and "session=" not in record.getMessage():
            record.msg, record.args = "%s%s", (record.getMessage(), fields(session=short_id(context.id)))
        return True


class _UTCFormatter(logging.Formatter):
    converter = time.gmtime


#: Tornado's and Bokeh's loggers sent through :func:`configure`'s handler, each with the least
#: level logged (Bokeh's INFO is a line per websocket opened and closed: the sessions' lines say it).
#: Not ``tornado.access``: ``serve`` logs requests itself (:func:`request_refused_or_failed`).
SERVER_LOGGERS = {"tornado.application": "INFO", "tornado.general": "INFO", "bokeh": "WARNING"}


def _handler() -> logging.Handler:
    handler = _CurrentStderr()
    handler.setFormatter(_UTCFormatter("%(asctime)s %(levelname)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%SZ"))
    handler.addFilter(_SessionField())
    return handler


def configure(level: str = "INFO") -> None:
    """Send the workbench's log lines at ``level`` and above to stderr, each line
    ``<UTC time> <LEVEL> <what> key=value…``; calling it again replaces the earlier handlers.

    Raises
    ------
    ValueError
        ``level`` is not one of :data:`LEVELS`.
    """
    if level.upper() not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    # Tornado's and Bokeh's own lines (a websocket from a foreign origin, an error outside a
    # page) in the same format, not Python's bare default. Bokeh, once imported, prints its lines
    # through a handler of its own (bokeh.util.logconfig.default_handler), replaced here.
    # A handler for each logger, never one shared: Panel's servable() in a session (its error
    # page for a page that failed to build, panel/io/handlers.py) turns every stream handler of
    # "bokeh" down to WARNING (panel/viewable.py), and a shared one took the workbench's lines with it.
    bokeh_default = getattr(sys.modules.get("bokeh.util.logconfig"), "default_handler", None)
    for name, least in {LOGGER: level.upper(), **SERVER_LOGGERS}.items():
        log = logging.getLogger(name)
        for old in [h for h in log.handlers if isinstance(h, _CurrentStderr) or h is bokeh_default]:
            log.removeHandler(old)
        log.addHandler(_handler())
        log.setLevel(max(logging.getLevelName(least), logging.getLevelName(level.upper())))
        log.propagate = False  # the lines once, in this format, whatever else configures logging


def request_refused_or_failed(handler) -> None:
    """Tornado's ``log_function`` (an application setting, :meth:`tornado.web.Application.log_request`),
    in place of its own access line: a request answered 4xx as ``request refused`` (WARNING), 5xx
    as ``request failed`` (ERROR), each with its status, method, path (no query string), client
    and milliseconds; answered requests are not logged, as Tornado's INFO lines were not, nor
    any answer of a handler whose ``answers_logged`` is False (the health check's)."""
    status = handler.get_status()
    if status < 400 or not getattr(handler, "answers_logged", True):
        return
    request = handler.request
    event(_requests, "request refused" if status < 500 else "request failed",
          logging.WARNING if status < 500 else logging.ERROR, status=status, method=request.method,
          path=request.path, client=client_address(request), ms=f"{1000 * request.request_time():.1f}")


# --- a Panel server's sessions and callback errors -----------------------------------------

# session id → when it opened (monotonic seconds), its page and client, this process's open sessions
_opened: dict[str, tuple[float, str, str | None]] = {}
_sessions = logger("sessions")
_errors = logger("errors")
_requests = logger("requests")


def _page(session_context) -> str:
    """The page a session shows: ``learner``, ``embed`` or ``instructor`` (by its route)."""
    app = getattr(session_context.server_context, "application_context", None)
    route = (getattr(app, "url", None) or "/").rstrip("/")
    return route.rsplit("/", 1)[-1] or "learner"


def _session_opened(session_context) -> None:
    page, client = _page(session_context), client_address(session_context.request)
    _opened[session_context.id] = (time.monotonic(), page, client)
    event(_sessions, "session opened", page=page, session=short_id(session_context.id), client=client)


def _session_closed(session_context) -> None:
    opened = _opened.pop(session_context.id, None)
    event(_sessions, "session closed", page=_page(session_context), session=short_id(session_context.id),
          client=client_address(session_context.request),
          open_s=None if opened is None else f"{time.monotonic() - opened[0]:.0f}")


def close_sessions_left_open(reason: str) -> None:
    """Log ``session closed`` for each session still open, with ``reason`` (as the process
    stops: Bokeh tells no session's end when its server stops, so each "opened" line gets its
    "closed" one)."""
    while _opened:
        session_id, (opened, page, client) = _opened.popitem()
        event(_sessions, "session closed", page=page, session=short_id(session_id), client=client,
              open_s=f"{time.monotonic() - opened:.0f}", reason=reason)


def _callback_failed(exception: BaseException) -> None:
    if getattr(exception, "refusal", False):  # an action refused on purpose (app.logins.LoginEnded)
        event(_errors, "callback refused", logging.WARNING, error=type(exception).__name__)
        return
    event(_errors, "callback failed", logging.ERROR, exc_info=(type(exception), exception, exception.__traceback__),
          error=type(exception).__name__)


class _NotRefusals(logging.Filter):
    """Drops a record whose exception is a refusal on purpose (``refusal = True``:
    :class:`app.logins.LoginEnded`): Panel logs a failed widget callback with its traceback on
    ``panel.reactive`` before :func:`_callback_failed` hears of it, which logs the refusal once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record.exc_info and record.exc_info[1], "refusal", False)


def log_sessions_and_errors() -> None:
    """Log each session's opening and closing, and every exception in a page's callbacks with
    its traceback, through Panel's public hooks; call once, before :func:`panel.serve`.

    A session closes when Bokeh drops it: its page was closed (or lost its connection) a while
    before (``app.server.UNUSED_SESSION_LIFETIME_MS``). An exception Panel hands to
    ``config.exception_handler`` was logged by Tornado before, where it ended as well; the
    page never heard of it either way.
    """
    import panel as pn

    pn.state.on_session_created(_session_opened)
    pn.state.on_session_destroyed(_session_closed)
    pn.config.exception_handler = _callback_failed
    reactive = logging.getLogger("panel.reactive")
    if not any(isinstance(f, _NotRefusals) for f in reactive.filters):
        reactive.addFilter(_NotRefusals())


__all__ = ["LEVELS", "LOGGER", "client_address", "configure", "event", "fields", "log_sessions_and_errors",
           "logger", "request_refused_or_failed", "short_id"]
