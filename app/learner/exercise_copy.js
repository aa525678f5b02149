const say = (kind, text) => { status.text = `<div class="status ${kind}" role="status">${text}</div>` }
if (!(window.isSecureContext && navigator.clipboard)) {
  say('error', 'This page cannot use the clipboard (it needs https or localhost): ' +
      'select the text in Generated test and copy it, or use Download test.')
} else {
  navigator.clipboard.writeText(area.value).then(
    () => say('ok', `Copied the test to the clipboard (${area.value.trimEnd().split('\n').length} lines).`),
    () => say('error', 'The browser refused the clipboard: select the text in Generated test ' +
                       'and copy it, or use Download test.'))
}
