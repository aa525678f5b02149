"""pytest-playwright's ``context`` and ``page``, kept from test to test and cleaned between.

A page opened in a new tab of a new context costs Chromium a new renderer, every script fetched
again and BokehJS and Panel compiled cold; the same tab navigated to the next test's page keeps
its renderer and the context's HTTP cache. Page opens are most of the browser tests' time on a
2-core machine (figures in bench/README.md, "make test's time"). Routes turn a context's HTTP
cache off (Playwright's rule), so ``watch`` (workbench_server.PageWatch) listens to requests
rather than routing them.

What a test sees is what pytest-playwright gives it: a context whose only tab is ``page``, on
``about:blank``, with no cookies, no storage for any origin, no routes, no listeners of an earlier
test and the context's own viewport and permissions. After each test: every other tab is closed,
``page`` goes back to ``about:blank`` (its websocket closes as when a context closes), routes and
the test's own listeners are removed, and cookies, permissions and every visited origin's storage
are cleared (DevTools' ``Storage.clearDataForOrigin``; the HTTP cache stays, as it is the point).
What cannot be undone (an init script, an exposed binding, ``page`` closed by the test, a failed
clean-up) makes the next test start in a new context instead. Tests that want a browser of their
own state take ``new_context`` or ``browser`` as before.
"""

from __future__ import annotations

import contextlib
import json
from urllib.parse import urlsplit

import pytest

_KEPT: dict[str, tuple] = {}  # context options (JSON) -> (context, page, origins visited)


def _kept(browser, args: dict):
    key = json.dumps(args, sort_keys=True, default=str)
    if key not in _KEPT or _KEPT[key][0].browser is None:
        context = browser.new_context(**args)
        origins: set[str] = set()

        def seen(request):
            parts = urlsplit(request.url)
            if parts.scheme in ("http", "https"):
                origins.add(f"{parts.scheme}://{parts.netloc}")

        context.on("request", seen)
        _KEPT[key] = (context, context.new_page(), origins)
    return key, _KEPT[key]


def _recording(target, method: str, undo: list, tainted: list | None = None):
    """Replace ``target.<method>`` on this instance by one that remembers each call, so the
    clean-up can remove what the test added (listeners), or knows it cannot (init scripts)."""
    original = getattr(target, method)

    def recorded(*args, **kwargs):
        if tainted is not None:
            tainted.append(method)
        else:
            undo.append((target, args))
        return original(*args, **kwargs)

    setattr(target, method, recorded)
    return original


def _clean(context, page, origins: set[str], args: dict) -> None:
    for other in context.pages:
        if other is not page:
            other.close()
    page.goto("about:blank")
    context.unroute_all(behavior="ignoreErrors")
    context.clear_cookies()
    context.clear_permissions()
    if args.get("permissions"):
        context.grant_permissions(args["permissions"])
    session = context.new_cdp_session(page)
    for origin in sorted(origins):
        session.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
    session.detach()
    origins.clear()
    page.set_viewport_size(args.get("viewport") or {"width": 1280, "height": 720})


@pytest.fixture
def context(browser, browser_context_args, request):
    """A context (and its tab ``page``) kept from test to test, cleaned between: see above."""
    args = dict(browser_context_args)
    marker = next(request.node.iter_markers("browser_context_args"), None)
    args.update(marker.kwargs if marker else {})
    key, (kept, tab, origins) = _kept(browser, args)
    undo: list = []
    tainted: list = []
    originals = {}
    for target in (kept, tab):
        for method in ("on", "once"):
            originals[(id(target), method)] = _recording(target, method, undo)
        for method in ("add_init_script", "expose_binding", "expose_function"):
            originals[(id(target), method)] = _recording(target, method, undo, tainted)
    yield kept
    for target in (kept, tab):
        for method in ("on", "once", "add_init_script", "expose_binding", "expose_function"):
            setattr(target, method, originals[(id(target), method)])
    try:
        if tainted or tab.is_closed():
            raise RuntimeError(f"cannot be undone: {tainted or 'page closed'}")
        for target, (event, handler) in undo:
            with contextlib.suppress(KeyError):  # a ``once`` listener that has run is gone
                target.remove_listener(event, handler)
        _clean(kept, tab, origins, args)
    except Exception:  # anything left behind: the next test gets a new context
        del _KEPT[key]
        try:
            kept.close()
        except Exception:  # noqa: S110 - a browser already gone has nothing left to close
            pass


@pytest.fixture
def page(context):
    """The kept context's one tab: see above."""
    return next(tab for kept, tab, _ in _KEPT.values() if kept is context)
