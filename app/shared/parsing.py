"""Reading numbers and free text the way learners type them.

Numbers: an optional sign, digits with at most one decimal point, an optional exponent
(``1``, ``-.5``, ``1.``, ``1e3``); the minus sign U+2212 (``−3``, as the page prints negative
numbers) is read as ``-``. Everything else is refused with a message that names the
field: empty text, ``nan``/``inf`` (attention needs finite numbers), numbers beyond float64
(``1e400``), and decimal commas. A decimal comma is refused rather than guessed because ``1,500``
could mean one and a half or fifteen hundred; the message shows the point form to type instead.
"""

from __future__ import annotations

import math
import re
import unicodedata

# ASCII: \d alone would also take full-width, Arabic-Indic and other digits, which float() reads
# silently (a full-width '１' became 1); they are refused with a message instead, like commas.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+", re.ASCII)
MAX_NUMBER_LENGTH = 40

# Embedding, override and isolate controls reorder the text around them, so a name could be
# shown as something else ("\u202eevil" reads "live"); the plain marks LRM/RLM are kept.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

TEXT_LIMITS = {"learner": 100, "label": 100, "prediction": 2000, "explanation": 2000, "notes": 2000}


def parse_number(text: str, field: str) -> float:
    """Parse one typed number.

    Parameters
    ----------
    text : str
        What the learner typed; surrounding spaces are ignored.
    field : str
        The field's label (``"Query 2"``), used in the message.

    Returns
    -------
    float
        A finite float64.

    Raises
    ------
    ValueError
        With a message naming ``field`` and saying what to type instead.
    """
    # The page prints negatives with U+2212, so a learner copying a shown number gets that sign.
    stripped = (text or "").strip().replace("\u2212", "-")
    if not stripped:
        return _refuse(field, "empty; type a number such as 1 or -0.5")
    if len(stripped) > MAX_NUMBER_LENGTH:
        return _refuse(field, f"too long ({len(stripped)} characters); type a number")
    if _DECIMAL_COMMA.fullmatch(stripped):
        point = stripped.replace(",", ".")
        return _refuse(field, f"{stripped!r} uses a decimal comma; type {point} with a point instead")
    if any(c.isdigit() and not c.isascii() for c in stripped):
        return _refuse(field, f"{_quote(stripped)} uses digits other than 0-9; type it with 0-9")
    if stripped.lower().lstrip("+-") in {"nan", "inf", "infinity"}:
        return _refuse(field, f"{stripped!r} is not a finite number; attention needs one")
    if not _NUMBER.fullmatch(stripped):
        return _refuse(field, f"{_quote(stripped)} is not a number; type one such as 1 or -0.5")
    value = float(stripped)
    if not math.isfinite(value):
        return _refuse(field, f"{_quote(stripped)} is too large for float64 (beyond ±1.8e308)")
    return value


def _quote(text: str) -> str:
    return repr(text[:MAX_NUMBER_LENGTH])


def _refuse(field: str, reason: str) -> float:
    raise ValueError(f"{field}: {reason}")


def _shown(ch: str) -> bool:
    return ch in "\n\t" or (unicodedata.category(ch) not in ("Cc", "Cs") and ch not in _BIDI_CONTROLS)


def displayable(text: str) -> str:
    """``text`` without control characters other than newline and tab, and without the
    bidirectional embedding, override and isolate controls (they could make a name display as
    another)."""
    return "".join(ch for ch in text if _shown(ch))


def hidden_character(field: str, text: str | None) -> str | None:
    """Why ``text`` may not be stored as it is, naming ``field`` and the first character that
    :func:`displayable` would drop (a carriage return, as in CRLF line ends, is let through):
    ``"learner holds U+202E (a bidirectional override, embedding or isolate control: it reorders
    the text after it)…"``; None when there is none. An import refuses such a record rather than
    store text its learner never saw (the page drops these characters as they are typed)."""
    ch = next((c for c in text or "" if c != "\r" and not _shown(c)), None)
    if ch is None:
        return None
    kind = ("a bidirectional override, embedding or isolate control: it reorders the text after it"
            if ch in _BIDI_CONTROLS else "a control character")
    return (f"{field} holds U+{ord(ch):04X} ({kind}), which the workbench never stores or shows; "
            "remove it from the file")


def clean_text(text: str | None, field: str) -> str | None:
    """Check one free-text field (learner, label, prediction, explanation, notes).

    Text is data: it is never interpreted as HTML or Markdown anywhere. Control characters other
    than newline and tab, and the bidirectional embedding, override and isolate controls (which
    could make a name display as another), are removed; length is limited per
    :data:`TEXT_LIMITS`.

    Returns
    -------
    str or None
        ``None`` for empty text.

    Raises
    ------
    ValueError
        If the text is longer than the field's limit; the message names the field.
    """
    if text is None:
        return None
    kept = displayable(text).strip()
    limit = TEXT_LIMITS[field]
    if len(kept) > limit:
        raise ValueError(f"{field.capitalize()} is {len(kept)} characters long; the limit is {limit}")
    return kept or None
