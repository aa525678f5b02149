"""Runs brought in by upload on the instructor page: the import command's rules, a summary, a size limit."""

from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest
from store_helpers import make_record, sqlite_store, tampered_broken_run

from app.instructor import InstructorState
from app.instructor.upload import UploadView, upload_summary
from app.store import export_json


@pytest.fixture
def store(tmp_path):
    with sqlite_store(tmp_path) as store:
        store.save(make_record("correct", minutes=0, learner="Ada", label="already here"))
        yield store


def test_an_upload_imports_records_and_bundles_and_says_what_it_did(store):
    view = UploadView(state=InstructorState(store=store))
    assert view.state.total == 1
    here = view.state.store.get(view.state.page_runs[0].id)
    new = [make_record("no_mask", minutes=m, learner="Lin", label=f"from home {m}") for m in (1, 2)]
    changed = json.loads(here.to_json()) | {"label": "edited elsewhere"}
    files = {
        "lin-run.json": new[0].to_json().encode("utf-8"),
        "class-runs.json": export_json([new[1], here]),  # a str, as FilePond gives text files
        "same-id.json": json.dumps(changed).encode("utf-8"),
        "notes.json": b"{not json",
    }
    report = view.take(files)
    assert [(f.name, f.imported, f.skipped, f.refused) for f in report.files if f.read] == [
        ("lin-run.json", [new[0].id], [], []), ("class-runs.json", [new[1].id], [here.id], []),
        ("same-id.json", [], [], [here.id])]
    assert report.files[3].error.startswith("not valid JSON")
    summary = upload_summary(report)
    assert ("<b>Not imported: 2 of the 4 files listed below.</b> Upload: imported 2 runs, skipped 1 already "
            "in the store, refused 1 (same id, different content), 0 not valid, 1 of 4 files not read, 1 file "
            "refused whole (0 valid runs held back).") in summary
    assert "notes.json: not valid JSON" in summary
    assert "class='import refused' role='alert'" in summary  # not the green of an upload that all went in
    # The files not taken first, in the error's box; then the others, in a box of their own.
    assert summary.index("same-id.json") < summary.index("notes.json") < summary.index("lin-run.json")
    kept_out, _, went_in = str(summary).partition("<div class='import done' role='status'>")
    assert "lin-run.json" in went_in and "lin-run.json" not in kept_out and "notes.json" not in went_in
    done = view.take({"again.json": new[0].to_json().encode("utf-8")})
    assert "class='import done'" in upload_summary(done)
    assert f"refused 1 whose id is in the store with different content ({here.id})" in summary
    assert store.get(here.id).label == "already here"  # never overwritten


def test_an_upload_shows_its_runs_at_once_and_escapes_what_it_quotes(store):
    view = UploadView(state=InstructorState(store=store))
    record = make_record("mask_after_softmax", minutes=5, learner="Grace", label="<b>home</b>")
    view.dropper.value = {"<img src=x>.json": record.to_json().encode("utf-8")}
    assert [r.label for r in view.state.filtered()][-1] == "<b>home</b>"  # no wait for the next tick
    assert "&lt;img src=x&gt;.json: imported 1" in view.summary.object
    assert "<img" not in view.summary.object
    # Another file added to the list (Panel fills the same dict): only the new one is taken.
    other = make_record("correct", minutes=6, learner="Grace", label="second")
    view.dropper.value["second.json"] = other.to_json().encode("utf-8")
    view.dropper.param.trigger("value")
    assert "Upload: imported 2 runs" in view.summary.object  # every file in the list
    assert "second.json: imported 1" in view.summary.object and view.summary.object.count("imported 1") == 2


def test_an_upload_refuses_a_record_whose_results_its_inputs_do_not_give_naming_file_and_field(store):
    view = UploadView(state=InstructorState(store=store))
    real, tampered = tampered_broken_run()
    view.dropper.value = {"rows-sum-to-1.json": json.dumps(tampered).encode("utf-8")}
    summary = view.summary.object
    assert (f"rows-sum-to-1.json: results.min_row_sum says 1.0; its inputs give {real.min_row_sum!r}"
            in summary)
    assert "class='import refused'" in summary
    assert real.id not in {r.id for r in store.iter_summaries()} and store.count() == 1


def test_an_upload_refuses_a_whole_bundle_for_one_run_whose_learner_holds_a_bidi_override(store):
    view = UploadView(state=InstructorState(store=store))
    good, odd = make_record(minutes=2, learner="Lin"), make_record(minutes=3, learner="Ada\u202e\u0000evil")
    view.dropper.value = {"class.json": export_json([good, odd])}
    summary = view.summary.object
    assert "class.json: nothing imported (a file is taken whole), held back 1 valid, 1 not valid" in summary
    assert "class.json runs[1]: learner holds U+202E (a bidirectional override" in summary
    assert "\u202e" not in summary and "\0" not in summary
    assert "<b>Not imported: the file listed below.</b>" in summary and "role='alert'" in summary
    assert store.count() == 1 and "Lin" not in {r.learner for r in store.iter_summaries()}
    # What the import made of the files stands above the drop area and its "Upload complete" tiles.
    layout = view.__panel__()
    assert list(layout).index(view.summary) < list(layout).index(view.dropper)


def test_a_file_over_the_size_limit_is_refused_with_a_message(store):
    view = UploadView(state=InstructorState(store=store), max_mb=1)
    assert view.dropper.max_file_size == "1MB"  # the browser refuses it first, with FilePond's message
    big = make_record(minutes=7).to_json().encode("utf-8") + b" " * (1024 * 1024)
    report = view.take({"big.json": big})
    assert report.files[0].error == ("larger than the 1 MB an upload may be; import it with "
                                     "`attention-workbench import` instead")
    assert len(view.state.store.query().runs) == 1


def test_upload_in_a_real_browser_then_the_size_limit(tmp_path, page):
    from playwright.sync_api import expect
    from workbench_server import NO_PASSWORD, blocking_violations, open_instructor, start_server, table_rows, watched

    home = [make_record("no_mask", minutes=m, learner="Lin", label=f"at home {m}") for m in (1, 2)]
    files = tmp_path / "from-learners"
    files.mkdir()
    (files / "lin-run.json").write_text(home[0].to_json(), encoding="utf-8")
    (files / "lin-bundle.json").write_text(export_json(home), encoding="utf-8")
    (files / "broken.json").write_text("{", encoding="utf-8")
    (files / "readme.txt").write_text("Bring your runs on Friday.", encoding="utf-8")
    (files / "empty.json").write_bytes(b"")
    real, tampered = tampered_broken_run()
    (files / "rows-sum-to-1.json").write_text(json.dumps(tampered), encoding="utf-8")
    (files / "ada-rlo.json").write_text(make_record(minutes=3, learner="Ada\u202e\u0000evil").to_json(),
                                        encoding="utf-8")
    running = start_server(tmp_path / "class", tmp_path / "server.log", env=NO_PASSWORD)
    try:
        watch = watched(page, running)
        page.set_viewport_size({"width": 1280, "height": 720})
        open_instructor(page, running)
        expect(page.get_by_test_id("runs-total")).to_have_text("0")
        picker = page.locator("input[type=file]")
        picker.set_input_files([str(files / n) for n in ("lin-run.json", "lin-bundle.json", "broken.json",
                                                           "readme.txt", "empty.json", "rows-sum-to-1.json",
                                                           "ada-rlo.json")])
        summary = page.get_by_test_id("import-summary")
        expect(summary).to_contain_text("Not imported: 5 of the 7 files listed below. Upload: imported 2 runs, "
                                        "skipped 1 already in the store")
        expect(summary).to_contain_text("ada-rlo.json: learner holds U+202E (a bidirectional override")
        # An error, above the drop area whose tiles all say "Upload complete".
        expect(page.get_by_role("alert").filter(has_text="Not imported")).to_be_visible()
        assert summary.bounding_box()["y"] + summary.bounding_box()["height"] <= \
            page.locator(".filepond--root").bounding_box()["y"]
        expect(summary).to_contain_text("broken.json: not valid JSON")
        # Not refused by FilePond's type check ("Expects  or application/json"): named, in the
        # import command's words.
        expect(summary).to_contain_text("readme.txt: not a JSON record or export bundle (.json)")
        expect(summary).to_contain_text("empty.json: the file is empty")
        expect(summary).to_contain_text(
            f"rows-sum-to-1.json: results.min_row_sum says 1.0; its inputs give {real.min_row_sum!r}")
        expect(page.get_by_text("Expects", exact=False)).to_have_count(0)
        expect(page.get_by_test_id("runs-total")).to_have_text("2")  # in the table without a reload
        expect(table_rows(page).filter(has_text="at home 2")).to_have_count(1)
        # Case-sensitive: a plain has_text ignores case, and a row's run id (hex) may hold "ada".
        expect(table_rows(page).filter(has_text=re.compile("Ada"))).to_have_count(0)
        assert blocking_violations(page) == []
        # Over the limit: refused in the browser with a message, nothing sent.
        big = tmp_path / "huge-bundle.json"
        with open(big, "wb") as f:
            f.truncate(51 * 1024 * 1024)
        picker.set_input_files(str(big))
        expect(page.get_by_text("File is too large", exact=True)).to_be_visible()
        expect(page.locator(".filepond--file-status-sub").filter(has_text="Maximum file size is")) \
            .to_contain_text("50")
        expect(summary).not_to_contain_text("huge-bundle.json")
        expect(page.get_by_test_id("runs-total")).to_have_text("2")
        page.get_by_role("heading", name="Import runs").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "upload.png"))
        watch.assert_clean()
    finally:
        running.stop()


def test_the_summary_counts_one_run_in_the_singular():
    from app.store.importing import FileReport, ImportReport

    one = ImportReport([FileReport("a.json", imported=["r1"])])
    assert one.summary().startswith("imported 1 run, skipped 0")
    assert ImportReport([FileReport("b.json", imported=["r1", "r2"])]).summary().startswith("imported 2 runs,")


def test_the_summary_writes_large_counts_with_thousands_separators():
    from app.store.importing import FileReport, ImportReport

    bundle = FileReport("class.json", imported=[f"r{n}" for n in range(12_345)],
                        skipped=[f"s{n}" for n in range(1_000)])
    report = ImportReport([bundle])
    assert report.summary().startswith("imported 12,345 runs, skipped 1,000 already in the store")
    assert bundle.lines()[0] == "class.json: imported 12,345, skipped 1,000 already in the store"


def test_a_file_that_is_not_json_or_is_empty_gets_the_import_commands_words(store, tmp_path, capsys):
    from app.cli import main
    from app.store import sqlite_url

    view = UploadView(state=InstructorState(store=store))
    view.dropper.value = {"readme.txt": "Bring your runs on Friday.\n", "empty.json": b"",
                          "photo.png": b"\x89PNG\r\n\x1a\n\x00", "blank.json": b" \n"}
    summary = view.summary.object
    assert "<li>readme.txt: not a JSON record or export bundle (.json)</li>" in summary
    assert "<li>photo.png: not a JSON record or export bundle (.json)</li>" in summary
    assert "<li>empty.json: the file is empty</li>" in summary
    assert "<li>blank.json: the file is empty</li>" in summary
    assert "Expects" not in summary and "Expecting value" not in summary
    # A run file under another name is still a run file.
    view.dropper.value["ada.txt"] = make_record(minutes=3).to_json()
    view.dropper.param.trigger("value")
    assert "ada.txt: imported 1" in view.summary.object
    # The same files on the command line: the same words.
    (tmp_path / "readme.txt").write_text("Bring your runs on Friday.\n")
    (tmp_path / "empty.json").write_bytes(b"")
    assert main(["import", "--store", sqlite_url(tmp_path / "cli.db"), str(tmp_path / "readme.txt"),
                 str(tmp_path / "empty.json")]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path / 'readme.txt'}: not a JSON record or export bundle (.json)\n" in out
    assert f"{tmp_path / 'empty.json'}: the file is empty\n" in out



def test_an_upload_is_imported_off_the_servers_event_loop(store):
    # A class's bundle takes seconds to validate; imported on the event loop it held up every
    # learner's page (a newcomer's edit waited 28.6 s behind a 25 MB upload).
    view = UploadView(state=InstructorState(store=store))
    record = make_record("correct", minutes=9, learner="Lin", label="from home")
    taking, release = threading.Event(), threading.Event()
    take = view.take

    def slow_take(files):
        taking.set()
        assert release.wait(10), "nothing else ran on the event loop while the upload was imported"
        return take(files)

    view.take = slow_take

    async def a_learners_callback():
        while not taking.is_set():
            await asyncio.sleep(0.01)
        release.set()  # ran while the import was still going on

    async def both():
        await asyncio.gather(view._import({"lin.json": record.to_json()}), a_learners_callback())

    # A loop of its own, in a thread: the test process may already run one (Playwright's).
    server_loop = threading.Thread(target=asyncio.run, args=(both(),))
    server_loop.start()
    server_loop.join(30)
    assert not server_loop.is_alive()
    assert "lin.json: imported 1" in view.summary.object
    assert store.get(record.id).label == "from home"


def test_a_file_name_cannot_turn_its_summary_line_round(store):
    # "odd name \u202e.json" reversed the rest of its line: "…erots eht ni ydaerla 1 deppiks".
    view = UploadView(state=InstructorState(store=store))
    view.dropper.value = {"odd name \u202e.json": make_record(minutes=4).to_json()}
    assert "\u202e" not in view.summary.object
    assert "<li>odd name .json: imported 1</li>" in view.summary.object


def test_an_import_that_fails_unexpectedly_leaves_no_importing_line(store):
    view = UploadView(state=InstructorState(store=store))
    view._importing.add("odd.json")
    view.summary.object = view._summary()
    assert "Importing 1 file" in view.summary.object

    def broken_take(files):
        raise RuntimeError("a bug")

    view.take = broken_take
    errors = []
    loop = threading.Thread(target=lambda: errors.append(
        pytest.raises(RuntimeError, asyncio.run, view._import({"odd.json": b"{}"}))))
    loop.start()
    loop.join(30)
    assert errors and "Importing" not in view.summary.object
