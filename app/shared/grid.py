"""An editable grid of number fields: one matrix (or several side by side) as one widget.

Used for the learner's inputs: the token table (each token's query, key and value components,
or its row of X, and its padding tick) and the projections W_Q, W_K, W_V. Texts are kept as
typed; parsing and messages are the state's job, which hands each cell's message back
(:attr:`MatrixGrid.errors`).
"""

from __future__ import annotations

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
  let inputs = []   // inputs[i][j]
  let boxes = []    // the optional tick per row
  let bodies = []   // per row: [tr, message tr]

  function commit(i, j, input) {
    const value = (model.value || []).map(row => row.slice())
    while (value.length <= i) value.push([])
    if (value[i][j] === input.value) return
    value[i][j] = input.value
    model.value = value
  }

  function build() {
    const labels = model.labels || []
    const groups = model.groups || []
    const table = el_of('table', {'aria-label': model.caption})
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
    const width = labels.length ? labels[0].length : 0
    labels.forEach((row, i) => {
      const tr = el_of('tr')
      tr.appendChild(el_of('th', {scope: 'row'}, (model.row_headers || [])[i] || String(i + 1)))
      const cells = []
      row.forEach((label, j) => {
        const td = el_of('td')
        const input = el_of('input', {type: 'text', 'aria-label': label, inputmode: 'decimal',
                                      autocomplete: 'off', spellcheck: 'false'})
        input.value = ((model.value || [])[i] || [])[j] ?? ''
        input.addEventListener('change', () => commit(i, j, input))
        input.addEventListener('keydown', (e) => { if (e.key === 'Enter') commit(i, j, input) })
        td.appendChild(input)
        tr.appendChild(td)
        cells.push(input)
      })
      inputs.push(cells)
      if (model.check_labels.length) {
        const td = el_of('td', {class: 'tick'})
        const box = el_of('input', {type: 'checkbox', 'aria-label': model.check_labels[i] || ''})
        box.checked = Boolean((model.checks || [])[i])
        box.addEventListener('change', () => {
          const checks = (model.checks || []).slice()
          while (checks.length <= i) checks.push(false)
          checks[i] = box.checked
          model.checks = checks
        })
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
    show_errors()
  }

  function sync_values() {
    const value = model.value || []
    inputs.forEach((row, i) => row.forEach((input, j) => {
      const text = (value[i] || [])[j] ?? ''
      if (input.value !== text) input.value = text
    }))
  }

  function sync_checks() {
    boxes.forEach((box, i) => { box.checked = Boolean((model.checks || [])[i]) })
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
  model.on(['labels', 'groups', 'row_headers', 'check_labels', 'check_title', 'corner', 'caption'], build)
  model.on('value', sync_values)
  model.on('checks', sync_checks)
  model.on('errors', show_errors)
  return wrap
}
"""

_CSS = """
table { border-collapse: collapse; font-size: 13px; }
th { font-weight: normal; color: #444; padding: 0 3px; text-align: center; white-space: nowrap; }
th[scope=colgroup] { font-weight: bold; color: #222; border-bottom: 1px solid #ccc; }
th[scope=row] { text-align: right; padding-right: 6px; }
th.component { font-size: 11px; color: #666; }
td { padding: 1px; }
input[type=text] { width: 2.8em; box-sizing: border-box; padding: 3px 4px; font: inherit;
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
    Every cell has its accessible name (:attr:`labels`); a message in :attr:`errors` marks its
    cell (``aria-invalid``) and is shown under that row with ``role="alert"``.
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

    _esm = _ESM
    _stylesheets = [_CSS]
