"""Small helpers for building Panel parts, shared by both pages.

The learner page's one custom component, the input grid, is in :mod:`app.shared.grid`.
"""

from __future__ import annotations

from collections.abc import Callable

import panel as pn
import param
from bokeh.models import ColumnDataSource, CustomJS
from panel.theme import Inherit, Native

from app.shared.static import read_text

# Bokeh's spinner buttons have no accessible name (axe: critical); the field keeps the arrow keys.
NO_SPIN_BUTTONS = ":host .bk-spin-btn { display: none !important; }"


def like_the_first_paint():
    """Build a part that arrives after the first paint as the parts built with the page were.

    The page's parts are built before its template sets a design; built later, under that
    design, a part takes Bootstrap's larger headings and table fonts.
    """
    return pn.config.set(design=None)


# WCAG 2.4.7: Bokeh's own focus ring is a 1 px dotted line in a pale blue, easy to miss. A
# stylesheet does not reach into shadow roots: KEYBOARD_JS adopts this one into each, Bokeh's
# own models included.
FOCUS_CSS = """
:focus-visible, :host(:focus-visible) {
  outline: 3px solid #1a56db !important; outline-offset: 2px !important;
}
"""
KEYBOARD_JS = read_text(__package__, "keyboard.js")


def keyboard_callback() -> CustomJS:
    """A new callback (a Bokeh model belongs to one session's document) for
    ``curdoc.js_on_event("document_ready", …)``: the focus ring :data:`FOCUS_CSS` in every
    shadow root, and no plot's canvas a Tab stop that does nothing (see keyboard.js)."""
    return CustomJS(args={"css": FOCUS_CSS}, code=KEYBOARD_JS)
ONE_LAYOUT_JS = read_text(__package__, "one_layout.js")


def one_layout_callback() -> CustomJS:
    """A new callback for ``curdoc.js_on_event("document_ready", …)``: from then on, the page
    is laid out once per message from the server instead of once per part shown, hidden or
    resized by it (see one_layout.js for why and the figures)."""
    return CustomJS(code=ONE_LAYOUT_JS)


# WCAG 1.4.10 (reflow): a row of parts that does not fit the window goes on below, instead of
# widening the page.
WRAPPING_ROW_CSS = ":host { flex-wrap: wrap; }"


class Reflowing(Native):
    """Panel's default design, with rows that wrap.

    Set for a session (``pn.config.design = Reflowing`` before its page is built), so parts
    made later in the session (a grid, a panel made on demand) have it too.
    """

    modifiers = {pn.Row: {"stylesheets": [Inherit, WRAPPING_ROW_CSS]}}


def when_first(owner: param.Parameterized, name: str, make: Callable[[], object],
               when: Callable[[object], bool] = bool) -> None:
    """Call ``make()`` once: at once if ``when(owner.<name>)`` holds, else the first time
    parameter ``name`` of ``owner`` changes to a value it holds for.

    For a part that shows only in some states (a message, another mode's controls): made when
    first needed rather than in every session's page: each Panel pane or widget is server memory
    every open page holds (bench/page_memory.py says how much).
    """
    if when(getattr(owner, name)):
        make()
        return

    def fire(event) -> None:
        if when(event.new):
            owner.param.unwatch(watcher)
            make()

    watcher = owner.param.watch(fire, name)


def insert_after(layout: pn.layout.ListLike, anchor: object, *objects: object) -> None:
    """Put ``objects`` into ``layout`` right after its child ``anchor`` (one change to the layout).

    ``anchor`` may be a :class:`panel.viewable.Viewer`, which a layout holds as what its
    ``__panel__`` returns. Raises ValueError if ``anchor`` is not a child of ``layout``."""
    shown = anchor.__panel__() if isinstance(anchor, pn.viewable.Viewer) else anchor
    children = list(layout.objects)
    at = next((n for n, child in enumerate(children) if child is anchor or child is shown), None)
    if at is None:
        raise ValueError(f"{type(anchor).__name__} is not a child of the layout")
    layout.objects = [*children[:at + 1], *objects, *children[at + 1:]]


def replace_data(source: ColumnDataSource, data: dict) -> bool:
    """Set ``source.data`` to ``data`` only if it differs; returns whether it was set.

    Bokeh sends a source's data each time it is set, equal or not, and the browser redraws
    every glyph drawn from it: an edit that leaves a chart's numbers as they were (another
    row's, another item's) sends nothing for it. Call it where the document may be changed
    (``pn.io.unlocked()`` from a Panel callback).
    """
    if dict(source.data) == data:
        return False
    source.data = data
    return True
