"""This page's key: the secret that makes its runs its own.

A run's id is what its link reads it by (``/?run=<id>``, ``?runs=…``, the instructor's *Open
run*); changing a run (attaching an explanation) takes the key of the page that saved it. The
browser keeps the key: 128 random bits (``crypto.getRandomValues``) in ``localStorage`` under
:data:`STORAGE_NAME`, one per origin, so a reload, another tab and the embed of the same site
share it. It reaches the server over the page's websocket (:class:`PageKey`), never in an
address, and the store keeps only its SHA-256 (:func:`key_hash`) beside each run the page saves.

Left out: what the key allows (:meth:`app.learner.state.LearnerState.take_page_key`,
:meth:`app.store.RunStore.update_explanation`). A browser whose storage is blocked makes a key for
the page's life only: its runs are then listed until a reload, and readable by link after.
"""

from __future__ import annotations

import hashlib
import re

import param
from panel.custom import JSComponent

STORAGE_NAME = "attention-workbench-page-key"  # the localStorage item; page_key.js uses the same
_KEY = re.compile(r"[0-9a-f]{32,128}")


def key_hash(key: str) -> str:
    """The SHA-256 of a page key as 64 lowercase hex digits: what the store keeps.

    Raises
    ------
    ValueError
        ``key`` is not 32 to 128 lowercase hex digits (page_key.js makes 32: 128 bits).
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError("not a page key: a page key is 32 to 128 lowercase hex digits")
    return hashlib.sha256(key.encode("ascii")).hexdigest()


class PageKey(JSComponent):
    """Sends this browser's page key to the server once the page shows (:attr:`page_key`).

    A custom component because Panel has no widget that reads the browser's storage; it draws
    nothing. Its JS makes the key the first time (128 bits from ``crypto.getRandomValues``) and
    keeps it in ``localStorage``.
    """

    page_key = param.String(default="", doc="The page key from the browser ('' until it arrives).")

    _esm = "page_key.js"
