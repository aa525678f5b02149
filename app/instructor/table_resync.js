// Reaches into Panel's Tabulator view (private _building and setData): no public API redraws rows gone out of step with their data.
const views = (view, out) => {
  if (view == null) return out
  if (view.tabulator !== undefined && typeof view.setData === 'function') out.push(view)
  for (const child of (view.child_views || [])) views(child, out)
  return out
}
for (const root of Object.values(Bokeh.index)) {
  for (const view of views(root, [])) {
    const source = view.model.source
    source.properties.data.change.connect(() => setTimeout(() => {
      const table = view.tabulator
      if (table && table.initialized && !view._building && table.getDataCount() !== source.get_length())
        view.setData()
    }, 300))
  }
}
