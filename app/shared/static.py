"""The JS and CSS of the pages' components, kept in files beside the modules that use them.

Read with :mod:`importlib.resources`, so they are found in an installed wheel as in a checkout
(they ship as package data). Custom components (:class:`~panel.custom.JSComponent`) name their
files instead, relative to their module, as Panel's ``_esm`` and ``_stylesheets`` allow.
"""

from __future__ import annotations

from importlib.resources import files


def read_text(package: str, name: str) -> str:
    """The text of the file ``name`` shipped in ``package`` (e.g. ``__package__``).

    Called once per file, at import time: a module keeps the text as a constant.

    Raises
    ------
    FileNotFoundError
        ``package`` holds no file ``name`` (e.g. package data left out of a wheel).
    """
    return files(package).joinpath(name).read_text(encoding="utf-8")
