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


class ButtonGroup(pn.custom.JSComponent):
    """A heading and a row of native buttons, one Bokeh model for all of them.

    Each Panel ``Button`` is a model of its own that the server keeps (and ships) for every open
    page; a row of buttons that only ever says "this one was pressed" needs one. Pressing sends
    the button's index to :attr:`on_press`.
    """

    heading = param.String(default="", doc="Bold text above the buttons.")
    labels = param.List(default=[], item_type=str, doc="One button per label, in order.")

    _esm = """
    export function render({ model }) {
      const box = document.createElement("div");
      const draw = () => {
        const heading = document.createElement("b");
        heading.textContent = model.heading;
        const row = document.createElement("div");
        row.className = "buttons";
        model.labels.forEach((text, i) => {
          const button = document.createElement("button");
          button.type = "button";
          button.textContent = text;
          button.addEventListener("click", () => model.send_msg(i));
          row.append(button);
        });
        box.replaceChildren(...(model.heading ? [heading] : []), row);
      };
      draw();
      model.on(["heading", "labels"], draw);
      return box;
    }
    """

    _stylesheets = [
        ".buttons { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; } "
        "button { font: inherit; font-size: 14px; padding: 6px 12px; border-radius: 4px; "
        "border: 1px solid #dee2e6; background: #f8f9fa; color: #212529; cursor: pointer; } "
        "button:hover { background: #e2e6ea; } "
        "button:focus-visible { outline: 2px solid #0d6efd; outline-offset: 2px; }"
    ]

    def __init__(self, on_press=None, **params):
        super().__init__(**params)
        self.on_press = on_press

    def _handle_msg(self, data) -> None:
        if self.on_press is not None and isinstance(data, int) and 0 <= data < len(self.labels):
            self.on_press(data)
