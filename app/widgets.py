"""A checkbox whose label is its accessible name.

Bokeh's checkbox renders its text beside the input without a ``<label>`` around it, so screen
readers announce an unnamed "checkbox" and tests cannot find it by its label. This is the same
control as a native ``<label><input type=checkbox> text</label>`` inside Panel's own custom
component mechanism (``panel.custom.JSComponent``), with ``value`` synced both ways.
"""

from __future__ import annotations

import panel as pn
import param


class LabelledCheckbox(pn.custom.JSComponent):
    """A native, keyboard-usable checkbox named by its ``label``."""

    value = param.Boolean(default=False, doc="Whether the box is ticked.")
    label = param.String(default="", doc="The visible text, also the accessible name.")

    _esm = """
    export function render({ model }) {
      const label = document.createElement("label");
      const input = document.createElement("input");
      const text = document.createElement("span");
      input.type = "checkbox";
      input.checked = model.value;
      text.textContent = model.label;
      label.append(input, text);
      input.addEventListener("change", () => { model.value = input.checked; });
      model.on("value", () => { input.checked = model.value; });
      model.on("label", () => { text.textContent = model.label; });
      return label;
    }
    """

    _stylesheets = [
        "label { display: flex; gap: 6px; align-items: center; cursor: pointer; "
        "font-size: 14px; } input { width: 16px; height: 16px; margin: 0; }"
    ]

    @classmethod
    def for_param(cls, parameter: param.Parameter, label: str, **params) -> LabelledCheckbox:
        """A checkbox kept in sync both ways with a Boolean parameter of a Parameterized."""
        owner, name = parameter.owner, parameter.name
        box = cls(value=getattr(owner, name), label=label, **params)
        box.param.watch(lambda e: setattr(owner, name, e.new), "value")
        owner.param.watch(lambda e: setattr(box, "value", e.new), name)
        return box
