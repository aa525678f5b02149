"""A page's store calls (its saves, and the reads it makes as it opens), run in worker threads;
saves counted until their page has heard.

A store call waits as long as the store takes: a table another session locked, a busy disk, a
PostgreSQL across a network that stopped answering. On the server's event loop that wait held
every page of the process, with its static files and its health check (a newcomer's PostgreSQL
locked for 30 s froze them all). :func:`in_thread` runs the call in a thread instead; a save's
page says "Saving…" if it waits long.

:func:`in_flight` counts a write from before its thread starts until its page has been told how
it went; on SIGTERM :mod:`app.shutdown` keeps serving until none is in flight (or its grace ends),
so a save in flight is committed and its page hears so before the port closes.

The count is kept on the event loop's thread only (the thread's result comes back to the loop).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import panel as pn

T = TypeVar("T")

_count = 0
_last_done = float("-inf")


@contextmanager
def in_flight() -> Iterator[None]:
    """Count a page's write as in flight for the ``with`` block: from before its thread starts
    until the page has been told how it went (on the event loop's thread)."""
    global _count, _last_done
    _count += 1
    try:
        yield
    finally:
        _count -= 1
        _last_done = time.monotonic()


async def in_thread(call: Callable[..., T], *args, **kwargs) -> T:
    """``call(*args, **kwargs)`` in a thread (:func:`asyncio.to_thread`: the loop's executor, the
    caller's context, so the page's session stays current and the store's log lines name it)."""
    return await asyncio.to_thread(call, *args, **kwargs)


def served() -> bool:
    """Whether this runs in a served page's session (Panel's server), where a store call may go
    to a thread; not in a script, a notebook or a test."""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def settled(quiet_s: float) -> bool:
    """No write in flight, and none ended in the last ``quiet_s`` seconds (its page's message
    leaves the server in the meantime)."""
    return _count == 0 and time.monotonic() - _last_done >= quiet_s


def count() -> int:
    """Writes in flight now."""
    return _count


__all__ = ["count", "in_flight", "in_thread", "served", "settled"]
