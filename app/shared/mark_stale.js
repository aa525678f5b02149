// selector, note and ok are defined before this by mark_stale_js (connection.py).
const walk = (root) => {
  for (const el of root.querySelectorAll('*')) {
    if (el.matches(selector) && !el.classList.contains('stale')) {
      if (ok) el.classList.remove(ok)
      el.classList.add('stale')
      el.append(note)
    }
    if (el.shadowRoot) walk(el.shadowRoot)
  }
}
walk(document)
