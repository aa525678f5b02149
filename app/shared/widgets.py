"""Checkboxes whose labels are their accessible names, and a row of buttons, each one model.

Bokeh's checkbox renders its text beside the input without a ``<label>`` around it, so screen
readers announce an unnamed "checkbox" and tests cannot find it by its label. This is the same
control as a native ``<label><input type=checkbox> text</label>`` inside Panel's own custom
component mechanism (``panel.custom.JSComponent``), with ``value`` synced both ways.

Also :func:`in_one_patch`, for the callbacks of the bare Bokeh widgets the pages use.
"""

from __future__ import annotations

import functools

import panel as pn
import param


def in_one_patch(callback):
    """Wrap a bare Bokeh widget's ``on_change``/``on_click`` callback so that everything it
    changes on the page reaches the browser as one message.

    The views change their Bokeh models inside Panel's ``pn.io.unlocked()``, which sends what
    was changed when it ends. Called from a Bokeh callback, each view's block sent a message of
    its own: an edit reached the browser as three, and BokehJS applied and drew each before
    reading the next (~10 ms apiece). Nested in this one, the views' blocks hold their changes
    until it ends (what ``unlocked()`` does when the document is already held), and the
    browser draws once. Panel's own widgets already process an event this way.
    """
    @functools.wraps(callback)
    def wrapped(*args, **kwargs):
        with pn.io.unlocked():
            return callback(*args, **kwargs)
    return wrapped


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


class LabelledCheckboxes(pn.custom.JSComponent):
    """Several native checkboxes, each named by its label, as one Bokeh model.

    One ``<label><input type=checkbox> text</label>`` per label, in one model: every model is
    memory the server keeps for each open page, and the toggles only say which boxes are ticked.
    A click sends only that box's new state; :attr:`value` is set on the server alone.
    """

    labels = param.List(default=[], item_type=str, doc="One checkbox per label, in order.")
    value = param.List(default=[], item_type=bool, doc="Whether each box is ticked.")

    _esm = """
    export function render({ model }) {
      const box = document.createElement("div");
      const pending = new Map();  // box index -> state clicked, until the server's value agrees
      const inputs = model.labels.map((text, i) => {
        const label = document.createElement("label");
        const input = document.createElement("input");
        const span = document.createElement("span");
        input.type = "checkbox";
        input.checked = Boolean(model.value[i]);
        span.textContent = text;
        label.append(input, span);
        // Only this box's change goes to the server, which owns `value` and sends it back: a
        // whole list built here could carry another box's state from before a patch that is
        // still on its way (a preset, say) and undo it.
        input.addEventListener("change", () => {
          pending.set(i, input.checked);
          model.send_msg({ index: i, checked: input.checked });
        });
        box.append(label);
        return input;
      });
      model.on("value", () => {
        inputs.forEach((input, i) => {
          const server = Boolean(model.value[i]);
          // A click the server has not answered yet is not undone by a patch sent before it.
          if (pending.has(i)) {
            if (pending.get(i) !== server) return;
            pending.delete(i);
          }
          input.checked = server;
        });
      });
      return box;
    }
    """

    _stylesheets = [
        "label { display: flex; gap: 6px; align-items: center; cursor: pointer; "
        "font-size: 14px; margin: 3px 0; } input { width: 16px; height: 16px; margin: 0; }"
    ]

    def _handle_msg(self, data) -> None:
        index = data.get("index") if isinstance(data, dict) else None
        if isinstance(index, int) and 0 <= index < len(self.value):
            value = list(self.value)
            value[index] = bool(data.get("checked"))
            self.value = value

    @classmethod
    def for_params(cls, owner: param.Parameterized, labels: dict[str, str],
                   **params) -> LabelledCheckboxes:
        """Checkboxes kept in sync both ways with Boolean parameters of ``owner``.

        ``labels`` maps each parameter's name to its checkbox's label.
        """
        names = list(labels)
        boxes = cls(labels=list(labels.values()), value=[getattr(owner, n) for n in names],
                    **params)

        def to_owner(event):
            owner.param.update({n: bool(v) for n, v in zip(names, event.new, strict=False)
                                if getattr(owner, n) != bool(v)})

        boxes.param.watch(to_owner, "value")
        owner.param.watch(lambda e: setattr(boxes, "value", [getattr(owner, n) for n in names]),
                          names)
        return boxes


def like_the_first_paint():
    """Build a part that arrives after the first paint as the parts built with the page were.

    The page's parts are built before its template sets a design; built later, under that
    design, a part takes Bootstrap's larger headings and table fonts. Both pages use it.
    """
    return pn.config.set(design=None)
