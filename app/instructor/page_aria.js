const set = (el, name, value) => { if (el && el.getAttribute(name) !== value) el.setAttribute(name, value) }
// Each row's tick box says whose run it ticks (Tabulator names every one "Select Row").
const cellText = (row, field) => {
  const cell = row.querySelector(`.tabulator-cell[tabulator-field="${field}"]`)
  return cell ? cell.textContent.trim() : ''
}
const nameTicks = (grid) => {
  for (const row of grid.querySelectorAll('.tabulator-row')) {
    const box = row.querySelector('input[type=checkbox]')
    const who = cellText(row, 'learner') || 'no learner'
    set(box, 'aria-label', `Select run: ${who}, ${cellText(row, 'mode')}, ${cellText(row, 'created (local)')}`)
  }
  set(grid.querySelector('.tabulator-header input[type=checkbox]'), 'aria-label', 'Select every run on this page')
}
const fixGrid = (grid) => {
  const holder = grid.querySelector(':scope > .tabulator-tableholder')
  set(holder, 'role', 'rowgroup')
  set(holder && holder.querySelector(':scope > .tabulator-table'), 'role', 'none')
  nameTicks(grid)
}
const fixPicker = (home) => {
  const label = home.querySelector('label')
  for (const field of home.querySelectorAll('input.form-control:not([type=hidden])'))
    if (label) set(field, 'aria-label', label.textContent.trim())
}
const fixes = {
  'bk-panel-models-tabulator-DataTabulator': (home) => home.querySelectorAll('.tabulator[role=grid]').forEach(fixGrid),
  'bk-DateRangePicker': fixPicker,
}
const watch = (home, fix) => {
  new MutationObserver(() => fix(home)).observe(home, {childList: true, subtree: true})
  fix(home)
}
const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) {
      for (const [cls, fix] of Object.entries(fixes)) if (el.classList.contains(cls)) watch(el.shadowRoot, fix)
      walk(el.shadowRoot)
    }
  }
}
walk(document)
