"""Small helpers for building Panel parts, shared by both pages.

The learner page's one custom component, the input grid, is in :mod:`app.shared.grid`.
"""

from __future__ import annotations

import panel as pn

# Bokeh's spinner buttons have no accessible name (axe: critical); the field keeps the arrow keys.
NO_SPIN_BUTTONS = ":host .bk-spin-btn { display: none !important; }"


def like_the_first_paint():
    """Build a part that arrives after the first paint as the parts built with the page were.

    The page's parts are built before its template sets a design; built later, under that
    design, a part takes Bootstrap's larger headings and table fonts.
    """
    return pn.config.set(design=None)
