"""Copy as test in a real Chromium (issue 16): a run saved in the browser gives the exercise's test.

The learner types queries and keys, saves a run in the broken "mask after softmax" mode, and
copies its test in both languages from Saved runs. The copied text is read back from the
clipboard and must be what the text area shows and the download holds; then it is run: vitest
and pytest pass it on a correct implementation and fail it on the starter's bug, naming the row sum.
"""

from __future__ import annotations

import json
import re

import pytest
from exercise_runner import IMPLEMENTATIONS, ROW_SUM_TEST, WEIGHTS_TEST, lay_out, run_pytest, run_vitest
from playwright.sync_api import Page, expect
from workbench_server import expect_save_answer, open_learner_page

from attention_core.exercise import case_filename, render_test
from attention_core.records import ExperimentRecord

QUERIES, KEYS = ("0.5", "-1.25", "2"), ("1.5", "3", "-0.75")


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    """Contexts that may read the clipboard back (and write it without a prompt)."""
    return {**browser_context_args, "permissions": ["clipboard-read", "clipboard-write"]}


def save_broken_run(page: Page, server) -> ExperimentRecord:
    for i, (q, k) in enumerate(zip(QUERIES, KEYS, strict=True), start=1):
        for label, text in ((f"Query {i}", q), (f"Key {i}", k)):
            page.get_by_label(label, exact=True).fill(text)
            page.get_by_label(label, exact=True).press("Enter")
    page.get_by_label("Mask after softmax (broken)", exact=True).check()
    page.get_by_label("Prediction").fill("Token 2 cannot read token 3; masking after softmax breaks row sums.")
    page.get_by_label("Label", exact=True).fill("mine")
    page.get_by_label("Label", exact=True).press("Tab")
    page.get_by_role("button", name="Save run").click()
    try:
        expect_save_answer(page, page.get_by_role("status").filter(has_text="Saved run “mine”"))
    except AssertionError as error:  # a server-side exception in a save's watchers shows only there
        raise AssertionError(f"{error}\nserver log:\n{server.log.read_text()[-4000:]}") from None
    (text,) = [t for t in server.texts() if json.loads(t)["label"] == "mine"]  # the shared store: this save's
    record = ExperimentRecord.from_json(text)
    assert record.failure_mode == "mask_after_softmax" and record.min_row_sum < 0.5
    assert record.inputs["queries"] == [float(q) for q in QUERIES]
    return record


def copy_test(page: Page, language: str, record: ExperimentRecord) -> str:
    """Choose ``language``, press Copy as test, and return the clipboard's text."""
    page.get_by_role("button", name=language).click()
    area = page.get_by_label("Generated test")
    expect(area).to_have_value(re.compile(rf"test-case {record.id} --lang (ts|py)\n"))
    lang = "ts" if language.startswith("TypeScript") else "py"
    expect(area).to_have_value(re.compile(f"--lang {lang}"))
    page.get_by_role("button", name="Copy as test").click()
    expect(page.get_by_role("status").filter(has_text="Copied the test to the clipboard")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == area.input_value()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download test").click()
    assert download.value.suggested_filename == case_filename(record, lang)
    assert open(download.value.path(), encoding="utf-8").read() == copied
    return copied


def test_copy_as_test_gives_a_test_that_passes_a_correct_solution_and_fails_the_starter(
        server, page, watch, tmp_path):
    open_learner_page(page, server.url)
    record = save_broken_run(page, server)
    expect(page.get_by_label("Test from run")).to_have_text(re.compile("Run 1 “mine”"))
    texts = {"ts": copy_test(page, "TypeScript (vitest)", record),
             "py": copy_test(page, "Python (pytest)", record)}
    for lang, text in texts.items():
        assert text == render_test(record, lang)
        assert "This test expects the CORRECT weights" in " ".join(text.split()).replace("// ", "")
    names = {lang: case_filename(record, lang) for lang in texts}
    lay_out(tmp_path, {impl: {names[lang]: text for lang, text in texts.items()} for impl in IMPLEMENTATIONS})
    results = {**run_vitest(tmp_path), **run_pytest(tmp_path, "correct"), **run_pytest(tmp_path, "starter")}
    for lang, name in names.items():
        assert {status for status, _ in results[("correct", name)].values()} == {"passed"}
        starter = results[("starter", name)]
        assert {t for t, (status, _) in starter.items() if status == "failed"} == {ROW_SUM_TEST[lang],
                                                                                    WEIGHTS_TEST[lang]}
        assert "row sum of row 1 is" in starter[ROW_SUM_TEST[lang]][1]
