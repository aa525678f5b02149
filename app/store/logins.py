"""Ended instructor logins, kept in the store every server process of a class shares.

A logout (:mod:`app.logins`) writes its login's id here; every process asks here whether the login
id a request or an open instructor page carries has ended. One row of the meta table per ended
login, ``ended_login:<login id>``, holding the Unix time it ended: read by its primary key, and no
new table (so no store version to upgrade). Rows older than the longest a login cookie is accepted
are dropped by the next logout: such a cookie is refused by its age already.

Left out: the cookie and the check's cache (:mod:`app.logins`).
"""

from __future__ import annotations

import re
import time

from sqlalchemy import and_, delete, select
from sqlalchemy.exc import IntegrityError

from app.store.runs import RunStore
from app.store.schema import meta

_PREFIX = "ended_login:"
# What a login id is (app.logins makes them): hex, so it fits the meta table's name (64 characters).
LOGIN_ID = re.compile(r"[0-9a-f]{16,48}")


def _name(login_id: str) -> str:
    if not isinstance(login_id, str) or not LOGIN_ID.fullmatch(login_id):
        raise ValueError(f"not a login id: {login_id!r}")
    return _PREFIX + login_id


def end_login(store: RunStore, login_id: str, keep_s: float) -> None:
    """Record in ``store`` that the login ``login_id`` has ended (again: no change), and forget
    logins that ended more than ``keep_s`` seconds ago.

    Raises
    ------
    ValueError
        ``login_id`` is not a login id (16 to 48 lowercase hex digits).
    app.store.StoreError
        ``"Logout not recorded: …"``: the store cannot be written.
    """
    name, now = _name(login_id), int(time.time())
    try:
        with store._write("Logout not recorded") as conn:
            conn.execute(meta.insert().values(name=name, value=now))
    except IntegrityError:
        pass  # ended before (a second logout from another tab of the same login)
    with store._write("Logout not recorded") as conn:
        conn.execute(delete(meta).where(and_(meta.c.name.startswith(_PREFIX, autoescape=True),
                                             meta.c.value < now - int(keep_s))))


def login_ended(store: RunStore, login_id: str) -> bool:
    """Whether ``store`` records the login ``login_id`` as ended (one primary-key read).

    Raises
    ------
    ValueError
        ``login_id`` is not a login id.
    app.store.StoreError
        The store cannot be read.
    """
    name = _name(login_id)
    with store._read() as conn:
        return conn.execute(select(meta.c.name).where(meta.c.name == name)).first() is not None


__all__ = ["LOGIN_ID", "end_login", "login_ended"]
