"""The tab kept from test to test (tests/kept_tab.py) comes to each test as a new context would.

The first test leaves behind what a browser test can: the learner page's key in localStorage,
sessionStorage, a cookie, a second tab, a listener, a route, a permission and a small viewport.
The second, run after it in the same worker (a file runs whole on one), finds none of it.
"""

from __future__ import annotations

from workbench_server import open_learner_page

from app.learner.page_key import STORAGE_NAME

LEFT = []  # what the first test's listener heard after it ended


def test_a_test_leaves_state_behind(server, context, page):
    open_learner_page(page, server.url)
    assert page.evaluate(f"() => localStorage.getItem({STORAGE_NAME!r})")  # the page made its key
    page.evaluate("() => { sessionStorage.setItem('left', '1'); document.cookie = 'left=1; path=/' }")
    context.new_page().goto(server.url + "healthz")
    page.on("console", lambda msg: LEFT.append(msg.text))
    context.route("**/no-such-thing", lambda route: route.abort())
    context.grant_permissions(["clipboard-read"])
    page.set_viewport_size({"width": 640, "height": 400})


def test_the_next_test_finds_none_of_it(server, context, page):
    assert context.pages == [page] and page.url == "about:blank"
    assert page.viewport_size == {"width": 1280, "height": 720}
    assert context.cookies() == []
    page.goto(server.url + "healthz")
    assert page.evaluate(f"() => [localStorage.getItem({STORAGE_NAME!r}), sessionStorage.getItem('left')]") \
        == [None, None]
    assert page.evaluate("() => navigator.permissions.query({name: 'clipboard-read'}).then(p => p.state)") != "granted"
    page.evaluate("() => console.log('after')")
    assert LEFT == []
    # No route is left: a page the first test's route aborted now reaches the server (a 404).
    assert page.goto(server.url + "no-such-thing").status == 404
