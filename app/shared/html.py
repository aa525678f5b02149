"""The one way the app builds HTML from values: :func:`html`, on MarkupSafe.

Every value put into a fragment is escaped (``<``, ``>``, ``&``, ``"`` and ``'``) unless it is
itself a fragment built here (:class:`Markup`), so learner text can never become markup
and a fragment is never escaped twice. Joining and concatenating fragments keeps that: ``Markup``
escapes the plain strings added to it. Left out: the JS and CSS of components, which hold no
values.
"""

from __future__ import annotations

from collections.abc import Iterable

import markupsafe


class Markup(markupsafe.Markup):
    """:class:`markupsafe.Markup` that Panel's HTML pane shows as it is.

    Panel escapes a pane's text with :func:`html.escape`, whose ``str.replace`` calls a Markup
    would answer by escaping the replacements too (``&amp;amp;``); it takes ``_repr_html_``
    first, which gives the plain string. Operations on it (``format``, ``join``, ``+``) keep the
    class, as MarkupSafe's do.
    """

    __slots__ = ()

    def _repr_html_(self) -> str:
        return str(self)


def html(template: str, /, *args: object, **kwargs: object) -> Markup:
    """``template`` (trusted HTML with ``{}`` fields, as :meth:`str.format`) with ``args`` and
    ``kwargs`` escaped into it.

    ``html("<td>{}</td>", "<b>")`` is ``Markup("<td>&lt;b&gt;</td>")``; an argument that is
    already :class:`~markupsafe.Markup` (another fragment) goes in as it is. Format specs apply to
    the value before escaping (``html("{:,}", 1234)``).
    """
    return Markup(template).format(*args, **kwargs)


def each(template: str, values: Iterable[object]) -> Markup:
    """``template`` (trusted HTML with one ``{}`` field) once per value of ``values``, each
    escaped into it, one after another: the same as ``join(html(template, v) for v in values)``
    (``each("<td>{}</td>", [1, "<b>"])`` is ``Markup("<td>1</td><td>&lt;b&gt;</td>")``), without a
    formatter per value: a table's cells, built on every edit. A value that is already
    :class:`~markupsafe.Markup` goes in as it is."""
    return Markup("".join([template.format(markupsafe.escape(v)) for v in values]))


def join(fragments: Iterable[object], separator: str = "") -> Markup:
    """``fragments`` one after another (``separator`` between, trusted HTML); a plain string
    among them is escaped."""
    return Markup(separator).join(fragments)


__all__ = ["Markup", "each", "html", "join"]
