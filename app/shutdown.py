"""Stopping ``serve`` gracefully on SIGTERM (a supervisor's stop, a rolling restart) or SIGINT.

On the signal the process, in this order:

1. fails its health check (``/healthz`` answers 503 ``server stopping``, :mod:`app.health`) and
   answers every new page request 503 with a sentence (:func:`refuse_page`): a balancer sends
   those learners to another server, and no session is built for them;
2. has every open page's lost-connection notice name a restart
   (:func:`app.shared.connection.announce_restart`), and keeps serving open pages until every
   one has been told and :data:`NOTICE_S` has passed, so a save clicked as the signal came is
   committed and confirmed too;
3. lets the saves in flight commit: a save's store write runs in a thread of its own
   (:mod:`app.shared.store_calls`), counted until its page has heard "Saved"; the port stays
   open until none is in flight (and :data:`SETTLE_S` has passed since the last one ended);
4. stops the Bokeh server (its port closes) and its event loop; ``serve`` closes the store and
   ends the process with status 0 (:func:`end_process`).

Whatever happens, the process ends ``grace`` seconds after the signal (``serve
--shutdown-grace``), with exit status 1 and a line saying so: a save stuck on a store that does
not answer is waited for no longer. The bound is kept by a thread of its own that hears the
signal at once (:func:`signal.set_wakeup_fd`), even while a store read holds the event loop. A
second signal changes nothing. With ``--num-procs`` each worker stops so (the first process ends
at once; its workers get SIGTERM from it, see :func:`app.upstream.workers_end_with_their_parent`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from functools import partial

from app.health import mark_stopping
from app.oplog import close_sessions_left_open
from app.shared import store_calls
from app.shared.connection import announce_restart

#: Default for ``serve --shutdown-grace``: seconds from the signal to the process's end at most.
SHUTDOWN_GRACE_S = 10.0
#: Seconds open pages keep being served after the signal: enough for the restart notice to reach
#: them and for a save clicked as the signal came to be committed and confirmed.
NOTICE_S = 1.0
#: Seconds after the last save in flight ended before the port closes: its page's "Saved" leaves.
SETTLE_S = 0.2
EXIT_GRACE_OVER = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# What a page request gets while the server stops: nginx asks the next server on a 503
# (proxy_next_upstream http_503); a learner reaching this server directly reads the sentence.
REFUSED_PAGE = ("This workbench server is restarting and takes no new pages. Reload the page in a moment; "
                "saved runs are kept.\n")

log = logging.getLogger("attention_workbench")


def refuse_page(handler) -> None:
    """Answer a page request with 503 and :data:`REFUSED_PAGE` (for
    :func:`app.upstream.refuse_pages_while`)."""
    handler.set_status(503)
    handler.set_header("Content-Type", "text/plain; charset=utf-8")
    handler.set_header("Cache-Control", "no-store")
    handler.set_header("Retry-After", "5")
    handler.finish(REFUSED_PAGE)


def stop_on_signals(server, grace: float = SHUTDOWN_GRACE_S) -> None:
    """Stop ``server`` as the module docstring says on SIGTERM or SIGINT.

    Call in the process that serves (after ``--num-procs`` forked it), in its main thread, before
    its event loop starts; page refusal is set up before the server is made, by
    ``refuse_pages_while(stopping, refuse_page)`` (:mod:`app.upstream`).

    Parameters
    ----------
    server : bokeh.server.server.Server
        The server :func:`panel.serve` made (``start=False``), on this process's event loop.
    grace : float
        Seconds from the signal to the process's end at most (> 0).

    Raises
    ------
    ValueError
        ``grace`` is not above 0, or this is not the main thread (signals are set there only).
    """
    if not grace > 0:
        raise ValueError(f"the shutdown grace must be above 0 seconds, got {grace}")
    loop = server.io_loop.asyncio_loop
    signalled = threading.Event()
    # The watchdog hears the signal byte at once, even while a store read holds the main thread (a
    # Python signal handler runs only when that thread returns to Python code).
    heard, wakeup = socket.socketpair()
    wakeup.setblocking(False)
    signal.set_wakeup_fd(wakeup.fileno(), warn_on_full_buffer=False)
    # The thread keeps both ends open for the process's life: a closed end's number could be
    # reused by another file, and the signal's byte written into it.
    threading.Thread(target=_exit_after_grace, args=(heard, wakeup, grace), name="shutdown-grace",
                     daemon=True).start()

    def on_signal(signum, _frame) -> None:
        if signalled.is_set():
            return
        signalled.set()
        mark_stopping()  # /healthz and new pages answer 503 from now on
        # As Panel's own SIGINT handler does: the loop's thread-safe door, safe from a handler.
        loop.call_soon_threadsafe(_tell_pages_then_stop, server, signal.Signals(signum).name, grace)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)


def _exit_after_grace(heard: socket.socket, _wakeup: socket.socket, grace: float) -> None:
    while True:
        try:
            numbers = heard.recv(64)  # a byte per signal caught, its number
        except OSError:
            return
        if not numbers:
            return
        if any(number in STOP_SIGNALS for number in numbers):
            break
    time.sleep(grace)
    log.warning("stopping: not done %g s after the signal (a save or the store did not finish); exiting now",
                grace)
    end_process(EXIT_GRACE_OVER)


def _tell_pages_then_stop(server, signal_name: str, grace: float) -> None:
    sessions = server.get_sessions()
    # Bokeh's sessions: the open pages, and pages closed less than --unused-session-lifetime ago.
    log.info("stopping: %s: new pages refused, %d session%s told of the restart, exit within %g s",
             signal_name, len(sessions), "" if len(sessions) == 1 else "s", grace)
    told = []

    def tell(doc) -> None:
        try:
            announce_restart(doc)
        finally:
            told.append(doc)

    for session in sessions:
        session.document.add_next_tick_callback(partial(tell, session.document))
    loop = server.io_loop
    # A lecture hall's pages take a while to tell; a session closed meanwhile is never told, so
    # the wait has an end of its own, well before the grace's.
    give_up_at = loop.time() + max(NOTICE_S, grace / 2)

    def stop_once_told() -> None:
        # A save in flight is waited for up to the grace, when the watchdog ends the process.
        if (len(told) < len(sessions) and loop.time() < give_up_at) or not store_calls.settled(SETTLE_S):
            loop.call_later(0.05, stop_once_told)
        else:
            _stop(server)

    loop.call_later(min(NOTICE_S, grace / 2), stop_once_told)


def end_process(status: int = 0) -> None:
    """End this process now with ``status``, its output and logs flushed: for after the server
    stopped and the store closed.

    The interpreter's own exit would first collect every session's Bokeh document one object at
    a time, which for a class's pages takes longer than the grace; nothing of them needs saving.
    """
    close_sessions_left_open("server stopping")
    log.info("stopped: exit status %d", status)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(status)


def _stop(server) -> None:
    server.stop()
    server.io_loop.stop()


__all__ = ["NOTICE_S", "REFUSED_PAGE", "SETTLE_S", "SHUTDOWN_GRACE_S", "end_process", "refuse_page", "stop_on_signals"]
