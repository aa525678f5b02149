// One layout of the page per message from the server, not one per change in it.
//
// BokehJS (3.9) lays the whole page out again, every plot measured and painted, each time a part
// calls LayoutDOMView.invalidate_layout: a change of `visible`, `children`, `css_classes`, a
// size... One message (Panel holds an edit's changes into one) can hold a dozen of them: a
// failure-mode switch at a batch of three showed or hid 8–15 parts, each a layout of the whole
// page (200–300 ms each in a 2-core VM's Chromium). Here the calls made while one message is
// applied are gathered and the page laid out once, in a microtask after the message and before
// the browser draws, as the last of them would have. Measured: bench/README.md, "Issue 25:
// one layout per message" (`make bench ARGS='--only mode_switch'`).
//
// A private part of BokehJS, found from the page's own root views (no import map reaches it):
// the class that defines both invalidate_layout and compute_layout. BokehJS's own function stays
// on the replacement as `bokeh_invalidate_layout` (the bench restores it to compare).
let proto = null
for (const view of Object.values(Bokeh.index)) {
  for (let p = Object.getPrototypeOf(view); p !== null; p = Object.getPrototypeOf(p)) {
    if (Object.hasOwn(p, 'invalidate_layout') && Object.hasOwn(p, 'compute_layout')) { proto = p; break }
  }
  if (proto !== null) break
}
if (proto !== null && proto.invalidate_layout.bokeh_invalidate_layout === undefined) {
  const invalidate = proto.invalidate_layout
  const LayoutDOMView = proto.constructor
  const roots = new Set()
  const layOut = () => {
    const pending = [...roots]
    roots.clear()
    for (const root of pending) invalidate.call(root)
  }
  const once = function () {
    // BokehJS's own walks up to the root and lays that out: so does this, once.
    let root = this
    while (root.parent instanceof LayoutDOMView) root = root.parent
    if (roots.size === 0) queueMicrotask(layOut)
    roots.add(root)
  }
  once.bokeh_invalidate_layout = invalidate
  proto.invalidate_layout = once
}
