"""Plain-text lists in the page's sentences."""

from __future__ import annotations

from collections.abc import Sequence


def in_words(items: Sequence[str]) -> str:
    """``items`` as a sentence lists them: "a", "a and b", "a, b and c". ``items`` is not empty."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
