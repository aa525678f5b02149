"""Predict first (issue 24) without a browser: LearnerState's ``predict_first`` and ``revealed``,
what the learner page and the embed hide until a prediction is written, and the prediction shown
beside row 2's outcome."""

from __future__ import annotations

import pytest
from bokeh.document import Document
from store_helpers import PAGE_KEY, sqlite_store

from app.learner.embed import EmbedPage
from app.learner.page import LearnerPage
from app.learner.page_key import key_hash
from app.learner.record import outcome_html
from app.learner.state import LearnerState

OTHER_KEY = "fedcba9876543210" * 2


def hidden_parts(page: LearnerPage) -> dict[str, bool]:
    """Whether each part derived from the weights shows now."""
    return {"weights map": page.matrices.weights.visible, "readouts": page.readouts.pane.visible,
            "banner": page.banner.pane.visible,
            "contributions": page.contributions.__panel__().visible,
            # In vector mode the ablations are a heading and a sentence atop the introduction.
            "ablation": page.ablation.visible if page.ablation is not None
            else "Projection ablations" in str(page.intro.object),
            "weight steps": "Weights of row 2" in str(page.steps.pane.object)}


def test_revealed_follows_predict_first_and_a_written_prediction():
    state = LearnerState()
    assert not state.predict_first and state.revealed  # the page as it always was
    state.predict_first = True
    assert not state.revealed
    state.prediction = "  \n "  # blank is no prediction
    assert not state.revealed
    state.prediction = "token 2 cannot read token 3"
    assert state.revealed
    state.prediction = ""
    assert not state.revealed
    state.predict_first = False
    assert state.revealed


def test_saving_still_needs_the_prediction_and_stores_it(tmp_path):
    state = LearnerState(store=sqlite_store(tmp_path / "runs"), predict_first=True)
    assert state.save_run() is None and "write your prediction first" in state.save_message
    state.prediction = "row 2 keeps no future weight"
    record = state.save_run()
    assert record is not None and record.prediction == "row 2 keeps no future weight"
    assert state.store.get(record.id).prediction == "row 2 keeps no future weight"


def test_a_first_prediction_and_a_first_save_add_no_model_to_the_page(learner_page):
    # A model added to a served page makes Bokeh walk every model of that page again, on the
    # server's one thread, as the learner waits: the outcome and the save's message are made with
    # the page and only shown, since nearly every learner writes a prediction and saves.
    page, doc = learner_page, Document()
    doc.add_root(page.__panel__().get_root(doc))
    page.make_below_maps()  # what `serve` adds once the page has loaded
    models = set(doc.models)
    state = page.state
    state.awaiting_key = False
    state.prediction = "row 2 keeps no future weight"
    assert state.save_run() is not None
    assert page.prediction.outcome.visible and "row 2 keeps no future weight" in page.prediction.outcome.object
    assert page.record.message.visible and "Saved run" in page.record.message.object
    assert set(doc.models) == models


def test_the_prediction_leads_the_main_area_in_one_layout_only(learner_page):
    page = learner_page
    assert page.main.objects[0] is page.prediction.__panel__()  # a Column holds a view's layout
    widget = page.prediction.prediction
    assert widget.name == "Prediction"
    record_layout = page.record.__panel__()
    assert list(record_layout.select(type(widget))) == [] and page.record.button in record_layout.objects


def test_predict_first_hides_everything_derived_from_the_weights_until_a_prediction(learner_page):
    page, state = learner_page, learner_page.state
    state.failure_mode = "mask_after_softmax"  # the banner has something to say
    assert all(hidden_parts(page).values())
    assert not page.matrices.hidden_note.visible
    state.predict_first = True
    assert not any(hidden_parts(page).values()), hidden_parts(page)
    assert page.matrices.hidden_note.visible and page.matrices.scores.visible  # the scores stay
    assert set(page.matrices.scores.source.data["weight_text"]) == {"shown once you predict"}  # its hover
    assert "The steps after the scores show once your prediction is written." in page.steps.pane.object
    assert "[1.000, 2.000, 9.000]" in page.steps.pane.object  # the score steps stay
    state.prediction = "It cannot."
    assert all(hidden_parts(page).values()), hidden_parts(page)
    assert not page.matrices.hidden_note.visible
    assert page.matrices.scores.source.data["weight_text"][:3] == ["0.000335", "0", "0"]


def test_a_batchs_weight_maps_hide_too(learner_page):
    page, state = learner_page, learner_page.state
    state.apply_preset("batch_padded")
    state.predict_first = True
    shown = [w.visible for w in page.matrices.item_weights]
    assert shown == [False, False, False] and [s.visible for s in page.matrices.item_scores][:2] == [True, True]
    assert set(page.matrices.item_scores[1].source.data["weight_text"]) == {"shown once you predict"}
    state.prediction = "p"
    assert [w.visible for w in page.matrices.item_weights] == [True, True, False]


def test_y_made_from_the_weights_waits_too(learner_page):
    page, state = learner_page, learner_page.state
    state.apply_preset("output_projection")
    table = "<caption>Y = H W_O"  # Y's shape in the list of shapes stays
    assert table in page.projections.pane.object
    state.predict_first = True
    assert table not in page.projections.pane.object and "<caption>Q = X W_Q" in page.projections.pane.object
    state.prediction = "p"
    assert table in page.projections.pane.object


def test_the_ablation_panel_is_not_computed_while_it_waits(learner_page):
    """Hidden with the weights, the panel does not follow each edit; it catches up once shown."""
    page, state = learner_page, learner_page.state
    state.predict_first = True
    state.apply_preset("four_token_trace")
    panel = page.ablation_panel
    assert not page.ablation.visible and not panel.active and panel.ablation is None
    state.set_token_text("x", 2, "5")
    assert panel.ablation is None
    state.prediction = "Token 4 reads token 3 most."
    assert page.ablation.visible and panel.active and panel.ablation.before is state.layer
    state.set_token_text("x", 2, "6")
    assert panel.ablation.before is state.layer


def test_the_embed_makes_no_ablation_panel_it_would_not_show(tmp_path):
    embed = EmbedPage(page=LearnerPage(store=sqlite_store(tmp_path / "runs"), map_size=176))
    embed.take_host_text({"prediction": "It cannot."})
    embed.page.state.apply_preset("four_token_trace")
    assert embed.page.ablation_panel is None and embed.page.state.layer.x is not None


def test_the_embed_waits_for_a_prediction_unless_one_is_passed_in(tmp_path):
    embed = EmbedPage(page=LearnerPage(store=sqlite_store(tmp_path / "runs"), map_size=176))
    state = embed.page.state
    assert state.predict_first and not state.revealed
    assert not embed.invariants.pane.visible and not embed.page.matrices.weights.visible
    assert "Prediction and saved runs tab" in embed.page.matrices.hidden_note.object
    embed.take_host_text({"prediction": "It cannot."})
    assert state.revealed and embed.invariants.pane.visible and embed.page.matrices.weights.visible


def test_the_outcome_is_row_2s_weight_on_token_3_its_future_weight_and_the_row_sums():
    state = LearnerState()
    assert outcome_html("", state.result) == "" and outcome_html("  ", state.result) == ""
    text = outcome_html("<b>no</b> & never", state.result)
    assert "You predicted: <q>&lt;b&gt;no&lt;/b&gt; &amp; never</q>" in text
    assert ("<b>Correct, causal</b>: row 2's weight on token 3: <b>0</b>; row 2's future-token "
            "weight: <b>0</b>; row sums: 1.000, 1.000, 1.000.") in text
    state.param.update(causal=False)
    assert "row 2's weight on token 3: <b>0.999</b>; row 2's future-token weight: <b>0.999</b>" in \
        outcome_html("p", state.result)
    state.param.update(causal=True, failure_mode="mask_after_softmax")
    assert "row sums: 0.000335 ✗ not 1, 0.00125 ✗ not 1, 1.000" in outcome_html("p", state.result)
    assert "(the last valid input)" in outcome_html("p", state.result, input_ok=False)


@pytest.mark.parametrize("tokens, says, leaves_out", [
    (2, "row 2's future-token weight: <b>0</b>", "token 3"),
    (1, "row 1's future-token weight: <b>0</b>", "token 3"),
])
def test_a_shorter_run_speaks_of_the_rows_it_has(tokens, says, leaves_out):
    state = LearnerState(tokens=tokens)
    text = outcome_html("p", state.result)
    assert says in text and leaves_out not in text


def test_a_long_prediction_is_repeated_cut_wrapping_and_said_to_be_over_the_limit():
    state = LearnerState()
    text = outcome_html("https://example.org/" + "a" * 3000, state.result)
    assert "overflow-wrap: anywhere" in text and "a" * 400 not in text and "…</q>" in text
    assert "(it is 3020 characters long; Save run takes up to 2000)" in text
    assert "characters long" not in outcome_html("It cannot.", state.result)
    assert "<q>It cannot.</q><br>This run" in outcome_html("It cannot.", state.result)


def test_a_reloaded_page_gets_its_runs_prediction_back_and_stays_revealed(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    first = LearnerState(store=store, predict_first=True, key_hash=key_hash(PAGE_KEY),
                         prediction="Row 2 keeps no future weight.")
    record = first.save_run()
    # A reload: the address's ?runs= lists the run, then the browser's page key makes it its own.
    reloaded = LearnerState(store=store, predict_first=True)
    reloaded.restore_runs([record.id])
    assert reloaded.prediction == "" and not reloaded.revealed
    reloaded.take_page_key(PAGE_KEY)
    assert reloaded.prediction == "Row 2 keeps no future weight." and reloaded.revealed
    written = LearnerState(store=store, prediction="A newer one.")
    written.take_page_key(PAGE_KEY)
    assert written.prediction == "A newer one."  # one already written is kept


def test_a_link_to_another_pages_runs_does_not_write_their_prediction_as_this_learners(tmp_path):
    store = sqlite_store(tmp_path / "runs")
    record = LearnerState(store=store, key_hash=key_hash(PAGE_KEY), prediction="Ada's guess.").save_run()
    classmate = LearnerState(store=store, predict_first=True)
    classmate.restore_runs([record.id])
    classmate.take_page_key(OTHER_KEY)
    assert [r.id for r in classmate.saved] == [record.id] and classmate.owned == []
    assert classmate.prediction == "" and not classmate.revealed
    # … and a ?run= that fails beside it shows no prediction either.
    classmate.open_run_id("no-such-run")
    assert classmate.prediction == "" and classmate.open_message.startswith("Run not opened: ")
