const set = (el, name, value) => { if (el && el.getAttribute(name) !== value) el.setAttribute(name, value) }
const fixGrid = (grid) => {
  const holder = grid.querySelector(':scope > .tabulator-tableholder')
  set(holder, 'role', 'rowgroup')
  set(holder && holder.querySelector(':scope > .tabulator-table'), 'role', 'none')
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
