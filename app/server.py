"""Serving the workbench: one Panel/Bokeh server, each browser session built fresh.

Left out: the instructor page (issue 4) and multi-process serving.
"""

from __future__ import annotations

from pathlib import Path

import panel as pn

from app.workbench import create_workbench
from attention_core.store import RunStore

# Sessions a browser left behind are dropped after this long (milliseconds): a class's worth of
# closed tabs must not pile up in memory.
UNUSED_SESSION_LIFETIME_MS = 60_000
CHECK_UNUSED_SESSIONS_MS = 10_000


def serve(runs_dir: Path, port: int = 5006, address: str = "localhost", show: bool = False):
    """Start the server and block until it stops.

    Parameters
    ----------
    runs_dir : pathlib.Path
        Where runs are saved (created if missing).
    port : int
        TCP port; 0 picks a free one.
    address : str
        Interface to bind (``localhost`` by default; ``0.0.0.0`` for a class server).
    """
    store = RunStore(runs_dir)
    store.cleanup_temp_files()
    origins = [f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"]
    if address in ("0.0.0.0", "::"):
        origins = ["*"]
    print(f"Attention workbench: http://{'localhost' if address in ('0.0.0.0', '::') else address}"
          f":{port}/  (runs saved to {Path(runs_dir).resolve()})", flush=True)
    pn.serve(
        {"/": lambda: create_workbench(store)},
        port=port, address=address, show=show, title="Self-attention workbench",
        websocket_origin=origins, check_unused_sessions=CHECK_UNUSED_SESSIONS_MS,
        unused_session_lifetime=UNUSED_SESSION_LIFETIME_MS, threaded=False,
    )
