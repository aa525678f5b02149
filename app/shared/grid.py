"""An editable grid of number fields: one matrix (or several side by side) as one widget.

Used for the learner's inputs: the token table (each token's query, key and value components,
or its row of X, and its padding tick) and the projections W_Q, W_K, W_V. Texts are kept as
typed; parsing and messages are the state's job, which hands each cell's message back
(:attr:`MatrixGrid.errors`).
"""

from __future__ import annotations

import panel as pn
import param
from panel.custom import JSComponent

_ESM = """
function el_of(tag, attrs = {}, text = null) {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v)
  if (text !== null) e.textContent = text
  return e
}

export function render({ model }) {
  const wrap = el_of('div', {class: 'grid-wrap'})
  let table = null
  let inputs = []        // inputs[i][j], in the order of model.labels
  let boxes = []         // the optional tick per row
  let bodies = []        // per row: [tr, message tr, message cell]
  const cells = new Map()  // label -> its <input>, kept across rebuilds (focus, caret, typing)
  let sent = 0             // edits sent, counted; the server answers with model.acked
  const waiting = new Map()  // label or 'tick i' -> the count of its last edit not yet acked

  const active = () => wrap.getRootNode().activeElement
  const unacked = key => (waiting.get(key) ?? 0) > model.acked

  function send(key, edit) {
    sent += 1
    waiting.set(key, sent)
    model.send_msg({...edit, seq: sent})
  }

  function commit(input) {
    if (input.value === input.shown) return
    input.shown = input.value
    const label = input.getAttribute('aria-label')
    send(label, {label: label, text: input.value})
  }

  function cell_input(label) {
    let input = cells.get(label)
    if (input === undefined) {
      input = el_of('input', {type: 'text', 'aria-label': label, inputmode: 'decimal',
                              autocomplete: 'off', spellcheck: 'false'})
      input.shown = null  // the text last shown from the server or sent to it
      input.addEventListener('change', () => commit(input))
      input.addEventListener('keydown', (e) => { if (e.key === 'Enter') commit(input) })
      input.addEventListener('input', fit_columns)
      cells.set(label, input)
    }
    return input
  }

  function build() {
    const labels = model.labels || []
    const groups = model.groups || []
    const focused = active()
    const caret = focused && focused.tagName === 'INPUT' && focused.type === 'text'
      ? [focused.selectionStart, focused.selectionEnd] : null
    table = el_of('table', {'aria-label': model.caption})
    const head = el_of('thead')
    if (groups.length) {
      const tr = el_of('tr')
      tr.appendChild(el_of('td'))
      for (const [title, span] of groups) {
        tr.appendChild(el_of('th', {scope: 'colgroup', colspan: String(span)}, title))
      }
      if (model.check_labels.length) tr.appendChild(el_of('td'))
      head.appendChild(tr)
    }
    const sub = el_of('tr')
    sub.appendChild(el_of('th', {scope: 'col'}, model.corner))
    for (const [title, span] of groups) {
      for (let c = 0; c < span; c++) {
        sub.appendChild(el_of('th', {scope: 'col', class: 'component'}, span > 1 ? String(c + 1) : ''))
      }
    }
    if (model.check_labels.length) sub.appendChild(el_of('th', {scope: 'col'}, model.check_title))
    head.appendChild(sub)
    table.appendChild(head)
    const body = el_of('tbody')
    inputs = []; boxes = []; bodies = []
    const kept = new Set(labels.flat())
    for (const label of [...cells.keys()]) {
      if (!kept.has(label)) { cells.delete(label); waiting.delete(label) }
    }
    const width = labels.length ? labels[0].length : 0
    labels.forEach((row, i) => {
      const tr = el_of('tr')
      tr.appendChild(el_of('th', {scope: 'row'}, (model.row_headers || [])[i] || String(i + 1)))
      const row_inputs = []
      row.forEach((label) => {
        const td = el_of('td')
        const input = cell_input(label)
        td.appendChild(input)
        tr.appendChild(td)
        row_inputs.push(input)
      })
      inputs.push(row_inputs)
      if (model.check_labels.length) {
        const td = el_of('td', {class: 'tick'})
        const box = el_of('input', {type: 'checkbox', 'aria-label': model.check_labels[i] || ''})
        box.addEventListener('change', () => send(`tick ${i}`, {tick: i, checked: box.checked}))
        td.appendChild(box)
        tr.appendChild(td)
        boxes.push(box)
      }
      const msg = el_of('tr', {class: 'messages'})
      const cell = el_of('td', {colspan: String(width + 1 + (model.check_labels.length ? 1 : 0))})
      msg.appendChild(cell)
      body.appendChild(tr)
      body.appendChild(msg)
      bodies.push([tr, msg, cell])
    })
    table.appendChild(body)
    wrap.replaceChildren(table)
    // A cell the learner was in keeps focus and caret when the grid is rebuilt around it.
    if (caret !== null && focused.isConnected && focused !== active()) {
      focused.focus({preventScroll: true})
      focused.setSelectionRange(caret[0], caret[1])
    }
    sync_values()
    sync_checks()
    show_errors()
  }

  // Each column as wide as its longest text (three characters at least), so every number
  // shows whole, as typed; the grid scrolls sideways if its columns outgrow the page's room.
  function fit_columns() {
    const width = inputs.length ? inputs[0].length : 0
    for (let j = 0; j < width; j++) {
      const chars = Math.max(3, ...inputs.map((row) => row[j].value.length))
      for (const row of inputs) row[j].style.width = `calc(${chars}ch + 8px)`
    }
  }

  // The server's texts, put into the cells in place. A cell keeps its own text while the
  // learner is typing in it, or while an edit of it is on its way to the server: a value the
  // server sent before it received that edit would otherwise replace what was typed.
  function sync_values() {
    const labels = model.labels || [], value = model.value || []
    if (labels.length !== inputs.length || labels.some((row, i) => row.length !== inputs[i].length)) {
      return  // labels and value arrive one after the other; build() syncs once both are here
    }
    inputs.forEach((row, i) => row.forEach((input, j) => {
      const text = (value[i] || [])[j] ?? ''
      const label = input.getAttribute('aria-label')
      const typing = input === active() && input.shown !== null && input.value !== input.shown
      if (unacked(label) || typing) return
      input.shown = text
      if (input.value !== text) input.value = text
    }))
    fit_columns()
  }

  function sync_checks() {
    boxes.forEach((box, i) => {
      if (!unacked(`tick ${i}`)) box.checked = Boolean((model.checks || [])[i])
    })
  }

  function acked() {
    for (const [key, seq] of [...waiting]) if (seq <= model.acked) waiting.delete(key)
    sync_values()
    sync_checks()
  }

  function show_errors() {
    const errors = model.errors || {}
    inputs.forEach((row, i) => {
      const [tr, msg, cell] = bodies[i]
      const shown = []
      row.forEach((input, j) => {
        const label = input.getAttribute('aria-label')
        const message = errors[label]
        if (message) {
          const id = `message-${i}-${j}`
          input.setAttribute('aria-invalid', 'true')
          input.setAttribute('aria-describedby', id)
          shown.push(el_of('div', {role: 'alert', id: id}, message))
        } else {
          input.removeAttribute('aria-invalid')
          input.removeAttribute('aria-describedby')
        }
      })
      cell.replaceChildren(...shown)
      msg.hidden = shown.length === 0
    })
  }

  build()
  model.on(['labels', 'groups', 'row_headers', 'check_labels', 'check_title', 'corner'], build)
  model.on('caption', () => table.setAttribute('aria-label', model.caption))
  model.on('value', sync_values)
  model.on('checks', sync_checks)
  model.on('acked', acked)
  model.on('errors', show_errors)
  return wrap
}
"""

_CSS = """
table { border-collapse: collapse; font-size: 13px; }
th { font-weight: normal; color: #444; padding: 0 3px; text-align: center; white-space: nowrap; }
th[scope=colgroup] { font-weight: bold; color: #222; border-bottom: 1px solid #ccc; }
th[scope=row] { text-align: right; padding-right: 6px; }
th[scope=col] { font-size: 11px; color: #666; }
td { padding: 1px; }
.grid-wrap { overflow-x: auto; }
input[type=text] { box-sizing: border-box; padding: 3px; font: inherit;
  border: 1px solid #ced4da; border-radius: 3px; }
input[type=text]:focus { outline: 2px solid #0d6efd; outline-offset: 0; border-color: #0d6efd; }
input[aria-invalid=true] { border: 2px solid #b00020; }
td.tick { text-align: center; }
td.tick input { width: 16px; height: 16px; cursor: pointer; }
tr.messages td { color: #b00020; font-size: 0.9em; padding: 2px 4px 4px; max-width: 0; }
tr.messages div { white-space: normal; overflow-wrap: anywhere; min-width: 20em; }
"""


class MatrixGrid(JSComponent):
    """One editable grid of texts, a labelled ``<input>`` per cell.

    A custom component because one Panel TextInput per cell costs a widget model per number
    (up to 96 on the largest page), over the page's memory and latency budget (bench/README.md).

    Like a TextInput, a cell's text arrives in :attr:`value` on Enter or when the cell is left.
    Each column is as wide as its longest text, as it is typed, so a number always shows whole.
    Every cell has its accessible name (:attr:`labels`); a message in :attr:`errors` marks its
    cell (``aria-invalid``) and is shown under that row with ``role="alert"``.

    The browser sends each edit alone (one cell's label and text, or one row's tick), counted;
    the grid applies it to its current :attr:`value` (or :attr:`checks`) and answers with the
    count in :attr:`acked`. A cell being typed in, or whose edit is not acknowledged yet, keeps
    its text when a value the server sent earlier arrives; the server's texts are put into the
    cells in place, so the cell with focus keeps it and its caret.
    """

    value = param.List(default=[], doc="Rows of texts (strings), as the grid shows them.")
    labels = param.List(default=[], doc="Rows of accessible names, one per cell; the grid's shape.")
    groups = param.List(default=[], doc="Column groups left to right: [title, number of columns].")
    row_headers = param.List(default=[], doc="Each row's header (default: its number from 1).")
    corner = param.String(default="", doc="Header of the row-header column.")
    caption = param.String(default="", doc="The accessible name of the whole grid.")
    checks = param.List(default=[], doc="Each row's tick, when check_labels are given.")
    check_labels = param.List(default=[], doc="Each row's tick label (none: no tick column).")
    check_title = param.String(default="", doc="Header of the tick column.")
    errors = param.Dict(default={}, doc="Message per cell label; other labels are ignored.")
    acked = param.Integer(default=0, doc="The count of the browser's last edit applied here.")

    _esm = _ESM
    _stylesheets = [_CSS]

    def _handle_msg(self, msg: object) -> None:
        """Apply one edit from the browser, ``{"seq", "label", "text"}`` or ``{"seq", "tick",
        "checked"}``, to the grid as it is now (a preset may have changed it since the browser
        drew it), then acknowledge ``seq``. An edit of a cell no longer in the grid is dropped.
        """
        if not isinstance(msg, dict) or not isinstance(msg.get("seq"), int):
            return
        update: dict = {}
        label, tick = msg.get("label"), msg.get("tick")
        if isinstance(label, str) and isinstance(msg.get("text"), str):
            for i, row in enumerate(self.labels):
                if label in row:
                    value = [list(r) for r in self.value]
                    value += [[] for _ in range(i + 1 - len(value))]
                    j = row.index(label)
                    value[i] += [""] * (j + 1 - len(value[i]))
                    value[i][j] = msg["text"]
                    update["value"] = value
                    break
        elif isinstance(tick, int) and 0 <= tick < len(self.check_labels):
            checks = [bool(c) for c in self.checks]
            checks += [False] * (tick + 1 - len(checks))
            checks[tick] = bool(msg.get("checked"))
            update["checks"] = checks
        # Held: the answer and everything the edit changes on the page reach it as one patch.
        # The count last: the browser lets go of the cell once its new value is there.
        with pn.io.hold():
            self.param.update(**update, acked=max(self.acked, msg["seq"]))
