export function render({ model, view }) {
  // The parent's origin: Chromium and Safari list it, Firefox leaves the referrer's.
  function parentOrigin() {
    const ancestors = window.location.ancestorOrigins
    if (ancestors && ancestors.length > 0) return ancestors[0]
    try { return document.referrer ? new URL(document.referrer).origin : null } catch (e) { return null }
  }
  function trustedParent() {
    const origin = window.parent === window ? null : parentOrigin()
    return origin && model.trusted_origins.includes(origin) ? origin : null
  }
  function post() {
    const message = model.message, origin = trustedParent()
    if (!origin || !message || !message.run) return
    // The full workbench beside this page: /embed → /, behind any path prefix.
    const url = new URL(window.location.href)
    url.pathname = url.pathname.replace(/embed\/?$/, '')
    url.search = '?run=' + encodeURIComponent(message.run.id)
    url.hash = ''
    window.parent.postMessage({...message, url: url.href}, origin)
  }
  function listen(event) {
    if (window.parent === window || event.source !== window.parent) return
    if (!model.trusted_origins.includes(event.origin)) return
    const data = event.data
    if (!data || typeof data !== 'object' || data.type !== 'explorable-context') return
    if (data.instanceId !== undefined && data.instanceId !== model.instance_id) return
    const got = {}
    for (const key of ['learner', 'prediction']) {
      if (typeof data[key] === 'string') got[key] = data[key]
    }
    if (Object.keys(got).length > 0) model.received = got
  }
  model.on('message', post)
  // A re-render must not leave a second listener behind.
  if (view._explorable_listener) window.removeEventListener('message', view._explorable_listener)
  view._explorable_listener = listen
  window.addEventListener('message', listen)
  model.on('remove', () => window.removeEventListener('message', listen))
  // Now listening: a course page that sends the learner's text by message waits for this.
  const origin = trustedParent()
  const ready = {type: 'explorable-event', instanceId: model.instance_id, event: 'ready'}
  if (origin) window.parent.postMessage(ready, origin)
}
