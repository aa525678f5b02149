"""What app/upstream.py relies on in Panel, Bokeh, Tornado and Tabulator: each test fails when
that upstream behaviour changes, before a page quietly does. Read the item in app/upstream.py."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import panel as pn
import pytest
from bokeh.document import Document
from jinja2 import Template
from store_helpers import run_async
from workbench_server import ROOT

from app import auth, upstream

APP = ROOT / "app"


def _package_file(package: str, *parts: str) -> Path:
    return Path(__import__(package).__file__).resolve().parent.joinpath(*parts)


@pytest.mark.parametrize("package", ["bokeh", "panel"])
def test_the_installed_release_is_the_one_the_map_was_checked_on(package):
    # Same minor release (pyproject.toml pins these two to one minor): a new minor means re-reading
    # the map. Tornado is not pinned; what the map relies on of it is its public API.
    checked, installed = upstream.CHECKED_ON[package], version(package)
    assert installed.split(".")[:2] == checked.split(".")[:2], (
        f"{package} {installed}, app/upstream.py was checked on {checked}")


def test_bokeh_routes_every_pages_websocket_through_per_app_patterns_to_panels_handler():
    from bokeh.server import tornado as bokeh_tornado
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import WSHandler

    upstream.answer_without_nagle_delay()
    routes = dict(per_app_patterns)
    assert issubclass(routes[r"/ws"], WSHandler) and routes[r"/ws"].sends_at_once
    # Bokeh reads the table when it builds each application's routes, so a change made before
    # pn.serve is the one served.
    assert "per_app_patterns" in inspect.getsource(bokeh_tornado.BokehTornado.__init__)
    assert callable(WSHandler.set_nodelay) and callable(WSHandler.open)


def test_bokeh_routes_every_page_and_autoload_through_per_app_patterns_to_panels_handlers():
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import AutoloadJsHandler, DocHandler
    from tornado.web import RequestHandler

    from app import health, shutdown

    upstream.refuse_pages_while(health.stopping, shutdown.refuse_page)  # as serve does
    routes = dict(per_app_patterns)
    assert issubclass(routes[r"/?"], DocHandler) and routes[r"/?"].refuses_pages
    assert issubclass(routes[r"/autoload.js"], AutoloadJsHandler) and routes[r"/autoload.js"].refuses_pages
    assert not getattr(routes[r"/ws"], "refuses_pages", False)  # an open page's websocket is served
    # Tornado awaits prepare() first and runs no get() once prepare() has finished the request.
    execute = inspect.getsource(RequestHandler._execute)
    assert execute.index("self.prepare()") < execute.index("if self._finished:") < execute.index("method(")


def test_panels_bundle_asks_its_module_level_mathjax_check_with_the_roots():
    from panel.io import resources

    assert list(inspect.signature(resources._panel_use_mathjax).parameters) == ["roots"]
    # Looked up as a module global at call time: replacing the attribute changes the answer.
    assert "_panel_use_mathjax(roots)" in inspect.getsource(resources.bundle_resources)
    upstream.load_mathjax_only_for_tex()
    assert resources._panel_use_mathjax is upstream.panel_html_needs_mathjax


def test_panels_own_check_loads_mathjax_for_a_page_rooted_in_an_html_pane_and_ours_does_not():
    # Panel looks at the document's roots only (the instructor page's header is one). In a child
    # process: this one may have replaced Panel's check already.
    code = (
        "import panel as pn\n"
        "from bokeh.document import Document\n"
        "from panel.io import resources\n"
        "from app.upstream import load_mathjax_only_for_tex\n"
        "roots = [pn.pane.HTML('<p>Runs: 3</p>').get_root(Document())]\n"
        "def mathjax():\n"
        "    files = resources.bundle_resources(roots, resources.Resources(mode='server')).js_files\n"
        "    return any('bokeh-mathjax' in str(url) for url in files)\n"
        "before = mathjax()\n"
        "load_mathjax_only_for_tex()\n"
        "print(before, mathjax())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]


def test_pages_leave_out_mathjax_unless_they_hold_tex():
    def needs(pane) -> bool:
        return upstream.panel_html_needs_mathjax([pane.get_root(Document())])

    assert not needs(pn.pane.Markdown("**Causal mask**: scores become −∞ *before* softmax"))
    assert not needs(pn.pane.HTML("<p>$$x^2$$ typed by a learner</p>"))  # HTML panes: maths off
    assert needs(pn.pane.Markdown("A formula: $$\\sqrt{d_k}$$"))
    assert needs(pn.Column(pn.pane.Markdown(r"Inline \\(x\\)")))  # Markdown eats one backslash


def _request(uri: str):
    """A plain (not websocket) request handler without a login cookie, as Panel's get_user sees one."""
    path = uri.partition("?")[0]
    return SimpleNamespace(get_secure_cookie=lambda *a, **k: None, set_cookie=lambda *a, **k: None,
                           request=SimpleNamespace(uri=uri, path=path, cookies={}))


def test_panels_basic_auth_asks_allow_guest_with_the_whole_uri():
    provider = auth.serve_options("pw")["auth_provider"]
    assert list(inspect.signature(type(provider)._allow_guest).parameters) == ["self", "uri"]
    assert provider.get_user(_request("/?runs=a,b")) == "guest"  # Panel alone: the login
    assert provider.get_user(_request("/embed/ws?x=1")) == "guest"
    assert provider.get_user(_request("/instructor?x=1")) is None
    with pytest.raises(Exception, match="403"):
        provider.get_user(_request("/instructor/autoload.js"))


def test_panels_login_form_checks_with_validate_and_renders_the_providers_templates():
    from panel.auth import BasicLoginHandler, LogoutHandler

    assert "self._validate(username, password)" in inspect.getsource(BasicLoginHandler.post)
    assert "self._login_template.render(" in inspect.getsource(BasicLoginHandler.get)
    assert "self._logout_template.render(" in inspect.getsource(LogoutHandler.get)
    provider = auth.serve_options("README.md")["auth_provider"]
    login, logout = provider.login_handler, provider.logout_handler
    assert issubclass(login, BasicLoginHandler) and issubclass(logout, LogoutHandler)
    assert isinstance(login._login_template, Template) and isinstance(logout._logout_template, Template)
    assert "Instructor login" in login._login_template.render(
        login_endpoint="/login", errormessage="", PANEL_CDN="")
    handler = SimpleNamespace(request=SimpleNamespace(remote_ip="127.0.0.1"))  # read for the operator's log
    assert login._validate(handler, "instructor", "README.md")
    assert not login._validate(handler, "instructor", "readme.md") and not login._validate(handler, "x", "README.md")


def test_panels_login_form_sets_its_user_through_set_current_user_and_logout_clears_in_get():
    from panel.auth import BasicLoginHandler, LogoutHandler

    assert "self.set_current_user(username)" in inspect.getsource(BasicLoginHandler.post)
    assert list(inspect.signature(BasicLoginHandler.set_current_user).parameters) == ["self", "user"]
    assert 'self.clear_cookie("user")' in inspect.getsource(LogoutHandler.get)


def test_bokeh_keeps_a_sessions_websockets_where_closing_them_looks():
    from bokeh.server.connection import ServerConnection
    from bokeh.server.contexts import BokehSessionContext
    from bokeh.server.session import ServerSession

    from app.upstream import close_session_connections

    assert "self._subscribed_connections" in inspect.getsource(ServerSession.__init__)
    assert "self._socket = socket" in inspect.getsource(ServerConnection.__init__)
    assert isinstance(BokehSessionContext.session, property)
    closed = []
    socket = SimpleNamespace(close=lambda: closed.append(True))
    session = SimpleNamespace(_subscribed_connections=[SimpleNamespace(_socket=socket)])
    close_session_connections(SimpleNamespace(session_context=SimpleNamespace(session=session)))
    close_session_connections(SimpleNamespace(session_context=None))  # outside a server: nothing
    assert closed == [True]


def test_a_notification_areas_server_destroy_hook_takes_the_session_context():
    from panel.io.notifications import NotificationArea

    assert list(inspect.signature(NotificationArea._server_destroy).parameters) == ["self", "session_context"]
    # It finds the page's root by the session's document, which is why it works as a hook.
    assert "session_context._document" in inspect.getsource(NotificationArea._server_destroy)


def test_the_table_resync_script_uses_what_panels_tabulator_view_and_bokehjs_have():
    scripts = [text for path in sorted(APP.rglob("*")) if path.suffix in (".py", ".js")
               for text in [path.read_text(encoding="utf-8")] if "view._building" in text]
    assert len(scripts) == 1, "the resync script (TABLE_RESYNC_JS) is expected in one file under app/"
    for name in ("view._building", "view.setData()", "view.child_views", "view.tabulator", "Bokeh.index"):
        assert name in scripts[0]
    view = _package_file("panel", "models", "tabulator.ts").read_text(encoding="utf-8")
    body = view[view.index("export class DataTabulatorView"):]
    assert re.search(r"^  _building: boolean", body, re.M)
    assert re.search(r"^  setData\(\): Promise<void>", body, re.M)
    assert "_building" in _package_file("panel", "dist", "panel.min.js").read_text(encoding="utf-8")
    layout = _package_file("bokeh", "server", "static", "js", "lib", "models", "layouts", "layout_dom.d.ts")
    assert "get child_views(): UIElementView[];" in layout.read_text(encoding="utf-8")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_num_procs_workers_are_tied_to_their_parent():
    # In a child process: the fork hook is process-wide.
    code = (
        "import ctypes, os, signal\n"
        "from app.upstream import workers_end_with_their_parent\n"
        "workers_end_with_their_parent()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    got = ctypes.c_int()\n"
        "    ctypes.CDLL(None).prctl(2, ctypes.byref(got))  # PR_GET_PDEATHSIG\n"
        "    os._exit(0 if got.value == signal.SIGTERM else 1)\n"
        "print(os.waitpid(pid, 0)[1])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def _sent_when_a_write_ends_as_the_next_update_queues(monkeypatch) -> list:
    """Panel's write queue for one page: a write to its websocket is under way; it ends, and in
    the same turn of the event loop the page's next update is queued (as a Save run's
    confirmation can be). Returns what reached the page's socket, through Panel's own
    ``schedule_write_events`` and ``_dispatch_msgs`` (``extra_socket_handlers`` is Panel's hook
    for other sockets' writes)."""
    import asyncio

    from panel.io import document as panel_document

    class Socket:
        pass

    class Connection:  # what Panel reads of Bokeh's ServerConnection
        _socket = Socket()
        protocol = SimpleNamespace(create=lambda _kind, events: events)

    connection = Connection()
    doc = Document()
    sent: list = []

    async def page() -> None:
        write_under_way = asyncio.get_running_loop().create_future()

        def write(_connection, msg=None):
            sent.append(msg)
            return [write_under_way] if msg == ["first update"] else []

        monkeypatch.setitem(panel_document.extra_socket_handlers, Socket, write)
        panel_document.schedule_write_events(doc, [connection], ["first update"])
        await asyncio.sleep(0.01)  # being written
        write_under_way.set_result(None)  # the write ends: its dispatch goes on in the next turn
        panel_document.schedule_write_events(doc, [connection], ["Saved run #1"])
        await asyncio.sleep(0.05)

    try:
        run_async(page())  # not asyncio.run: a browser test before it in this worker holds a loop
    finally:
        for queue in (panel_document._WRITE_MSGS, panel_document._WRITE_BLOCK, panel_document._write_tasks):
            queue.pop(doc, None)
    return sent


def test_panel_leaves_an_update_queued_as_a_write_ends_unsent(monkeypatch):
    """What ``send_updates_queued_during_a_write`` is for: when this fails, Panel sends it itself."""
    from panel.io import document as panel_document

    monkeypatch.setattr(panel_document, "_dispatch_msgs",
                        getattr(panel_document._dispatch_msgs, "__wrapped__", panel_document._dispatch_msgs))
    assert _sent_when_a_write_ends_as_the_next_update_queues(monkeypatch) == [["first update"]]


def test_an_update_queued_as_a_write_ends_is_sent(monkeypatch):
    from panel.io import document as panel_document

    monkeypatch.setattr(panel_document, "_dispatch_msgs",
                        getattr(panel_document._dispatch_msgs, "__wrapped__", panel_document._dispatch_msgs))
    upstream.send_updates_queued_during_a_write()
    upstream.send_updates_queued_during_a_write()  # idempotent: wrapped once
    assert panel_document._dispatch_msgs.__wrapped__.__name__ == "_dispatch_msgs"
    assert not hasattr(panel_document._dispatch_msgs.__wrapped__, "__wrapped__")
    assert _sent_when_a_write_ends_as_the_next_update_queues(monkeypatch) == [["first update"], ["Saved run #1"]]


def test_every_served_page_sends_queued_updates(monkeypatch, tmp_path):
    """Both pages' session set-up wraps the queue, so ``panel serve`` of a page module does too."""
    from panel.io import document as panel_document

    from app.instructor.page import InstructorPage
    from app.learner.page import LearnerPage
    from app.store import RunStore, sqlite_url

    unwrapped = getattr(panel_document._dispatch_msgs, "__wrapped__", panel_document._dispatch_msgs)
    store = RunStore(sqlite_url(tmp_path / "runs.db"))
    try:
        for page in (lambda: LearnerPage(store=store), lambda: InstructorPage(store)):
            monkeypatch.setattr(panel_document, "_dispatch_msgs", unwrapped)
            page().serve_session()
            assert getattr(panel_document._dispatch_msgs, "sends_queued_updates", False)
    finally:
        store.close()


# The learner and the instructor page built into Documents, as a session builds them, with
# Bokeh's container defaults made at once (``bokeh``) or when first read (``ours``): each page's
# first message and the container defaults its models hold; a default never read that the
# browser changes, and one read after the build that the server changes; a model left without
# a required value.
_CONTAINER_DEFAULTS_PROBE = r'''
import hashlib, inspect, json, sys, tempfile
from pathlib import Path
from bokeh.core.has_props import HasProps
bokeh_init = hashlib.sha256(inspect.getsource(HasProps.__init__).encode()).hexdigest()
if sys.argv[1] == "ours":
    from app.upstream import make_bokeh_container_defaults_when_first_read
    make_bokeh_container_defaults_when_first_read()
    make_bokeh_container_defaults_when_first_read()  # once is enough; a second call changes nothing
import panel as pn
from bokeh.core.property.descriptors import UnsetValueError
from bokeh.core.property.wrappers import PropertyValueContainer
from bokeh.core.serialization import Serializer
from bokeh.document import Document
from bokeh.models import Div, GlyphRenderer
from app.instructor.page import InstructorPage
from app.learner.page import LearnerPage
from app.store import RunStore, sqlite_url

def comparable(o):
    """Sets as sets (a set's order follows string hashes); a CustomJS's tags hold id() numbers."""
    if isinstance(o, dict):
        if o.get("type") == "set":
            return {"type": "set", "entries": sorted(o["entries"], key=repr)}
        if o.get("name") == "CustomJS":
            o = {**o, "attributes": {k: v for k, v in o.get("attributes", {}).items() if k != "tags"}}
        return {k: comparable(v) for k, v in o.items()}
    return [comparable(x) for x in o] if isinstance(o, (list, tuple)) else o  # a map's entries are tuples

store = RunStore(sqlite_url(Path(tempfile.mkdtemp()) / "runs.db"))
out = {"bokeh_init": bokeh_init}
for name, page in (("learner", lambda: LearnerPage(store=store)), ("instructor", lambda: InstructorPage(store))):
    doc = Document()
    doc.add_root(pn.panel(page()).get_root(doc))
    out[name] = {"message": comparable(doc.to_json(deferred=False)), "models": len(doc.models),
                 "held": sum(isinstance(v, PropertyValueContainer)
                             for m in doc.models for v in m._unstable_default_values.values())}
doc = Document()
read_late, from_browser = Div(), Div()
doc.add_root(read_late)
doc.add_root(from_browser)
changes, heard = [], []
doc.on_change(changes.append)
read_late.css_classes.append("read-after-the-build")
changes_sent = len(changes)
from_browser.on_change("tags", lambda attr, old, new: heard.append([old, new]))
doc.apply_json_patch({"events": [{"kind": "ModelChanged", "model": {"id": from_browser.id}, "attr": "tags",
                                  "new": ["from the browser"]}]}, setter="browser")
sent = json.dumps(comparable(doc.to_json(deferred=False)))
try:
    Serializer().encode(GlyphRenderer())  # its glyph is required and unset
    required_raises = False
except UnsetValueError:
    required_raises = True
out.update(changes=changes_sent, css_classes=list(read_late.css_classes), heard=heard,
           sent=["read-after-the-build" in sent, "from the browser" in sent], required_raises=required_raises)
print(json.dumps(out))
'''


def _container_defaults_probe(which: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CONTAINER_DEFAULTS_PROBE, which], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


# Bokeh 3.9.2's HasProps.__init__, which make_bokeh_container_defaults_when_first_read copies
# but for one test: when this changes, copy the new one (app/upstream.py) and update the hash.
BOKEH_HAS_PROPS_INIT_SHA256 = "8184f3bb9444ab37630421c2562aa825420a3a12000c6aba0edca39dea815f30"


def test_each_pages_first_message_is_the_same_with_container_defaults_made_when_first_read():
    bokehs, ours = _container_defaults_probe("bokeh"), _container_defaults_probe("ours")
    assert bokehs["bokeh_init"] == BOKEH_HAS_PROPS_INIT_SHA256, "Bokeh's HasProps.__init__ changed: see app/upstream.py"
    for page in ("learner", "instructor"):
        assert ours[page]["models"] == bokehs[page]["models"]
        assert ours[page]["message"] == bokehs[page]["message"], page
        # What it is for: most of the page's container defaults are never made.
        assert ours[page]["held"] < bokehs[page]["held"] / 3, (page, ours[page]["held"], bokehs[page]["held"])
    for probe in (bokehs, ours):
        # A default read after the build is made then, and a change to it reaches the document;
        # one never read that the browser changes is set, heard and sent from then on.
        assert probe["css_classes"] == ["read-after-the-build"] and probe["changes"] == 1
        assert probe["heard"] == [[[], ["from the browser"]]] and probe["sent"] == [True, True]
        # A required value left unset is still an error on the server, not a page that breaks.
        assert probe["required_raises"]


def test_no_list_set_or_dict_default_of_any_model_holds_a_model():
    """Why a default never read may be left out of the references walk: it refers to no model.
    Every model class Bokeh, Panel and the workbench define, as registered once the pages import."""
    from bokeh.core.has_props import HasProps
    from bokeh.core.property.container import Dict, List, Set

    import app.instructor.page  # noqa: F401  (their models registered)
    import app.learner.page  # noqa: F401

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    def holds_a_model(value) -> bool:
        if isinstance(value, HasProps):
            return True
        if isinstance(value, dict):
            return any(holds_a_model(v) for v in value.values())
        return isinstance(value, (list, tuple, set)) and any(holds_a_model(v) for v in value)

    checked, holding = 0, []
    for cls in set(subclasses(HasProps)):
        for name in cls.properties(_with_props=True):
            descriptor = cls.lookup(name)
            if isinstance(descriptor.property, (List, Set, Dict)):
                default = descriptor.class_default(cls)
                checked += 1
                if holds_a_model(default):
                    holding.append(f"{cls.__name__}.{name}")
    assert checked > 1000 and holding == []


def test_bokeh_asks_the_query_before_it_reads_a_value_and_walks_references_through_its_module_global():
    from bokeh.core import has_props
    from bokeh.model import util

    # From Bokeh's file: in a process that served a page, the class holds ours.
    source = Path(has_props.__file__).read_text()
    query = source[source.index("def query_properties_with_values"):]
    query = query[:query.index("\n    def ")]
    assert query.index("if not query(descriptor)") < query.index("descriptor.get_value(self)")
    assert "visit_immediate_value_references(obj, queue_one)" in inspect.getsource(util.collect_filtered_models)
    assert "visit_immediate_value_references(obj, visitor)" in \
        inspect.getsource(util.visit_value_and_its_immediate_references)
