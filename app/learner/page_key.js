// This browser's page key (app/learner/page_key.py): made once, 128 random bits as 32 hex digits,
// kept in localStorage for this origin, and sent to the server as the model's `page_key`.
const NAME = 'attention-workbench-page-key'

function newKey() {
  const bytes = new Uint8Array(16)
  window.crypto.getRandomValues(bytes)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

export function render({ model }) {
  let key = null
  try { key = window.localStorage.getItem(NAME) } catch (e) { key = null }  // storage blocked
  if (!key || !/^[0-9a-f]{32,128}$/.test(key)) {
    key = newKey()
    try { window.localStorage.setItem(NAME, key) } catch (e) { /* this page's life only */ }
  }
  if (model.page_key !== key) model.page_key = key
}
