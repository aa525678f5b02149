"""A run belongs to the page that saved it, in a real Chromium: a link shows it to anyone, only
the page holding its key explains it, and a page's runs come back from its key after a reload."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import expect
from store_helpers import T0
from workbench_server import open_learner_page, save_run, saved_runs, watched_session

from app.learner.page_key import STORAGE_NAME, key_hash
from app.learner.state import MAX_RESTORED_RUNS
from attention_core import scaled_dot_product_attention
from attention_core.records import ExperimentRecord

EXPLAIN = re.compile(r"^Explanation (not )?saved")


def runs_in_address(page) -> list[str]:
    return parse_qs(urlparse(page.url).query).get("runs", [""])[0].split(",")


def stored_explanation(server, run_id: str) -> str | None:
    with server.store() as store:
        return store.get(run_id).explanation


def explain(page, text: str):
    page.get_by_label("Explanation", exact=True).fill(text)
    page.get_by_label("Explanation", exact=True).press("Tab")
    page.get_by_role("button", name="Save explanation").click()
    status = page.get_by_role("status").filter(has_text=EXPLAIN)
    expect(status).to_be_visible()
    return status


def test_a_runs_link_shows_it_but_only_the_page_that_saved_it_explains_it(server, page, watch, browser):
    open_learner_page(page, server.url)
    save_run(page, f"mine {uuid.uuid4().hex[:6]}", prediction="Row 2 cannot read token 3.")
    expect(page).to_have_url(re.compile(r"[?&]runs=[A-Za-z0-9_-]+"))
    (run_id,) = runs_in_address(page)
    key = page.evaluate("name => localStorage.getItem(name)", STORAGE_NAME)
    assert re.fullmatch(r"[0-9a-f]{32}", key) and key not in page.url

    # Someone with the page's address, in a browser of their own: the run is shown, not theirs.
    context, other, other_watch = watched_session(browser, server)
    try:
        open_learner_page(other, f"{server.url}?runs={run_id}")
        expect(saved_runs(other)).to_have_count(1)
        expect(other.get_by_text("but run 1 was saved by another page: it can be read here, not "
                                 "explained.")).to_be_visible()
        refused = explain(other, "Someone else's words.")
        expect(refused).to_have_text(re.compile(r"^Explanation not saved: run 1 was saved by another page .* "
                                                r"open your own page to explain your runs\.$"))
        assert stored_explanation(server, run_id) is None
        other_watch.assert_clean()
    finally:
        context.close()

    # The owner reloads without ?runs=: the run is listed from the page's key, and explained.
    open_learner_page(page, server.url)
    expect(saved_runs(page)).to_have_count(1)
    expect(page.get_by_role("table", name="Saved runs").locator(f"tr[data-run-id='{run_id}']")).to_have_count(1)
    expect(explain(page, "The mask comes before softmax.")).to_have_text(re.compile("^Explanation saved to run 1"))
    assert stored_explanation(server, run_id) == "The mask comes before softmax."


def test_a_run_committed_as_the_server_died_is_listed_once_the_page_is_back(server, page, watch):
    open_learner_page(page, server.url)
    key = page.evaluate("name => localStorage.getItem(name)", STORAGE_NAME)
    # Committed with this page's key, but the page never heard (its server died right after).
    result = scaled_dot_product_attention([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], failure_mode="mask_after_softmax")
    label = f"committed as the server died {uuid.uuid4().hex[:6]}"
    record = ExperimentRecord.from_result(result, label=label, prediction="p")
    earlier = [ExperimentRecord.from_result(result, label=f"earlier {n}", prediction="p",
                                            created_at=T0 + timedelta(minutes=n)) for n in range(MAX_RESTORED_RUNS)]
    with server.store() as store:
        for saved in [*earlier, record]:
            store.save(saved, key_hash=key_hash(key))
    expect(saved_runs(page)).to_have_count(0)
    page.reload()
    expect(saved_runs(page)).to_have_count(MAX_RESTORED_RUNS + 1, timeout=30_000)
    expect(saved_runs(page).last).to_contain_text(label)
    # The address keeps the latest 50 (what a reload takes back from it), not every listed id.
    expect(page).to_have_url(re.compile(rf"[?&]runs=[^&]*{record.id}$"))
    assert runs_in_address(page) == [r.id for r in [*earlier, record][-MAX_RESTORED_RUNS:]]
