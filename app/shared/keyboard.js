// Keyboard use of the page, in every shadow root (Panel and Bokeh draw each part in its own, and
// some parts are drawn after the page is ready, so each root is watched):
// - WCAG 2.4.7: the focus ring `css` (args) replaces Bokeh's 1 px dotted line, also on Bokeh's
//   own models (the maps' PNG buttons, the exercise's text area), which take no Panel design;
// - Bokeh makes each plot's event layer a Tab stop (tabindex 0) for keyboard tools; no plot here
//   has one, so the stop did nothing: it leaves the Tab order (the Row field chooses a row).
const sheet = new CSSStyleSheet()
sheet.replaceSync(css)
const seen = new WeakSet()
const scan = (root) => {
  for (const el of root.querySelectorAll('.bk-events[tabindex="0"]')) el.tabIndex = -1
  for (const el of root.querySelectorAll('*')) if (el.shadowRoot) visit(el.shadowRoot)
}
const visit = (root) => {
  if (seen.has(root)) return
  seen.add(root)
  root.adoptedStyleSheets = [...root.adoptedStyleSheets, sheet]
  new MutationObserver(() => scan(root)).observe(root, {childList: true, subtree: true})
  scan(root)
}
visit(document)
