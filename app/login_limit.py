"""How many wrong instructor passwords one client address may try: guessing slowed down.

:data:`FREE_FAILURES` failed logins within :data:`WINDOW_S` from one address are answered as usual,
and the last of them starts a wait of :data:`WINDOW_S` during which every login from that address
(the right password too) is answered 429 with the time to try again. Each further wait is twice the
one before, up to :data:`MAX_WAIT_S`; an address that has failed nothing for :data:`MAX_WAIT_S`
starts afresh, and a successful login clears its record.

Per server process: behind a balancer with two processes a guesser gets twice the tries (still
bounded, and each process's log says so). The client address is Tornado's (the forwarded one
only under ``--use-xheaders``, :func:`app.oplog.client_address`); a class behind one NAT address
shares one limit. Left out: limits per user name (there is one user).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

FREE_FAILURES = 5
WINDOW_S = 60.0
MAX_WAIT_S = 3600.0
# Addresses remembered at most: past this, those not waiting are forgotten first (a bound on
# memory against a guesser that changes address, not a policy).
_ADDRESSES = 10_000


@dataclass
class _Address:
    failures: deque = field(default_factory=deque)  # monotonic times of failures within the window
    waits: int = 0  # waits imposed so far
    until: float = 0.0  # no login before this (monotonic seconds)
    told: bool = False  # the current wait was logged
    last: float = 0.0  # the last failure


class LoginLimit:
    """One process's record of failed logins per client address.

    ``clock`` gives monotonic seconds (tests pass their own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._addresses: dict[str, _Address] = {}

    def wait_s(self, address: str | None) -> float:
        """Seconds before ``address`` may try to log in again (0: now)."""
        entry = self._addresses.get(address or "")
        return 0.0 if entry is None else max(0.0, entry.until - self._clock())

    def first_refusal(self, address: str | None) -> bool:
        """True once per wait: whether this refusal is the first of ``address``'s current wait
        (the one to log)."""
        entry = self._addresses.get(address or "")
        if entry is None or entry.told:
            return False
        entry.told = True
        return True

    def failed(self, address: str | None) -> None:
        """Count a failed login from ``address``; the :data:`FREE_FAILURES`-th within a window
        starts a wait."""
        now, key = self._clock(), address or ""
        entry = self._addresses.get(key)
        if entry is not None and now - max(entry.last, entry.until) > MAX_WAIT_S:
            entry = None  # quiet for long enough: start afresh
        if entry is None:
            self._forget_some(now)
            entry = self._addresses[key] = _Address()
        entry.last = now
        while entry.failures and now - entry.failures[0] >= WINDOW_S:
            entry.failures.popleft()
        entry.failures.append(now)
        if len(entry.failures) >= FREE_FAILURES:
            entry.failures.clear()
            entry.until = now + min(WINDOW_S * 2 ** entry.waits, MAX_WAIT_S)
            entry.waits += 1
            entry.told = False

    def succeeded(self, address: str | None) -> None:
        """Forget ``address``'s failures: it knew the password."""
        self._addresses.pop(address or "", None)

    def _forget_some(self, now: float) -> None:
        if len(self._addresses) < _ADDRESSES:
            return
        for key in [k for k, e in self._addresses.items() if e.until <= now]:
            del self._addresses[key]
        while len(self._addresses) >= _ADDRESSES:
            del self._addresses[next(iter(self._addresses))]


def wait_sentence(wait_s: float) -> str:
    """What a limited login is told: ``"Too many failed logins from your address: try again in
    2 minutes."`` (whole minutes, rounded up; seconds below one minute)."""
    seconds = max(1, math.ceil(wait_s))
    when = f"{seconds} second{'s' * (seconds != 1)}" if seconds < 60 else \
        f"{math.ceil(seconds / 60)} minute{'s' * (math.ceil(seconds / 60) != 1)}"
    return f"Too many failed logins from your address: try again in {when}."


__all__ = ["FREE_FAILURES", "MAX_WAIT_S", "WINDOW_S", "LoginLimit", "wait_sentence"]
