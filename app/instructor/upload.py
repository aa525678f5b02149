"""Bring runs in from the instructor page: record files and export bundles, uploaded.

The rules are the ``import`` command's, by the same function (:func:`app.store.importing.import_data`,
one transaction per file): each record validated and its results computed again, a run already
in the store with the same content skipped, a file holding a record not valid or an id with different content refused
whole (never overwritten), a bad file reported with its reason, in the command's words, while the others still go in.
What happened is summed up above the drop area, the files refused first,
file by file. Learners' runs come from ``panel serve`` on their own machines: their downloads
(*Download my runs*) and exports are these files.

Panel's ``FileDropper`` sends a file in chunks (a whole file in one WebSocket message would close
a connection at Bokeh's message limit) and refuses a file over the size limit in the browser,
with FilePond's message, before sending it; the server checks the size again.
"""

from __future__ import annotations

import asyncio
from functools import partial

import panel as pn
import param

from app.instructor.state import InstructorState
from app.shared.html import Markup, html, join
from app.shared.parsing import displayable
from app.shared.static import read_text
from app.store import StoreError
from app.store.importing import FileReport, ImportReport, import_data, log_import

MAX_UPLOAD_MB = 50  # per file: a class's export bundle of 10,000 runs is ~30 MB


def _not_taken(report: ImportReport) -> str:
    listed, kept_out = len(report.files), sum(not f.taken for f in report.files)
    if listed == 1:
        return "the file listed below"
    return f"{kept_out:,} of the {listed:,} files listed below"


def upload_summary(report: ImportReport, limit: int = 40) -> Markup:
    """What an upload did, as escaped HTML: the totals in one sentence, then each file's lines
    (what it added, skipped and refused, and why a file or a record was not taken), the files
    not taken first; styled as an error (``import refused``) unless every file was taken."""
    refused = [line for f in report.files if not f.taken for line in f.lines()]
    taken = [line for f in report.files if f.taken for line in f.lines()]

    def items(lines: list[str], room: int) -> Markup:
        # A file's name is the uploader's text: no bidi override may turn the rest of its line round.
        shown = join(html("<li>{}</li>", displayable(line)) for line in lines[:room])
        more = html("<li>… and {:,} more lines</li>", len(lines) - room) if len(lines) > room else ""
        return html("<ul>{}{}</ul>", shown, more)

    if report.all_taken:
        return html("<div class='import done' role='status' data-testid='import-summary'>"
                    "<p><b>Upload: {}.</b></p>{}</div>", report.summary(), items(taken, limit))
    # The files kept out in the error's box; those taken below it, in the box of an upload that
    # went in (a newcomer read "imported 1" inside the red box as refused too).
    # Of the files listed in the drop area, each drop's with the earlier ones' (a newcomer read a
    # count of all of them as this drop's): a file removed from the list leaves the summary.
    kept_out = html("<div class='import refused' role='alert'><p><b>Not imported: {}.</b> Upload: {}.</p>{}"
                    "</div>", _not_taken(report), report.summary(), items(refused, limit))
    went_in = html("<div class='import done' role='status'><p>The other files, read whole:</p>{}</div>",
                   items(taken, max(0, limit - len(refused)))) if taken else ""
    return html("<div data-testid='import-summary'>{}{}</div>", kept_out, went_in)


_SUMMARY_CSS = read_text(__package__, "upload_summary.css")


class UploadView(pn.viewable.Viewer):
    """Upload record files and export bundles into the store; a summary of each upload."""

    state = param.ClassSelector(class_=InstructorState)
    max_mb = param.Integer(default=MAX_UPLOAD_MB, bounds=(1, None), doc="Largest file taken, in MB.")

    def __init__(self, **params):
        super().__init__(**params)
        # Any type is taken and judged here, in the import command's words ("readme.txt: not a
        # JSON record or export bundle (.json)"): FilePond's own type check said "Expects  or
        # application/json" without naming the file.
        self.dropper = pn.widgets.FileDropper(
            label="Import runs", multiple=True, max_file_size=f"{self.max_mb}MB", sizing_mode="stretch_width")
        self.summary = pn.pane.HTML("", name="import-summary", stylesheets=[_SUMMARY_CSS],
                                    sizing_mode="stretch_width")
        self._reports: dict[str, FileReport] = {}  # each listed file's import, by name
        self._importing: set[str] = set()  # names being imported now
        self.dropper.param.watch(self._uploaded, "value")

    def _uploaded(self, event) -> None:
        # FilePond sends the files one by one, and keeps them listed (and in value, a dict Panel
        # fills in place, so event.old is no guide): each new file is imported once, and the
        # summary covers every file in the list; one removed from it may be dropped again.
        files = event.new or {}
        self._reports = {name: report for name, report in self._reports.items() if name in files}
        added = {name: data for name, data in files.items()
                 if name not in self._reports and name not in self._importing}
        if not added:
            return
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:  # no server (a notebook, a test): at once
            self._show(self.take(added))
            return
        self._importing.update(added)
        self.summary.object = self._summary()
        pn.state.execute(partial(self._import, added))

    async def _import(self, files: dict[str, bytes | str]) -> None:
        """Import ``files`` in a worker thread: a bundle of thousands of runs takes a while to
        validate, and on the server's event loop it would hold up every learner's page."""
        try:
            report = await asyncio.to_thread(self.take, files)
        finally:  # an unexpected error still takes its "Importing…" line off the page
            self._importing.difference_update(files)
            self.summary.object = self._summary()
        self._show(report)

    def _show(self, report: ImportReport) -> None:
        self._reports.update((r.name, r) for r in report.files)
        self.summary.object = self._summary()
        # The new runs in the table and the class picture at once, in a tick of their own as
        # the periodic refresh does: updated inside the upload's own event, Tabulator's remote
        # page sometimes stayed empty until a later change.
        pn.state.execute(self.state.refresh, schedule=True)

    def _summary(self) -> Markup | str:
        done = upload_summary(ImportReport(list(self._reports.values()))) if self._reports else ""
        if not self._importing:
            return done
        names = ", ".join(sorted(self._importing))
        return html("<div class='import' role='status' data-testid='import-progress'><p><b>Importing "
                    "{:,} file{}…</b> {}</p></div>{}", len(self._importing),
                    "s" if len(self._importing) != 1 else "", names, done)

    def take(self, files: dict[str, bytes | str]) -> ImportReport:
        """Import ``files`` (name → content) into the store, each in its own transaction."""
        report = ImportReport()
        limit = self.max_mb * 1024 * 1024
        for name, data in files.items():
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            if len(raw) > limit:
                report.files.append(FileReport(name, error=f"larger than the {self.max_mb} MB an upload may be; "
                                                          "import it with `attention-workbench import` instead"))
                continue
            try:
                report.files.append(import_data(self.state.store, name, raw))
            except StoreError as error:
                report.files.append(FileReport(name, error=f"the store could not be written ({error})"))
        log_import(report, "upload")
        return report

    def __panel__(self):
        return pn.Column(
            pn.pane.HTML(html("<h3>Import runs</h3><p>Drop learners' downloads (record files) or export "
                              "bundles (JSON, at most {} MB each) here: the same rules as "
                              "<code>attention-workbench import</code>. A run already here is skipped; a "
                              "different run with the same id is refused, never overwritten.</p>",
                              self.max_mb)),
            # The summary above the drop area: FilePond marks every file it sent "Upload complete",
            # so what the import made of each (a refusal first) must be in view before its tiles.
            self.summary, self.dropper, sizing_mode="stretch_width")
