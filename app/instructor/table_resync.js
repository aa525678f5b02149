// Reaches into Panel's Tabulator view (private _building and setData): no public API redraws rows gone out of step with their data.
const views = (view, out) => {
  if (view == null) return out
  if (view.tabulator !== undefined && typeof view.setData === 'function') out.push(view)
  for (const child of (view.child_views || [])) views(child, out)
  return out
}
// Rows and data agree when the table holds the source's rows (by id where there is one) and,
// unpaged, draws one row per data row.
const inStep = (view, source) => {
  const table = view.tabulator
  const rows = source.get_length()
  if (table.getDataCount() !== rows) return false
  const ids = source.data.id
  if (ids !== undefined && table.getData().some((row, n) => row.id !== ids[n])) return false
  if (view.model.pagination != null) return true
  return view.shadow_el.querySelectorAll('.tabulator-row:not(.tabulator-calcs)').length === rows
}
// A table still being built takes no new data (setData returns at once): look again later, a
// bounded number of times.
const resync = (view, source, tries) => {
  const table = view.tabulator
  if (table == null) return
  if (!table.initialized || view._building) {
    if (tries > 0) setTimeout(() => resync(view, source, tries - 1), 300)
    return
  }
  if (!inStep(view, source)) view.setData()
}
// Looked at three times after each change: a redraw of the previous data can land after the
// first look found rows and data in step.
const LOOKS_MS = [300, 1000, 3000]
for (const root of Object.values(Bokeh.index)) {
  for (const view of views(root, [])) {
    const source = view.model.source
    source.properties.data.change.connect(() => {
      for (const ms of LOOKS_MS) setTimeout(() => resync(view, source, 20), ms)
    })
  }
}
