"""The Check-yourself panel in a real Chromium (issue 24): Q1 of Self-Attention in Matrix Form is
answered and checked, three "Show me"s set the page as they say (inputs, failure mode, row, the
outlined cells of the Weights map), and Q1's answer is in the next saved run's record only."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from workbench_server import blocking_violations, open_learner_page, save_run, wait_until

from app.learner.self_check import Q1_CHOICES
from attention_core.modes import FAILURE_MODES

_HIGHLIGHT = """() => {
  const m = Bokeh.documents[0].get_model_by_name('weights-highlight');
  return m.visible ? [m.left, m.right, m.bottom, m.top] : null;
}"""


def outlined(page: Page, expected: list[float] | None) -> None:
    """Wait until the Weights map outlines ``expected`` ([left, right, bottom, top]) or nothing."""
    wait_until(lambda: page.evaluate(_HIGHLIGHT) == expected, f"the Weights map outlines {expected}", page=page)


def show_me(page: Page, short: str):
    page.get_by_role("button", name=f"Show me: {short}", exact=True).click()


def test_show_me_sets_the_page_and_q1s_answer_goes_into_the_next_saved_run(server, page, watch):
    open_learner_page(page, server.url, at_1280=True)
    page.get_by_role("button", name="Check yourself").click()
    wrong = Q1_CHOICES[1]
    expect(page.get_by_label(wrong, exact=True)).not_to_be_checked()  # nothing chosen for the learner
    page.get_by_label(wrong, exact=True).check()
    page.get_by_role("button", name="Check my answer").click()
    expect(page.get_by_test_id("q1-feedback")).to_contain_text("Not this one")
    expect(page.get_by_test_id("q1-feedback")).to_contain_text("Softmax operates across columns, the final axis.")
    page.get_by_role("button", name="Show the hint").click()
    expect(page.get_by_text("Each query row must sum to 1 over the positions it can read.")).to_be_visible()
    assert blocking_violations(page) == []

    # Q1: the four-token trace, row 3 outlined (row 3 of 4 is the second band from the bottom).
    show_me(page, "the softmax axis")
    expect(page.get_by_label("Input mode")).to_have_value("X and projections (W_Q, W_K, W_V)")
    expect(page.get_by_label("Tokens", exact=True)).to_have_value("4")
    expect(page.get_by_label("X token 4, component 1", exact=True)).to_have_value("-1")
    expect(page.get_by_label("Row", exact=True)).to_have_value("3")
    outlined(page, [0, 4, 1, 2])
    answer = page.get_by_test_id("answer-softmax_axis")
    expect(answer).to_contain_text("0.248 + 0.248 + 0.503 sum to 1 over the 3 keys it can read")

    # The leak: the worked row without the mask, row 2's future cell outlined.
    show_me(page, "the leak without a mask")
    expect(page.get_by_label("Failure mode")).to_have_value(FAILURE_MODES["no_mask"].title)
    expect(page.get_by_label("Key 3", exact=True)).to_have_value("9")
    expect(page.get_by_label("Row", exact=True)).to_have_value("2")
    outlined(page, [2, 3, 1, 2])
    expect(page.get_by_test_id("answer-future_leak")).to_contain_text("weight[2][3] = 0.999")

    # Batch mixing: the flattened batch, row 4's cells on item 1's tokens outlined.
    show_me(page, "batch mixing")
    expect(page.get_by_label("Failure mode")).to_have_value(FAILURE_MODES["batch_items_mixed"].title)
    expect(page.get_by_label("Batch size")).to_have_value("2")
    expect(page.get_by_label("Row", exact=True)).to_have_value("4")
    outlined(page, [0, 3, 2, 3])
    expect(page.locator("[data-check='batch_independence']")).to_contain_text("FAIL")
    expect(page.get_by_test_id("answer-batch")).to_contain_text("Independence between batch items: fails.")

    # Any other change of input drops the outline.
    page.get_by_label("Failure mode").select_option(label=FAILURE_MODES["correct"].title)
    outlined(page, None)

    save_run(page, "self-check answered", prediction="each row sums to 1")
    wait_until(lambda: any(r["label"] == "self-check answered" for r in server.records()),
               "the run is stored", page=page)
    record = next(r for r in server.records() if r["label"] == "self-check answered")
    assert record["self_check"] == {"question": "softmax_axis", "choice": wrong, "correct": False}
    save_run(page, "self-check not answered again")
    wait_until(lambda: any(r["label"] == "self-check not answered again" for r in server.records()),
               "the second run is stored", page=page)
    assert "self_check" not in next(r for r in server.records() if r["label"] == "self-check not answered again")
