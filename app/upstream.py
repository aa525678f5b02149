"""Every place the workbench changes Panel, Bokeh or Tabulator beyond their public API: the map.

Checked on the versions in :data:`CHECKED_ON`. ``tests/test_upstream.py`` fails when the
upstream behaviour an item relies on changes; read the item's line here before changing it.
Where Panel's public API could do it, it is used instead (see "public API" under each item).

Process-wide (the whole server process). The first two and the last have a figure in ``make
bench``, with and without them in the same run (``bench/upstream.py``); the others are
correctness, not speed.

- :func:`answer_without_nagle_delay` — ``TCP_NODELAY`` on every page's websocket, by putting a
  subclass of Panel's ``WSHandler`` in Bokeh's route table ``bokeh.server.urls.per_app_patterns``
  (Panel rewrites the same table itself). Why: a Bokeh message is several websocket frames, and
  with Nagle on each later frame could wait for the browser's delayed ACK.
  Upstream: no issue found; neither Bokeh nor Panel has an option for it.
- :func:`load_mathjax_only_for_tex` — replaces ``panel.io.resources._panel_use_mathjax``
  (added in holoviz/panel#8424), which loads BokehJS's MathJax bundle (its largest) when a root of
  the page is a Markdown or HTML pane (the instructor page's header is); ours asks whether any
  such pane holds TeX with maths on. Public API: ``bundle_resources``'s ``enable_mathjax``
  switch is not reachable from ``pn.serve``.
- :func:`workers_end_with_their_parent` — ``PR_SET_PDEATHSIG`` in each ``--num-procs`` worker
  (public API only: ``os.register_at_fork`` and libc's ``prctl``). Why: Tornado's forked workers
  outlived a parent stopped on its own and kept serving the port.
- :func:`refuse_pages_while` — a subclass of Panel's page handler (``DocHandler``) and of its
  ``AutoloadJsHandler`` in the same ``per_app_patterns`` table, answering in ``prepare()``
  (Tornado's public hook, before any session is made) while a condition holds. Why: a server
  shutting down must turn new learners away cheaply (nginx then asks the next server), and every
  route a pattern of ours could take comes after Bokeh's page routes.
  Public API: none; Bokeh's ``Server.stop()`` only closes the port, and its ``AuthProvider``
  hooks exist only with a login.
- :func:`send_updates_queued_during_a_write` — wraps ``panel.io.document._dispatch_msgs``
  (private), from each page's ``serve_session`` (so under ``panel serve`` too). Why: an update
  queued as a page's previous write ended was never sent, so a saved run's confirmation could
  stay on the server (``tests/test_upstream.py`` reproduces it with Panel's own queue; the class
  bench counts saves stored but never confirmed).
  Upstream: no issue found; Panel has no option for it.
- :func:`make_bokeh_container_defaults_when_first_read` — replaces Bokeh's ``HasProps.__init__``
  (a copy but for one test), wraps ``HasProps.query_properties_with_values`` and replaces
  ``bokeh.model.util.visit_immediate_value_references``. Why: Bokeh makes every model's
  default lists, dicts and sets when the model is built, each a wrapper object with a set of its
  owners, nearly all of them empty and never read: memory every open page held (the figure is
  in bench/README.md). The page's first message is the same
  (``tests/test_upstream.py`` compares it). Public API: none. Upstream: Bokeh's own ``TODO`` in
  ``query_properties_with_values`` ("this should happen before get_value()"); no issue found
  for the defaults made at once.

Private Panel names

- :func:`instructor_auth_provider` — Panel's ``BasicAuthProvider`` for the instructor page:

  - ``_allow_guest(uri)`` overridden: a guest is told apart by the request's *path*. Panel
    compares the whole URI with its ``guest_endpoints``, so ``/?runs=…`` (the learner page after
    a save) was sent to the login, and ``/autoload.js`` is not covered. Public API: only
    ``guest_endpoints``/``oauth_guest_endpoints``, matched exactly. Upstream: no issue found.
  - the login handler's ``_validate(username, password)`` overridden: one user, compared in
    constant time. Panel's compares with ``==`` and reads a file when the password names one;
    the public ``basic_auth`` has no other check. Upstream: no issue found. It also tells the
    operator's log of the attempt, as the logout handler's ``get`` (subclassed) tells of a
    logout: Panel logs neither.
  - ``_login_template``/``_logout_template`` set to templates compiled with our own Jinja loader.
    Public API: ``login_template=``/``logout_template=`` take a file that Panel compiles with its
    own loader, where the frame both pages extend (``auth_page.html``) is not found.
  - ``get_user`` (Bokeh's public ``AuthProvider`` API) wrapped: ``autoload.js`` without a login
    is refused with 403 instead of a traceback in the log, and a protected page or websocket
    needs the login's own cookie, still holding (:mod:`app.logins`): Panel's ``user`` cookie
    alone stayed good after a logout, in every copy of it.
  - the login handler's ``post`` (refused first when its address must wait:
    :mod:`app.login_limit`) and ``set_current_user`` (which Panel's ``post`` calls; the login's
    own cookie set beside Panel's), and the logout handler's ``get`` (the login ended, its
    cookie cleared). Public API: none; Panel has no hook after a login or before a form is checked.

- :func:`close_session_connections` — closes a session's websockets through Bokeh's
  ``ServerSession._subscribed_connections`` and ``ServerConnection._socket``. Why: an instructor
  page whose login ended must hear nothing more, whatever its browser does; Bokeh closes them
  only when the server stops. Upstream: no issue found.

- :func:`free_notifications_on_close` — registers the session's notification area's
  ``_server_destroy`` hook. Why: Panel's own hook looks the area up after Bokeh has dropped the
  document, so every closed page's area, model and document stayed in ``pn.state._views``
  (``tests/test_session_memory.py`` fails without it). Upstream: no issue found for this path.
- The figures' canvas edge (``app/shared/canvas_edge.css``) — a stylesheet on each heat map's,
  contributions chart's and class picture's figure hides the first pixel column and row of
  BokehJS's ``.bk-Canvas`` element (its class name is BokehJS's own). Why: BokehJS clears the
  canvas half a pixel in, so that edge keeps marks from an early paint (":" or "|" at a
  figure's left edge). Upstream: no issue found.
- The instructor table's resync script (``TABLE_RESYNC_JS``, in ``app/instructor/``) — uses
  Panel's ``DataTabulatorView._building`` and ``setData()``, Tabulator's own ``getDataCount()``
  and ``getData()``, and BokehJS's public ``Bokeh.index`` and ``child_views``. Why: two data changes in quick
  succession left Panel's Tabulator showing the first one's rows (a browser test,
  ``tests/test_instructor_browser.py``, reproduces it). Upstream: no issue found.

In tests: ``tests/test_instructor_password.py`` renders ``login_handler._login_template`` and
``logout_handler._logout_template`` with the arguments Panel's handlers pass;
``tests/test_server.py`` reads ``per_app_patterns`` and a websocket handler's ``ws_connection``;
``tests/workbench_server.py`` and ``tests/test_instructor_browser.py`` walk BokehJS's
``child_views`` to Panel's Tabulator view and call Tabulator's own ``setData``.
``tests/test_upstream.py`` pins what each relies on.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable

#: The versions every item above was checked on (``tests/test_upstream.py`` says when they differ).
CHECKED_ON = {"panel": "1.9.4", "bokeh": "3.9.2", "tornado": "6.6.1"}


def answer_without_nagle_delay() -> None:
    """Have every page's websocket send each message at once (``TCP_NODELAY``).

    BokehJS and the server speak in messages of three or more websocket frames (header, metadata,
    content, buffers), each its own write. With Nagle's algorithm on, as Tornado leaves it, a
    frame waits until the browser's side has acknowledged the one before, and that side delays
    an acknowledgement by up to 40 ms (Linux's delayed ACK): every answer to an edit, and the
    page's first document, came late, on loopback too. Tornado's own advice is
    ``set_nodelay(True)`` once the connection is open. Panel routes ``/ws`` of every page to its
    own ``WSHandler`` through Bokeh's ``per_app_patterns``; this puts a subclass of it there that
    does so. Idempotent. The benchmarks' floors (bench/baseline_app.py, instructor_floor.py) are
    served with it too, so they stay the floor of this server.
    """
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import WSHandler

    if any(getattr(handler, "sends_at_once", False) for _, handler in per_app_patterns):
        return

    class PromptWSHandler(WSHandler):
        sends_at_once = True

        def open(self):
            self.set_nodelay(True)
            return super().open()

    per_app_patterns[:] = [(route, PromptWSHandler if route == r"/ws" else handler)
                           for route, handler in per_app_patterns]


def send_updates_queued_during_a_write() -> None:
    """Have Panel send every update it queued for a page while a write to that page's websocket
    was under way.

    Panel queues a page's updates (``panel.io.document._WRITE_MSGS``) while its websocket is
    being written to (``_WRITE_BLOCK``), and schedules ``_dispatch_msgs`` to send them. When the
    write under way ends in the same turn of the event loop as the next update is queued, that
    write's own ``_dispatch_msgs`` clears the block first, and the one scheduled for the new
    update sees no block and returns without sending: the update stays queued until the page
    changes again. A saved run's confirmation is often a page's last change until its learner
    acts again, so the run was stored but the page never said so. Wrapped here, a queued update
    is always sent, after those queued before it: its block is set again before Panel's own code
    runs. Idempotent.
    """
    from functools import wraps

    from panel.io import document

    if getattr(document._dispatch_msgs, "sends_queued_updates", False):
        return
    dispatch = document._dispatch_msgs

    @wraps(dispatch)
    async def _dispatch_msgs(doc):
        if doc in document._WRITE_MSGS:
            document._WRITE_BLOCK[doc] = True
        await dispatch(doc)

    _dispatch_msgs.sends_queued_updates = True
    document._dispatch_msgs = _dispatch_msgs  # Panel reschedules it by this module-level name


def refuse_pages_while(refusing: Callable[[], bool], answer: Callable[[object], None]) -> None:
    """Have every page request answered by ``answer(handler)`` instead of a new session while
    ``refusing()`` holds.

    Panel serves each page (``/``, ``/embed``, ``/instructor``, under any prefix) and its
    ``autoload.js`` through the handlers in Bokeh's route table ``per_app_patterns``; this puts
    subclasses of them there whose ``prepare()`` asks ``refusing()`` first and, when it holds,
    lets ``answer`` finish the request (a session costs a whole page to build). A page's
    websocket is never refused: its session exists already. Call before :func:`panel.serve`.
    Idempotent: the first call's ``refusing`` and ``answer`` stay.

    Parameters
    ----------
    refusing : callable () -> bool
        Asked on each page request, on the server's event loop: cheap, never blocking.
    answer : callable (tornado.web.RequestHandler) -> None
        Writes and finishes the refusal (status, headers, body).
    """
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import AutoloadJsHandler, DocHandler

    if any(getattr(handler, "refuses_pages", False) for _, handler in per_app_patterns):
        return

    def refusing_subclass(base: type) -> type:
        class Refusing(base):
            refuses_pages = True

            async def prepare(self):
                if refusing():
                    answer(self)
                    return
                result = super().prepare()
                if result is not None:
                    await result
        Refusing.__name__ = Refusing.__qualname__ = f"Refusing{base.__name__}"
        return Refusing

    per_app_patterns[:] = [
        (route, refusing_subclass(handler) if issubclass(handler, (DocHandler, AutoloadJsHandler)) else handler)
        for route, handler in per_app_patterns]


def panel_html_needs_mathjax(roots) -> bool:
    """Whether any Panel HTML model under ``roots`` has maths enabled and holds TeX to typeset.

    What Panel asks instead is whether a root of the page is a Panel HTML model at all (every
    HTML, Markdown and Alert pane is one), so it puts BokehJS's MathJax bundle on the instructor
    page, which typesets no maths. HTML panes have maths off; the Markdown text is ours and holds no TeX
    delimiters; learners' text is only ever shown as text. A page whose Markdown does hold
    ``$$…$$``, ``\\(…\\)`` or ``\\[…\\]`` still gets the bundle (text that only arrives after
    the page was built would be shown as typed).
    """
    from bokeh.embed.util import contains_tex_string
    from panel.models.markup import HTML

    return any(
        isinstance(model, HTML) and not model.disable_math and contains_tex_string(model.text or "")
        for root in roots for model in root.references())


def load_mathjax_only_for_tex() -> None:
    """Make Panel's page bundle ask :func:`panel_html_needs_mathjax` whether to load MathJax.

    A Panel without the check this replaces keeps its own (pages still work, with the bundle);
    ``tests/test_upstream.py`` fails then.
    """
    from panel.io import resources

    if hasattr(resources, "_panel_use_mathjax"):
        resources._panel_use_mathjax = panel_html_needs_mathjax


def _value_holders(model) -> tuple[dict, ...]:
    """Where ``model``'s properties that hold a value are: set, a default already read (Bokeh's
    ``_unstable_default_values``), or themed. Looked up, not merged: the references walk asks
    this of every model of a page each time the document's models are counted again."""
    return model._property_values, model._unstable_default_values, model.themed_values() or {}


def make_bokeh_container_defaults_when_first_read() -> None:
    """Have every Bokeh model make its default lists, dicts and sets (``tags``,
    ``js_event_callbacks``, ``css_classes``, …) the first time one is read, not when it is built.

    Bokeh 3.9's ``HasProps.__init__`` makes every such default at once, each a wrapper object
    with an instance dict and a set of owners, nearly all of them empty and never read again.
    Three places change together, so that none of them reads a default it does not need:

    - ``HasProps.__init__`` (copied from Bokeh 3.9.2 but for the one test marked below) makes
      only the defaults that are not lists, dicts or sets (models such as a figure's
      ``Toolbar``, which must be sent with the page; sequences Bokeh does not wrap, which it
      sends as they are).
    - ``HasProps.query_properties_with_values`` with ``include_defaults=False`` (what a model's
      serialization asks) no longer reads a property it is about to leave out: Bokeh reads every
      property first, then drops the ones not set (its own ``TODO`` says it should not). A
      property with no default is still read, so one left unset still raises Bokeh's
      ``UnsetValueError`` on the server.
    - ``bokeh.model.util.visit_immediate_value_references`` (the walk behind ``references()``
      and a document's models) visits only properties holding a value: a default never read is
      an empty container or a fixed value and refers to no model.

    What the browser gets is the same: a container default nobody changed was never sent
    (``tests/test_upstream.py`` compares the learner's and the instructor's page both ways). Read later, a
    default is made as before and changes to it are sent. ``bench/page_memory.py`` and the
    classroom bench give the figure.
    """
    from bokeh.core import has_props
    from bokeh.core.property.container import Dict, List, Set
    from bokeh.core.property.singletons import Intrinsic, Undefined
    from bokeh.model import util

    if getattr(has_props.HasProps.__init__, "defaults_when_first_read", False):
        return
    # The containers Bokeh wraps to hear of changes; such a default, unchanged, is never sent.
    wrapped = (List, Set, Dict)

    def __init__(self, **properties) -> None:
        super(has_props.HasProps, self).__init__()
        self._property_values = {}
        self._unstable_default_values = {}
        self._unstable_themed_values = {}
        for name, value in properties.items():
            if value is Undefined or value is Intrinsic:
                continue
            setattr(self, name, value)
        initialized = set(properties.keys())
        for name in self.properties(_with_props=True):
            if name in initialized:
                continue
            desc = self.lookup(name)
            # The one change: a list, set or dict default is made when first read (descriptor._get).
            if desc.has_unstable_default(self) and not isinstance(desc.property, wrapped):
                desc._get(self)
        self._initialized = True

    __init__.defaults_when_first_read = True
    has_props.HasProps.__init__ = __init__

    query_all = has_props.HasProps.query_properties_with_values

    @functools.cache
    def required(cls, name: str) -> bool:  # no default: Bokeh's read of it raises, as it should
        # Not class_default(no_eval=True): that leaves an unevaluated default in Bokeh's cache.
        return cls.lookup(name).property._default is Undefined and name not in cls.__overridden_defaults__

    def query_properties_with_values(self, query, *, include_defaults=True, include_undefined=False):
        if not include_defaults:
            holders, asked, cls = _value_holders(self), query, type(self)

            def query(descriptor):
                name = descriptor.name
                return (any(name in held for held in holders) or required(cls, name)) and asked(descriptor)
        return query_all(self, query, include_defaults=include_defaults, include_undefined=include_undefined)

    has_props.HasProps.query_properties_with_values = query_properties_with_values

    def visit_immediate_value_references(value, visitor) -> None:
        if isinstance(value, has_props.HasProps):
            holders = _value_holders(value)
            for name in value.properties_with_refs():
                if any(name in held for held in holders):
                    util.visit_value_and_its_immediate_references(getattr(value, name), visitor)
        else:
            util.visit_value_and_its_immediate_references(value, visitor)

    util.visit_immediate_value_references = visit_immediate_value_references


def workers_end_with_their_parent() -> None:
    """Have every worker forked from here get SIGTERM when the process that forked it ends.

    With ``--num-procs`` Tornado forks the workers and the first process only waits for them;
    stopped on its own (``kill <pid>``, a supervisor that signals one process), it left them
    running, re-parented to init and still serving the port. Linux's ``PR_SET_PDEATHSIG`` ties
    each worker to it; elsewhere nothing changes.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def in_worker() -> None:
        prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    os.register_at_fork(after_in_child=in_worker)


def free_notifications_on_close() -> None:
    """Have this session's notification area let go of its document when the session ends.

    Panel registers the area as a view of the page and forgets it only in its own destroy hook,
    which looks the area up after Bokeh has already dropped the document from that lookup: every
    closed page's area, model and document stayed in ``pn.state._views`` for good. The area's
    own server hook (private to Panel) is the one that removes it. Call it inside a session.
    """
    import panel as pn

    notifications = pn.state.notifications  # created now; Panel adds this same one to the page
    if notifications is not None:
        pn.state.on_session_destroyed(notifications._server_destroy)


def instructor_auth_provider(*, credentials_match: Callable[[str, str], bool],
                             is_guest: Callable[[str], bool], login_template, logout_template,
                             logout_endpoint: str, guest_endpoints: list[str],
                             on_login: Callable[[object, bool], None] = lambda request, ok: None,
                             on_logout: Callable[[object], None] = lambda request: None,
                             logins=None, login_cookie: str = "instructor_login",
                             refuse_login: Callable[[object], bool] = lambda handler: False):
    """Panel's basic-auth provider with our login check, guests, templates and script refusal.

    Parameters
    ----------
    credentials_match : callable (username, password) -> bool
        The login form's check, instead of Panel's comparison with its ``basic_auth`` setting.
    is_guest : callable (uri) -> bool
        Whether a request for ``uri`` (path and query string) needs no login.
    login_template, logout_template : jinja2.Template
        The pages, rendered with the arguments Panel's ``BasicLoginHandler`` and
        ``LogoutHandler`` pass.
    logout_endpoint : str
        Where the logout page is served.
    guest_endpoints : list of str
        Given to Panel as well (its own session bookkeeping reads them).
    on_login : callable (request, succeeded) -> None
        Told of each login form sent, with its Tornado request and whether it logged in.
    on_logout : callable (request) -> None
        Told of each logout page asked for, with its Tornado request.
    logins : app.logins.Logins, optional
        Each login gets its own signed cookie ``login_cookie`` (``logins.new_cookie()``), which
        every request for a protected page or its websocket must carry and ``logins.allows``;
        a logout ends it (``logins.end``) and clears it. While the store cannot say
        (unreachable), such a request is answered 503 with a page saying so that asks again by
        itself (:func:`app.logins.store_cannot_check_login_page`).
    login_cookie : str
        That cookie's name.
    refuse_login : callable (handler) -> bool
        Asked before a login form is checked; True when it has answered the request itself
        (a limited address), so the form is not checked.

    Returns
    -------
    panel.auth.BasicAuthProvider
        A ready instance, for ``pn.serve(auth_provider=...)``.
    """
    from panel.auth import BasicAuthProvider
    from panel.config import config
    from tornado.web import Finish, HTTPError

    from app.logins import RETRY_CHECK_S, STORE_CANNOT_CHECK_LOGIN, store_cannot_check_login_page

    class InstructorAuthProvider(BasicAuthProvider):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._login_template = login_template
            self._logout_template = logout_template

        @property
        def login_handler(self):
            base = super().login_handler  # Panel's form, with our template and endpoint

            class InstructorLoginHandler(base):
                def post(self):
                    if not refuse_login(self):
                        super().post()

                def _validate(self, username, password):
                    succeeded = credentials_match(username, password)
                    on_login(self.request, succeeded)
                    return succeeded

                def set_current_user(self, user):
                    super().set_current_user(user)  # Panel's "user" cookie
                    if user and logins is not None:
                        self.set_secure_cookie(login_cookie, logins.new_cookie(), expires_days=config.oauth_expiry,
                                               httponly=True, path=config.cookie_path)
            return InstructorLoginHandler

        @property
        def logout_handler(self):
            base = super().logout_handler  # Panel's page, with our template

            class InstructorLogoutHandler(base):
                def get(self):
                    on_logout(self.request)
                    if logins is not None:
                        logins.end(self.get_secure_cookie(login_cookie, max_age_days=config.oauth_expiry),
                                   getattr(self.request, "remote_ip", None))
                        self.clear_cookie(login_cookie, path=config.cookie_path)
                    super().get()
            return InstructorLogoutHandler

        def _allow_guest(self, uri):
            return is_guest(uri)

        @property
        def get_user(self):
            get_user = super().get_user

            def get_user_or_refuse_a_script(handler):
                allowed = True if logins is None or is_guest(handler.request.uri) else logins.allows(
                    handler.get_secure_cookie(login_cookie, max_age_days=config.oauth_expiry))
                if allowed is None:  # the store cannot say
                    if handler.request.path.endswith("/ws"):  # a websocket: no page to read
                        raise HTTPError(503, reason=STORE_CANNOT_CHECK_LOGIN)
                    # A page that says why and asks again by itself (Tornado's error page was
                    # the bare sentence, and the instructor had to think of reloading).
                    handler.set_status(503)
                    handler.set_header("Content-Type", "text/html; charset=utf-8")
                    handler.set_header("Cache-Control", "no-store")
                    handler.set_header("Retry-After", str(RETRY_CHECK_S))
                    raise Finish(store_cannot_check_login_page())
                if not allowed:
                    user = None  # no login of this password, or one that ended: log in again
                else:
                    user = get_user(handler)
                # Panel's autoload handler awaits a session that Tornado's login redirect never
                # makes (a TypeError traceback in the log): a script cannot log in, so refuse.
                if user is None and handler.request.path.endswith("/autoload.js"):
                    raise HTTPError(403)
                return user
            return get_user_or_refuse_a_script

    return InstructorAuthProvider(logout_endpoint=logout_endpoint, guest_endpoints=guest_endpoints)


def close_session_connections(doc) -> None:
    """Close every websocket of the session behind Bokeh document ``doc`` from the server's side
    (nothing outside a server session).

    Bokeh keeps a session's connections in ``ServerSession._subscribed_connections`` and each
    connection's Tornado websocket handler in ``ServerConnection._socket``; neither has a public
    way to end a session's connection (Bokeh closes them only when the server stops). Used when
    an instructor's login ends: the page must hear nothing more, whatever its browser does.
    """
    context = getattr(doc, "session_context", None)
    session = getattr(context, "session", None)
    for connection in list(getattr(session, "_subscribed_connections", ())):
        connection._socket.close()
