"""How the pages write a number: heat-map cells, row steps, readouts, contributions, tables.

One rule for every page: the minus sign is U+2212 ("−", as in −∞, also in an exponent), a
number that is not finite is said in words ("undefined" for NaN, naive softmax's ∞/∞; "∞",
"−∞"), and the digits follow the heat maps' cells. Left out: counts (``f"{n:,}"``) and
everything machine-readable (the command line, CSV and JSON keep ASCII and full precision).
"""

from __future__ import annotations

import math
from typing import Literal

MINUS = "\u2212"
Style = Literal["cell", "narrow", "exact"]


def format_number(x: float, style: Style = "cell", *, trim: bool = False) -> str:
    """A number as a page shows it.

    Parameters
    ----------
    x : float
        Any float (or something ``float()`` takes: a numpy scalar, an int).
    style : {"cell", "narrow", "exact"}
        ``"cell"``: three decimals as the course text prints them (0.065, 0.266), three significant
        digits below 0.01 (so the broken row's 0.00125 stays readable), scientific notation at
        or beyond 1e5 and below 1e-4 (``1.00e−05``). ``"narrow"``: at most 6 characters for a
        cell too narrow for that (``3e−04``, ``0.27``, ``17.3``, ``1001``). ``"exact"``: twelve
        significant digits, where three decimals would hide what matters (0.9999 is not 1.000).
    trim : bool, default False
        Drop trailing zeros after the decimal point (``1.00`` → ``1``, ``0.50`` → ``0.5``), for
        a label that must stay short (a bar's); a cell keeps them so a column's digits line up.

    Returns
    -------
    str
        The text; 0 (and −0) is ``"0"``; NaN ``"undefined"``, ±∞ ``"∞"``/``"−∞"``.

    Raises
    ------
    ValueError
        For an unknown ``style``.
    """
    x = float(x)
    if math.isnan(x):
        return "undefined"
    if math.isinf(x):
        return MINUS + "∞" if x < 0 else "∞"
    if x == 0:
        return "0"
    a = abs(x)
    if style == "cell":
        text = f"{x:.2e}" if a >= 1e5 or a < 1e-4 else f"{x:.3g}" if a < 0.01 else f"{x:.3f}"
    elif style == "narrow":
        text = (f"{x:.0e}" if a >= 1e4 or a < 0.01 else f"{x:.0f}" if a >= 100
                else f"{x:.1f}" if a >= 10 else f"{x:.2f}")
    elif style == "exact":
        text = f"{x:.12g}"
    else:
        raise ValueError(f"style must be 'cell', 'narrow' or 'exact', not {style!r}")
    if trim and "." in text and "e" not in text:
        text = text.rstrip("0").rstrip(".")
    return text.replace("-", MINUS)


def format_result(x: float | None, style: Style = "cell") -> str:
    """:func:`format_number` of a result read back from a record, where ``None`` is a value that
    was not finite when computed (strict JSON writes it ``null``). The only such results the core
    makes are NaN (naive softmax's ∞/∞ in a row sum or a total), so ``None`` reads "undefined",
    as the page that computed the run said."""
    return format_number(math.nan if x is None else x, style)


__all__ = ["MINUS", "format_number", "format_result"]
