// Run when the server's connection drops, after mark_stale.js (whose everyElement it uses): a
// Save button that still looked pressable would take a click and do nothing, once the notice is
// closed. Each is greyed in the page itself (no model change: there is no server to send it to)
// and says why on hover.
for (const el of everyElement(document)) {
  if (el.tagName === 'BUTTON' && /^Save (run|ablation as a run)$/.test(el.textContent.trim())) {
    el.disabled = true
    el.title = 'Not connected to the workbench server: reload the page to save again.'
  }
}
