"""Columns of run summaries as the table and the class picture send them: times, numbers, text."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.instructor.state import zone

SHORT_TEXT = 40  # characters of prediction / explanation shown in a table cell
_ISO_CUTS = {"%Y-%m-%d %H:%M:%S": 19, "%Y-%m-%d %H:%M": 16}  # fmt: end of its ISO 8601 slice


def shorten(text: str | None, limit: int = SHORT_TEXT) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis; ``""`` for None."""
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def created_texts(records, timezone: str, fmt: str = "%Y-%m-%d %H:%M:%S") -> list[str]:
    """Each run's ``created_at`` in ``timezone`` formatted with ``fmt``, all at once.

    Vectorised with pandas (a per-run ``astimezone`` and ``strftime`` is slow at 10,000 runs);
    times already in UTC shown in UTC are cut from the ISO text itself.
    """
    if not records:
        return []
    stamps = [r.created_at for r in records]
    if zone(timezone).key in ("UTC", "Etc/UTC") and fmt in _ISO_CUTS and all(
            s.endswith("+00:00") for s in stamps):
        return [f"{s[:10]} {s[11:_ISO_CUTS[fmt]]}" for s in stamps]
    utc = pd.to_datetime(stamps, format="ISO8601", utc=True)
    return list(utc.tz_convert(zone(timezone)).strftime(fmt))


def numbers(values) -> np.ndarray:
    """Floats with NaN for a summary that was not finite (``None`` in the record)."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def texts(values) -> np.ndarray:
    """Strings as a numpy unicode array: Bokeh serialises it with one ``tolist`` and its model
    walks skip it, where a list of 10,000 strings is visited item by item on every walk."""
    return np.array(list(values), dtype=str)
