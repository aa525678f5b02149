"""Store writes off a server's event loop, and how many are still running.

A Panel server runs every session of a process on one event loop. A store write that waits for
its commit (PostgreSQL's WAL flush, SQLite's fsync, or SQLite's write lock held by another
process) would stop every other page of that process meanwhile: no edit answered, no health
check. :func:`off_the_loop` runs such a write in a small pool of threads of its own and lets the
loop go on; :func:`in_flight` says how many have not finished, which graceful shutdown
(:mod:`app.shutdown`) waits for before it stops the server, so a save in flight still commits
and its page still hears so.

The store is safe to use from these threads: SQLAlchemy's engine hands each thread a connection
of its own, and :class:`app.store.RunStore` queues a process's SQLite writers on a lock.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

#: Threads writing to the store at once per process: below SQLAlchemy's default pool (5), so a
#: read on the loop (the instructor page, a reload's runs) still finds a connection.
WRITE_THREADS = 4

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_in_flight = 0  # changed on the event loop's thread only


def _forget_after_fork() -> None:
    # A forked worker (serve --num-procs) has none of its parent's threads: a pool of its own.
    global _pool, _in_flight
    _pool, _in_flight = None, 0


os.register_at_fork(after_in_child=_forget_after_fork)


async def off_the_loop(write: Callable[..., T], /, *args) -> T:
    """Run ``write(*args)`` in a store-write thread and return (or raise) what it does.

    The thread sees the caller's context variables (as :func:`asyncio.to_thread` does), so the
    operator's log lines it writes carry the page's session. Counted in :func:`in_flight` until
    it ends.

    Parameters
    ----------
    write : callable
        A store method such as :meth:`app.store.RunStore.save`; blocking, thread-safe.
    *args
        Its arguments.

    Raises
    ------
    Exception
        Whatever ``write`` raises (e.g. :class:`app.store.StoreError`).
    """
    global _pool, _in_flight
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="store-write")
    context = contextvars.copy_context()
    _in_flight += 1
    try:
        return await asyncio.get_running_loop().run_in_executor(_pool, partial(context.run, write, *args))
    finally:
        _in_flight -= 1


def in_flight() -> int:
    """How many :func:`off_the_loop` writes of this process have not finished."""
    return _in_flight


__all__ = ["WRITE_THREADS", "in_flight", "off_the_loop"]
