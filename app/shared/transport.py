"""How the server talks to browsers: its one change to the websocket Panel and Bokeh set up.

Kept apart from app/server.py so the benchmarks' bare Panel floors can be served the same way
without importing the workbench.
"""

from __future__ import annotations


def answer_without_nagle_delay() -> None:
    """Have every page's websocket send each message at once (``TCP_NODELAY``).

    BokehJS and the server speak in messages of three or more websocket frames (header, metadata,
    content, buffers), each its own write. With Nagle's algorithm on, as Tornado leaves it, a
    frame waits until the browser's side has acknowledged the one before, and that side delays
    an acknowledgement by up to 40 ms (Linux's delayed ACK): every answer to an edit, and the
    page's first document, came ~40 ms late, on loopback too (seen in the arrival times of the
    frames in Chromium: header, then 40 ms, then the rest). Tornado's own advice is
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
