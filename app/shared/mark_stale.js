// selector, note and ok are defined before this by mark_stale_js (connection.py).
// Every element of the page, inside the shadow roots Panel and Bokeh draw in too (a script run
// after this one, in the same callback, may use it).
const everyElement = function* (root) {
  for (const el of root.querySelectorAll('*')) {
    yield el
    if (el.shadowRoot) yield* everyElement(el.shadowRoot)
  }
}
for (const el of everyElement(document)) {
  if (el.matches(selector) && !el.classList.contains('stale')) {
    if (ok) el.classList.remove(ok)
    el.classList.add('stale')
    el.append(note)
  }
}
