"""Serving the workbench: one Panel/Bokeh server, each browser session built fresh.

Three pages over one :class:`~app.store.RunStore` (one per server process; its connection pool
is shared by every session): the learner workbench at ``/``, the same workbench laid out for a
course page's iframe at ``/embed`` (:mod:`app.learner.embed`; who may frame which page is
:mod:`app.framing`'s), and the instructor page at ``/instructor``, which :mod:`app.auth` can put
behind a password; ``/healthz`` tells a load balancer whether the store answers
(:mod:`app.health`). SIGTERM or SIGINT stops it gracefully (:mod:`app.shutdown`).
``--num-procs`` forks worker processes after the store is opened (Bokeh's ``num_procs``; each
worker opens its own database connections, and the database keeps their saves apart).
"""

from __future__ import annotations

import gc
import socket
from collections.abc import Sequence

import panel as pn
from tornado.ioloop import IOLoop
from tornado.web import OutputTransform, StaticFileHandler

from app.auth import INSTRUCTOR_PATH, exposure_problem, serve_options
from app.framing import EMBED_PATH, framing_transform, parse_origins
from app.health import health_patterns, stopping
from app.learner.embed import TITLE as EMBED_TITLE
from app.learner.embed import create_embed
from app.learner.page import create_page
from app.oplog import log_sessions_and_errors, request_refused_or_failed
from app.shutdown import SHUTDOWN_GRACE_S, end_process, refuse_page, stop_on_signals
from app.store import RunStore
from app.upstream import (
    answer_without_nagle_delay,
    load_mathjax_only_for_tex,
    make_bokeh_container_defaults_when_first_read,
    refuse_pages_while,
    workers_end_with_their_parent,
)

# Sessions a browser left behind are dropped after this long (milliseconds): a class's worth of
# closed tabs must not pile up in memory.
UNUSED_SESSION_LIFETIME_MS = 60_000
CHECK_UNUSED_SESSIONS_MS = 10_000


def _out_of_full_collections() -> None:
    """Move every object of this process, the page just built among them, out of the garbage
    collector's full collections (:func:`gc.freeze`); run once each page has been built.

    A full collection walks every object a process holds: about 19 ms per open learner page on
    a quiet machine, with every session of the process waiting meanwhile. Python starts one on
    its own each time the objects it holds grew by a quarter, so while a class opens its pages
    every page waited for collections that walked all the others again (30 pages built in one
    process: 8 full collections of up to 2.4 s at load 12; frozen after each page, one of
    0.8 s; bench/README.md, "Issue 25, second pass"). Objects freed by their reference counts
    (nearly all) are freed as before. Garbage in reference cycles, which closed pages leave, is
    collected by :func:`_collect_closed_pages`.
    """
    gc.freeze()


# Closed pages' cycles are collected once closed pages number a quarter of the open ones: each
# collection walks every open page, so collecting at every close stalled every session of a full
# process each time a learner left (bench/README.md, "Issue 25, eighth pass"). A quarter is the
# growth at which Python collects its oldest objects itself.
CLOSED_SHARE_COLLECTED = 0.25
COLLECT_DELAY_S = 1.0  # after the closing hooks that still hold the page (Panel's run after ours)
_pages = {"open": 0, "closed": 0, "collecting": False}


def _count_opened_page(_session_context) -> None:
    _pages["open"] += 1


def _collect_closed_pages(_session_context) -> None:
    """On a session's end: once the pages closed since the last collection are a quarter of
    those still open (:data:`CLOSED_SHARE_COLLECTED`), a moment later every object goes back
    under the collector (:func:`gc.unfreeze`), one full collection frees the closed pages'
    cycles, and what is left is frozen again. Pages closing meanwhile wait for that one."""
    _pages["open"] = max(0, _pages["open"] - 1)
    _pages["closed"] += 1
    if _pages["collecting"] or _pages["closed"] < max(1.0, CLOSED_SHARE_COLLECTED * _pages["open"]):
        return
    _pages["closed"], _pages["collecting"] = 0, True

    def collect() -> None:
        _pages["collecting"] = False
        gc.unfreeze()
        gc.collect()
        gc.freeze()

    IOLoop.current().call_later(COLLECT_DELAY_S, collect)


def _served_locally(factory, prefix: str = ""):
    """Wrap a page factory so its stylesheets and scripts always come from this server, never a
    CDN, on a relative path that also holds for the page asked for with a trailing slash.

    Panel records where the page's CSS lives while it answers the page request. With
    ``--num-procs`` the page's websocket can reach another worker, which then builds the session
    without that request and falls back to Panel's CDN, which a classroom offline cannot reach.
    Every route sits at the top level, so the relative static path is the same for each; but
    Bokeh also answers ``/embed/`` with the ``/embed`` page, one folder deeper, while Panel counts
    the relative path from the route, so there every Panel script missed and nothing rendered.
    Under a URL ``prefix`` the path is absolute (``/class/static/…``), and kept so when the page's
    Location syncs: Panel then rewrites it to ``/static/…``, outside the prefix a proxy forwards.
    """
    from panel.io.resources import LOCAL_DIST

    def build():
        doc = pn.state.curdoc
        page = factory()  # first: the page's Location resets the relative path as it syncs
        # After the page's own onload (what it builds once the browser has drawn the first paint).
        pn.state.onload(_out_of_full_collections)
        path = getattr(doc.session_context and doc.session_context.request, "path", None) or ""
        if prefix and path.startswith(prefix + "/"):
            path = path[len(prefix):]
        if path != "/" and path.endswith("/"):
            pn.state.rel_path = ".."
        doc.template_variables["dist_url"] = (f"{pn.state.rel_path}/" if pn.state.rel_path else "") + LOCAL_DIST
        location = pn.state.location
        if prefix and location is not None:
            dist = doc.template_variables["dist_url"] = f"{prefix}/{LOCAL_DIST}"
            # After Panel's own pathname watcher (precedence 0 and below run first).
            location.param.watch(lambda _: doc.template_variables.__setitem__("dist_url", dist), "pathname",
                                 precedence=1)
        return page
    return build


def _favicon_under(prefix: str) -> list[tuple]:
    """The route for the tab icon under a URL ``prefix`` (Bokeh puts the prefix before each
    extra route): Panel's pages ask for it beside them (``./favicon.ico``, so
    ``/class/favicon.ico``), but Bokeh answers ``/favicon.ico`` only at the top, outside the prefix
    a proxy forwards, so every page had a 404. The same icon, Panel's."""
    from panel.io.resources import DIST_DIR

    return [(r"/(favicon\.ico)", StaticFileHandler, {"path": str(DIST_DIR / "images")})] if prefix else []


def _create_instructor(store: RunStore, logins=None):
    """The instructor page, its module imported on the first request for it, not at start-up.

    It needs pandas and chart code the learner page does not (~0.25 s to import on 2 cores, on
    the way to a cold server's first learner page); the first instructor page after a start pays
    for that instead, once per process.
    """
    from app.instructor import create_instructor

    return create_instructor(store, logins)


class InstructorSlashRedirect(OutputTransform):
    """Send ``/instructor/`` (typed, or a bookmark's) to ``/instructor``, its query kept.

    Bokeh answers the slashed address with the page one folder deeper, whose template asks for
    Panel's files relative to the route, so every one of them missed and the page stayed blank.
    An output transform, as :func:`app.framing.framing_transform`: Bokeh's page routes come
    before any pattern the server is given, so a redirect handler would never be reached.
    ``prefix`` is ``serve --prefix`` (a subclass sets it).
    """

    prefix = ""

    def __init__(self, request) -> None:
        super().__init__(request)
        page = self.prefix + INSTRUCTOR_PATH
        self._to = page + (f"?{request.query}" if request.query else "") \
            if request.path == f"{page}/" else None

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if self._to is None or status_code != 200:
            return status_code, headers, chunk
        headers["Location"] = self._to
        headers["Content-Length"] = "0"
        headers.pop("Content-Type", None)
        return 302, headers, b""

    def transform_chunk(self, chunk, finishing):
        return b"" if self._to is not None else chunk


def serve(store: RunStore | str, port: int = 5006, address: str = "localhost", show: bool = False,
          num_procs: int = 1, instructor_password: str | None = None,
          no_instructor_auth: bool = False, embed_origins: Sequence[str] = (),
          cookie_secret: str | None = None, allow_websocket_origin: Sequence[str] = (),
          use_xheaders: bool = False, prefix: str = "", shutdown_grace: float = SHUTDOWN_GRACE_S,
          unused_session_lifetime: float | None = None) -> None:
    """Start the server and serve until SIGTERM or SIGINT, which stop it gracefully and end the
    process (see :mod:`app.shutdown`).

    Parameters
    ----------
    store : RunStore or str
        Where runs are saved: an open store, or its URL (opened here; see :mod:`app.store`).
    port : int
        TCP port; 0 picks a free one.
    address : str
        Interface to bind (``localhost`` by default; ``0.0.0.0`` for a class server).
    num_procs : int
        Worker processes (1: no fork; 0: one per CPU, as Tornado counts them).
    instructor_password : str, optional
        Puts ``/instructor`` (and its downloads) behind Panel's login; ``/`` stays open.
    no_instructor_auth : bool
        Serve ``/instructor`` without a password even on a non-loopback address.
    embed_origins : sequence of str
        Course sites (``https://course.example``) that may frame the learner pages and receive
        the embed's messages (:mod:`app.framing`); none by default.
    cookie_secret : str, optional
        Signs the instructor's login cookie; the same for every process behind one proxy
        (default: a new random one per start, see :func:`app.auth.serve_options`).
    allow_websocket_origin : sequence of str
        More ``host[:port]`` values (a proxy's) whose pages may open the websocket (Bokeh's
        ``--allow-websocket-origin``).
    use_xheaders : bool
        Client address and scheme from ``X-Forwarded-For``/``X-Real-IP`` and
        ``X-Forwarded-Proto`` (Tornado's ``xheaders``, Bokeh's ``--use-xheaders``).
    prefix : str
        A URL prefix (``/class``) for every page (Bokeh's ``--prefix``); empty for none.
    shutdown_grace : float
        Seconds from SIGTERM (or SIGINT) to the process's end at most, saves in flight included.
    unused_session_lifetime : float or None
        Seconds a session with no open page is kept before it is dropped (Bokeh's
        ``--unused-session-lifetime``, there in milliseconds; None: one minute,
        :data:`UNUSED_SESSION_LIFETIME_MS`), checked every 10 s, or at half the lifetime when
        that is shorter.

    Raises
    ------
    ValueError
        No password for a non-loopback address without ``no_instructor_auth`` (the message
        says why), ``num_procs`` below 0, an embed origin that is not an origin, or a
        ``shutdown_grace`` or ``unused_session_lifetime`` not above 0.
    app.store.StoreOpenError
        The store cannot be opened (the message says why).
    """
    problem = exposure_problem(address, instructor_password, no_instructor_auth)
    if problem:
        raise ValueError(problem)
    if num_procs < 0:
        raise ValueError(f"--num-procs must be 0 or more, got {num_procs}")
    if not shutdown_grace > 0:
        raise ValueError(f"--shutdown-grace must be above 0 seconds, got {shutdown_grace}")
    if unused_session_lifetime is None:
        lifetime_ms = UNUSED_SESSION_LIFETIME_MS
    elif unused_session_lifetime > 0:
        lifetime_ms = max(1, round(unused_session_lifetime * 1000))
    else:
        raise ValueError(f"--unused-session-lifetime must be above 0 seconds, got {unused_session_lifetime}")
    embed_origins = parse_origins(embed_origins)
    if not isinstance(store, RunStore):
        store = RunStore(store)
    from app.auth import instructor_logins, url_host, websocket_origins

    logins = None
    if instructor_password:
        import secrets

        # Chosen here, not by Panel: the password's fingerprint in each login is made with it.
        cookie_secret = cookie_secret or secrets.token_urlsafe(32)
        logins = instructor_logins(store, instructor_password, cookie_secret)

    origins = websocket_origins(address, port, allow_websocket_origin)
    if any(origin.startswith("[") for origin in origins):
        # Bokeh's allow_websocket_origin parser cannot read "[::1]:5006" (bokeh#13811); its
        # allowed_ws_origin setting is matched as given and replaces that option.
        from bokeh.settings import settings as bokeh_settings

        bokeh_settings.allowed_ws_origin.set_value(origins)
        origins = [origin for origin in origins if not origin.startswith("[")]
    everywhere = address in ("0.0.0.0", "::")
    host = socket.gethostname() if everywhere else url_host(address)
    guarded = "password" if instructor_password else "no password"
    load_mathjax_only_for_tex()
    answer_without_nagle_delay()
    make_bokeh_container_defaults_when_first_read()
    refuse_pages_while(stopping, refuse_page)  # once a stop signal came: see app.shutdown
    log_sessions_and_errors()
    pn.state.on_session_created(_count_opened_page)
    pn.state.on_session_destroyed(_collect_closed_pages)
    if num_procs != 1:
        workers_end_with_their_parent()
    server = pn.serve(
        {"/": _served_locally(lambda: create_page(store), prefix),
         EMBED_PATH: _served_locally(lambda: create_embed(store, embed_origins), prefix),
         INSTRUCTOR_PATH: _served_locally(lambda: _create_instructor(store, logins), prefix)},
        port=port, address=address, show=show,
        title={"/": "Self-attention workbench", EMBED_PATH: EMBED_TITLE,
               INSTRUCTOR_PATH: "Instructor · Self-attention workbench"},
        websocket_origin=origins,
        extra_patterns=health_patterns(store) + _favicon_under(prefix),  # /healthz: for a balancer
        # Bokeh's own names: pn.serve passes unknown keywords on, so shorter ones are ignored.
        check_unused_sessions_milliseconds=max(1, min(CHECK_UNUSED_SESSIONS_MS, lifetime_ms // 2)),
        unused_session_lifetime_milliseconds=lifetime_ms, threaded=False, num_procs=num_procs,
        transforms=[framing_transform(embed_origins, prefix),
                    type("InstructorSlashRedirect", (InstructorSlashRedirect,), {"prefix": prefix})],
        prefix=prefix, use_xheaders=use_xheaders, start=False,
        log_function=request_refused_or_failed,  # Tornado's setting: refused requests as key=value lines
        **serve_options(instructor_password, cookie_secret, prefix, logins),
    )
    # Said once the port is bound (Bokeh's Server binds it, and forks any --num-procs workers,
    # as it is made): a port in use is then the one line on stderr, not after a line saying
    # where the workbench is. The first worker says it for all.
    from tornado.process import task_id

    if task_id() in (None, 0):
        print(f"Attention workbench: http://{host}:{port}{prefix}/  instructor page: http://{host}:{port}"
              f"{prefix}{INSTRUCTOR_PATH} ({guarded})  (runs saved to {store.where})", flush=True)
        if everywhere:
            print(f"Listening on every interface: learners on other machines open this machine's "
                  f"name or IP address, port {port} (http://localhost:{port}/ works here).", flush=True)
        if embed_origins:
            print(f"Course pages that may frame the learner pages and hear of saved runs: "
                  f"{' '.join(embed_origins)}", flush=True)
    _run_until_stopped(server, store, shutdown_grace)


def _run_until_stopped(server, store: RunStore, shutdown_grace: float) -> None:
    """Run ``server`` (made by :func:`panel.serve` with ``start=False``; in each ``--num-procs``
    worker) until a stop signal has stopped it, then close the store's connections and end the
    process (status 0)."""
    stop_on_signals(server, shutdown_grace)
    server.start()
    server.io_loop.start()
    store.close()
    end_process(0)
