"""The health endpoint a load balancer polls: ``/healthz`` answers 200 only when the store does.

Panel's own ``/liveness`` (``pn.serve(liveness=True)``) says only that the process answers, or,
asked for a page, builds that whole page; a balancer polling every few seconds needs neither.
This handler reads one row of the store (:meth:`app.store.RunStore.ping`) in a thread of its own,
bounded by :data:`PING_TIMEOUT_S`, and answers ``200 ok`` or ``503`` with a one-line reason. It is
a plain Tornado handler passed to :func:`panel.serve` as one of Bokeh's ``extra_patterns`` (so
``--prefix`` applies to it), outside every login, and its answer holds no learner data and no
store address: the full error goes to the server's log.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from tornado.web import RequestHandler

from app.oplog import logger
from app.store import RunStore, StoreError

HEALTH_PATH = "/healthz"
# A balancer's check should fail fast rather than wait on a hung database.
PING_TIMEOUT_S = 2.0

log = logger("health")  # the operator's log (app.oplog), with its time stamps
# One thread: a hung database holds one ping, never a growing pile of them; later checks wait
# behind it and time out, which is the answer a hung store deserves.
_PINGER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="health")
_stopping = threading.Event()
# Per store (by its address): the problem last logged, None once it answered. A balancer asks
# every few seconds; a store down for ten minutes is one line in the log, and its return another.
_logged: dict[str, str | None] = {}


def _log_change(where: str, problem: str | None, level: int, message: str, *args, exc_info: bool = False) -> None:
    """Log ``message % args`` at ``level`` only when ``problem`` is not the one last logged for
    the store at ``where``."""
    if _logged.get(where) != problem:
        _logged[where] = problem
        log.log(level, message, *args, exc_info=exc_info)


async def store_problem(store: RunStore, timeout: float = PING_TIMEOUT_S) -> str | None:
    """Why ``store`` is not healthy now, in one line without its address, or None when it answers.

    The operator's log gets the full reason once per change: when a problem starts (or becomes
    another), and when the store answers again after one.

    Parameters
    ----------
    store : RunStore
        The store this server process saves to.
    timeout : float
        Seconds to wait for the store's answer.
    """
    try:
        await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(_PINGER, store.ping), timeout)
    except TimeoutError:
        problem = f"store did not answer within {timeout:g} s"
        _log_change(store.where, problem, logging.WARNING,
                    "health check: the store %s did not answer within %s s", store.where, timeout)
        return problem
    except StoreError as error:
        _log_change(store.where, "store not answering", logging.WARNING, "health check: %s", error)
        return "store not answering"
    except Exception:  # whatever went wrong, the balancer must hear 503, not a 500 page
        _log_change(store.where, "store not answering", logging.ERROR,
                    "health check: the store %s could not be asked", store.where, exc_info=True)
        return "store not answering"
    _log_change(store.where, None, logging.INFO, "health check: the store %s answers again", store.where)
    return None


def mark_stopping() -> None:
    """From now on answer 503 ``server stopping``: a server shutting down fails its health check
    before it closes its port, so the balancer sends new learners elsewhere first."""
    _stopping.set()


def stopping() -> bool:
    """Whether :func:`mark_stopping` was called: the server is shutting down (:mod:`app.shutdown`)."""
    return _stopping.is_set()


class HealthHandler(RequestHandler):
    """``GET``/``HEAD`` :data:`HEALTH_PATH`: ``200 ok`` when the store answers, else ``503`` and
    why, as ``text/plain``, never cached; ``503 server stopping`` after :func:`mark_stopping`."""

    #: Read by :func:`app.oplog.request_refused_or_failed`: a balancer asking a stopping server,
    #: or one whose store is down, every few seconds would fill the operator's log with 503s.
    #: What changed is logged once instead (:func:`store_problem`; the shutdown's own lines).
    answers_logged = False

    def initialize(self, store: RunStore) -> None:
        self.store = store

    async def get(self) -> None:
        problem = "server stopping" if _stopping.is_set() else await store_problem(self.store)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_status(503 if problem else 200)
        self.finish(f"{problem or 'ok'}\n")

    async def head(self) -> None:
        await self.get()


def health_patterns(store: RunStore) -> list[tuple]:
    """The route for :func:`panel.serve`'s ``extra_patterns``: :data:`HEALTH_PATH` over ``store``
    (its answers never logged, see :attr:`HealthHandler.answers_logged`)."""
    return [(HEALTH_PATH, HealthHandler, {"store": store})]


__all__ = ["HEALTH_PATH", "PING_TIMEOUT_S", "HealthHandler", "health_patterns", "mark_stopping", "stopping",
           "store_problem"]
