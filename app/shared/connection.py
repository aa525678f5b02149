"""What a page says when its connection to the server is lost, shared by both pages.

A Panel page whose server went away (restarted, stopped, the network gone) keeps showing its last
state with controls that silently do nothing. :func:`announce_lost_connection` turns on Panel's
own disconnect notification (a lasting error notice, shown by the browser when BokehJS reports
``connection_lost``) with the page's message, and can run a page's own script at that moment to
mark what it showed as stale. A server shutting down (:mod:`app.shutdown`) calls
:func:`announce_restart` in each open session first, so the same notice then names a restart.
"""

from __future__ import annotations

import json

import panel as pn
from bokeh.document import Document
from bokeh.models import CustomJS

from app.shared.static import read_text
from app.upstream import free_notifications_on_close

_MARK_STALE_JS = read_text(__package__, "mark_stale.js")

# Every page's lost-connection message starts so; a restart replaces the lead, keeping what the
# page says of itself (what no longer works, that saved runs are kept).
LOST_LEAD = "Connection to the workbench server lost: "
RESTART_LEAD = "The workbench server is restarting: "


def mark_stale_js(selector: str, note: str, ok_class: str | None = None) -> str:
    """A script for :func:`announce_lost_connection` that marks what a page showed as stale.

    Every element matching ``selector`` gets the class ``stale`` (losing ``ok_class``, if given)
    and ``note`` appended to its text. Panel draws in shadow roots, so each one is searched.
    """
    return (f"const selector = {json.dumps(selector)}, note = {json.dumps(note)}, ok = {json.dumps(ok_class)}\n"
            + _MARK_STALE_JS)


def announce_lost_connection(message: str, on_lost_js: str | None = None, *,
                             position: str = "bottom-right", css: str | None = None) -> None:
    """Have this browser session say ``message`` when its server connection is lost.

    Parameters
    ----------
    message : str
        Plain text for Panel's disconnect notification (session-local config).
    on_lost_js : str, optional
        Script run in the browser on the same event (BokehJS's ``connection_lost`` document
        event), e.g. to mark a status line stale.
    position : str
        Where the notice sits: a ``position`` of Panel's notification area ("top-right", …).
    css : str, optional
        Style for the notice (notyf's ``.notyf`` classes), e.g. to fit it into a page's free
        space. Notyf draws outside every shadow root, so this goes to the session's global CSS.

    Outside a server session (tests building a page) only the config is set.
    """
    pn.config.notifications = True
    pn.config.disconnect_notification = message
    if pn.state.curdoc is None:
        return
    free_notifications_on_close()  # a Panel leak: see app.upstream
    if pn.state.notifications is not None:
        pn.state.notifications.position = position
    if css:
        pn.config.global_css = [*pn.config.global_css, css]
    if on_lost_js:
        pn.state.curdoc.js_on_event("connection_lost", CustomJS(code=on_lost_js))


def restart_message(message: str) -> str:
    """A page's lost-connection ``message`` naming a restart instead: :data:`LOST_LEAD` becomes
    :data:`RESTART_LEAD` (a message without that lead gets the restart lead in front, once)."""
    if message.startswith(RESTART_LEAD):
        return message
    return RESTART_LEAD + message.removeprefix(LOST_LEAD)


def announce_restart(doc: Document) -> bool:
    """Have the browser session of ``doc`` say the server is restarting when it loses its connection.

    Call on the server's event loop (e.g. in a callback of ``doc``) while the session's connection
    is still open: the page then shows the restart notice when the server closes the connection,
    instead of a connection simply lost. Returns whether the session had a notice to change (one
    set up by :func:`announce_lost_connection`).

    Parameters
    ----------
    doc : bokeh.document.Document
        The session's document. Named, not taken from ``pn.state.curdoc``: in a document's own
        callback Panel still answers with the document it last handled an event of.
    """
    from panel.io.state import set_curdoc

    with set_curdoc(doc):  # the change then goes to this document's page, at once
        notifications = pn.state.notifications
        lost = notifications.js_events.get("connection_lost") if notifications is not None else None
        if not lost:
            return False
        notifications.js_events = {**notifications.js_events,
                                   "connection_lost": {**lost, "message": restart_message(lost["message"])}}
        return True
