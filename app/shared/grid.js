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
